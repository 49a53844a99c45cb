"""Run in a subprocess with 8 host devices: prefill in pieces on a mesh.

For a 2x2x2 (batch over data x fsdp = 4 shards, kv heads over tensor) and a
1x8x1 mesh, compares a whole-batch sampler with piece samplers (row blocks
that do not divide each shard's rows, time slices): greedy and seeded
tokens, log-probs, a two-turn session; the cache keeps its sharding (a
second call compiles nothing) and the piece program moves no more data
between devices than the whole-batch one. Prints RESULT <json>.
"""

import json
import os
import re

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax
import numpy as np
from flax import nnx

from rla_jax import sharding as shd
from rla_jax.compile_counter import CompileCounter
from rla_jax.models import Qwen, QwenConfig
from rla_jax.sampling.sampler import Sampler

CFG = QwenConfig(
  "qwen3",
  vocab_size=320,
  hidden_size=64,
  intermediate_size=128,
  num_layers=2,
  num_heads=8,
  num_kv_heads=4,
  head_dim=16,
)
PIECES = ({"prefill_rows": 3}, {"prefill_rows": 1, "prefill_tokens": 12})
KW = {"max_prompt_len": 32, "max_new_tokens": 6, "batch_buckets": (8, 16)}


def _prompts(n, seed):
  rng = np.random.RandomState(seed)
  return [
    list(map(int, rng.randint(3, 320, size=rng.randint(2, 30))))
    for _ in range(n)
  ]


def _collectives(sampler, B, T):
  """Counts of cross-device ops in the compiled prefill program."""
  cache = sampler.caches.new(B, T + 6)
  ids = sampler.placement.place(np.zeros((B, T), np.int32), ("batch", "length"))
  low = sampler.lower_prefill(cache, ids, ids)
  text = low.compile().as_text()
  ops = ("all-gather", "all-to-all", "collective-permute", "all-reduce")
  return {op: len(re.findall(rf"= \S+ {op}(-start)?\(", text)) for op in ops}


def _run(sampler, first, second):
  greedy = sampler.generate(first, greedy=True)
  sampled = sampler.generate(first, seed=4, temperature=1.0, num_samples=2)
  turns = _session(sampler, first, second)
  with CompileCounter() as counter:  # the same buckets again
    sampler.generate(first, greedy=True)
    _session(sampler, first, second)
  return [greedy, sampled, *turns], counter.count


def _session(sampler, first, second):
  session = sampler.session(len(first), 96)
  return [
    session.turn(first, seed=1, temperature=1.0),
    session.turn(second, seed=2, temperature=1.0),
  ]


def _diff(a, b):
  tok = all(x.tokens == y.tokens for x, y in zip(a, b, strict=True))
  lp = max(
    float(np.abs(p - q).max(initial=0.0))
    for x, y in zip(a, b, strict=True)
    for p, q in zip(x.logprobs, y.logprobs, strict=True)
  )
  return tok, lp


def main():
  assert jax.device_count() == 8, jax.devices()
  model = Qwen(CFG, rngs=nnx.Rngs(0))
  first, second = _prompts(10, 0), _prompts(10, 1)
  ref, _ = _run(Sampler(model, **KW), first, second)
  result = {}
  for name, sizes in {"2x2x2": (2, 2, 2), "1x8x1": (1, 8, 1)}.items():
    mesh = shd.make_mesh(*sizes)
    whole = Sampler(model, mesh=mesh, **KW)
    base, _ = _run(whole, first, second)
    tok, lp = _diff(base, ref)
    result[f"{name}/whole"] = {"tokens": tok, "lp": lp}
    result[f"{name}/whole/collectives"] = _collectives(whole, 16, 32)
    for kw in PIECES:
      s = Sampler(model, mesh=mesh, **KW, **kw)
      outs, compiles = _run(s, first, second)
      tok, lp = _diff(outs, base)
      key = f"{name}/" + ",".join(f"{k}={v}" for k, v in kw.items())
      result[key] = {"tokens": tok, "lp": lp, "compiles": compiles}
      result[key + "/collectives"] = _collectives(s, 16, 32)
  print("RESULT " + json.dumps(result))


if __name__ == "__main__":
  main()
