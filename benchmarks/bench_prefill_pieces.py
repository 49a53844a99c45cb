"""Prefill time: whole batch vs row pieces (`Sampler(prefill_rows=...)`).

A random Qwen3 of the ALFWorld warm start's shape (hidden 256, MLP 768, 4
layers, 4 heads, 2 kv heads, head_dim 64, vocab 1024) generates one greedy
token from B prompts of P random ids, so the call is the prefill. Every
sampler is compiled first, then the calls are interleaved over --runs
rounds (a shared machine's load drifts alike for all); min and median
wall seconds per setting.

Usage: python benchmarks/bench_prefill_pieces.py --batch 32 --prompt 512
"""

import argparse
import time

import numpy as np
from flax import nnx

from rla_jax.models import Qwen, QwenConfig
from rla_jax.sampling.sampler import Sampler

CFG = QwenConfig(
  "qwen3",
  vocab_size=1024,
  hidden_size=256,
  intermediate_size=768,
  num_layers=4,
  num_heads=4,
  num_kv_heads=2,
  head_dim=64,
)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--batch", type=int, default=32)
  ap.add_argument("--prompt", type=int, default=512)
  ap.add_argument("--rows", default="0,4,8,16", help="prefill_rows values")
  ap.add_argument("--runs", type=int, default=3)
  args = ap.parse_args()
  B, P = args.batch, args.prompt
  model = Qwen(CFG, rngs=nnx.Rngs(0))
  rng = np.random.RandomState(0)
  prompts = [list(map(int, rng.randint(3, 1000, size=P))) for _ in range(B)]
  samplers = {
    r: Sampler(
      model,
      max_prompt_len=P,
      max_new_tokens=1,
      prompt_buckets=(P,),
      batch_buckets=(B,),
      prefill_rows=r,
    )
    for r in map(int, args.rows.split(","))
  }
  for s in samplers.values():
    s.generate(prompts, greedy=True)  # compile
  times = {r: [] for r in samplers}
  for _ in range(args.runs):
    for r, s in samplers.items():
      t = time.perf_counter()
      s.generate(prompts, greedy=True)
      times[r].append(time.perf_counter() - t)
  for r, ts in times.items():
    ts = sorted(ts)
    print(
      f"B={B} P={P} prefill_rows={r}: min {ts[0]:.2f} s, "
      f"median {ts[len(ts) // 2]:.2f} s"
    )


if __name__ == "__main__":
  main()
