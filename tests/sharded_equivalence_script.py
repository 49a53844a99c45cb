"""Run in a subprocess with 8 host devices: sharded == unsharded.

Builds a tiny Qwen3 model, shards it over a 2x2x2 and a 2x4 mesh with the
training and sampling rules, and prints the max abs logit difference and a
greedy-sampling comparison as JSON.
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax
import jax.numpy as jnp
import numpy as np

from rla_jax import sharding as shd
from rla_jax.models import load_qwen
from rla_jax.sampling.sampler import Sampler


def main(model_dir):
  assert jax.device_count() == 8, jax.devices()
  model = load_qwen(model_dir)
  rng = np.random.RandomState(0)
  tokens = rng.randint(0, model.cfg.vocab_size, (4, 12))
  mask = np.ones_like(tokens)
  mask[1, :5] = 0
  ref = np.asarray(model(jnp.asarray(tokens), jnp.asarray(mask))[0])
  prompts = [list(map(int, tokens[i][mask[i] == 1])) for i in range(4)]
  ref_tokens = (
    Sampler(model, max_prompt_len=16, max_new_tokens=6)
    .generate(prompts, greedy=True)
    .tokens
  )
  result = {}
  for name, sizes in {"2x2x2": (2, 2, 2), "2x4": (2, 1, 4)}.items():
    mesh = shd.make_mesh(*sizes)
    for rules_name, rules in (
      ("train", shd.TRAIN_RULES),
      ("sample", shd.SAMPLE_RULES),
    ):
      # Load straight into the sharding (streaming path of load_qwen).
      sharded = load_qwen(
        model_dir, sharding_fn=shd.param_sharding_fn(mesh, rules)
      )
      n_sharded = sum(
        len(v.get_value().sharding.device_set) > 1
        for v in jax.tree.leaves(
          __import__("flax").nnx.state(sharded),
          is_leaf=lambda x: hasattr(x, "get_value"),
        )
      )
      batch = shd.batch_sharding(mesh, rules)
      out = sharded(jax.device_put(tokens, batch), jax.device_put(mask, batch))
      diff = float(np.abs(np.asarray(out[0]) - ref)[mask == 1].max())
      result[f"{name}/{rules_name}"] = {
        "diff": diff,
        "sharded_params": n_sharded,
      }
    sampled = Sampler(model, max_prompt_len=16, max_new_tokens=6, mesh=mesh)
    result[f"{name}/greedy_equal"] = (
      sampled.generate(prompts, greedy=True).tokens == ref_tokens
    )
  print("RESULT " + json.dumps(result))


if __name__ == "__main__":
  main(sys.argv[1])
