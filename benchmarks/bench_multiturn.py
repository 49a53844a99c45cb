"""Multi-turn agent cost: cache continuation vs re-encoding the history.

An agent turn appends an observation (--obs tokens) and samples a reply
(--reply tokens). Re-encoding prefills the whole history every turn, so
total work grows quadratically with the number of turns; a `Session`
appends only the new tokens to the kept KV cache. Both produce the same
tokens (tests/test_sampler.py); this script measures wall time per turn.

  python benchmarks/bench_multiturn.py [--turns 24 --batch 16]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from flax import nnx

from rla_jax.compile_counter import compile_count
from rla_jax.models import Qwen, QwenConfig
from rla_jax.sampling.buckets import pick_bucket
from rla_jax.sampling.sampler import Sampler


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--turns", type=int, default=24)
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--obs", type=int, default=48)
  ap.add_argument("--reply", type=int, default=8)
  ap.add_argument("--hidden", type=int, default=256)
  args = ap.parse_args()
  cfg = QwenConfig(
    "qwen3",
    vocab_size=4096,
    hidden_size=args.hidden,
    intermediate_size=3 * args.hidden,
    num_layers=4,
    num_heads=4,
    num_kv_heads=2,
    head_dim=64,
    tie_word_embeddings=True,
  )
  model = Qwen(cfg, rngs=nnx.Rngs(0))
  total = args.turns * (args.obs + args.reply)
  max_len = 1 << (total - 1).bit_length()
  sampler = Sampler(
    model,
    max_prompt_len=max_len,
    max_new_tokens=args.reply,
    prompt_buckets=tuple(64 * 2**i for i in range(20) if 64 * 2**i <= max_len)
    or (max_len,),
  )
  rng = np.random.RandomState(0)
  turns = [
    [list(map(int, rng.randint(3, 4096, args.obs))) for _ in range(args.batch)]
    for _ in range(args.turns)
  ]

  def run(mode):
    history = [[] for _ in range(args.batch)]
    # Each turn's chunk is padded to its bucket inside the cache.
    chunk = pick_bucket(args.obs, sampler.prompt_buckets, "observation")
    session = (
      sampler.session(
        args.batch, args.turns * (chunk + args.reply) + chunk + args.reply
      )
      if mode == "session"
      else None
    )
    times, outs = [], []
    for new in turns:
      t0 = time.perf_counter()
      if session is not None:
        out = session.turn(new, greedy=True)
      else:
        for h, n in zip(history, new, strict=True):
          h += n
        out = sampler.generate(history, greedy=True)
      times.append(time.perf_counter() - t0)
      outs.append(out.tokens)
      if session is None:
        for h, t in zip(history, out.tokens, strict=True):
          h += t
    return times, outs

  for mode in ("session", "reencode"):  # warm-up: compile every bucket
    run(mode)
  c0 = compile_count()
  s_times, s_out = run("session")
  r_times, r_out = run("reencode")
  assert compile_count() == c0, "recompiled after warm-up"
  assert s_out == r_out, "session and re-encoding disagree"
  print(
    f"batch {args.batch}, {args.turns} turns of {args.obs} observation "
    f"+ {args.reply} reply tokens, hidden {args.hidden}"
  )
  print("| turns | session s/turn | re-encode s/turn | ratio |")
  print("|---|---|---|---|")
  for lo, hi in (
    (0, 4),
    (args.turns // 2 - 2, args.turns // 2 + 2),
    (args.turns - 4, args.turns),
  ):
    s, r = np.median(s_times[lo:hi]), np.median(r_times[lo:hi])
    print(f"| {lo + 1}-{hi} | {s:.3f} | {r:.3f} | {r / s:.2f}x |")
  print(
    f"| total | {sum(s_times):.2f} s | {sum(r_times):.2f} s | "
    f"{sum(r_times) / sum(s_times):.2f}x |"
  )


if __name__ == "__main__":
  main()
