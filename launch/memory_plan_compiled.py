"""Real shard sizes and XLA compiled memory analysis, next to the analytical
model (`launch/param_memory.py`, `launch/activation_memory.py`).

Runs as its own process because the device count must be fixed before JAX
starts:

  python launch/memory_plan_compiled.py --devices 8          # CPU, small
  python launch/memory_plan_compiled.py --devices 0 --preset qwen2.5-7b-instruct
      # the real backend's devices (e.g. one GPU), compile only, no weights

It prints one line `RESULT {json}` with, per check, the analytical and the
measured/compiled bytes (per device):
  * params: a small model really built and sharded with TRAIN_RULES; the
    bytes of each device's shards (only with --materialize, CPU sized);
  * train: `jit(train_step).lower(abstract args).compile().memory_analysis()`
    of one AdamW step (fp32 params, bf16 compute, remat) on one micro-batch;
  * prefill: the same for one prefill into a bf16 KV cache with a bf16
    tensor-parallel weight copy (SAMPLE_RULES): the whole batch at once
    (`programs.prefill_whole`) or, with --prefill-rows R, the sampler's
    piecewise prefill (`rla_jax.sampling.prefill.prefill`, R rows per batch
    shard per piece in a fori_loop).

--attention picks the `rla_jax.models.attention` implementation of both
programs (default einsum, what the recorded H200 lines used); --layers
overrides the preset's layer count (a cheap compile at long sequences).
The before/after check of docs/MEMORY_PLAN.md (run by `memory_plan.py
--compiled`, see `memory_plan_checks.BEFORE_AFTER_ARGS`):

  python launch/memory_plan_compiled.py --devices 8 --layers 2 --seq 4096 \
    --rows 64 --prompt 2048 --gen 4096 --attention einsum
  python launch/memory_plan_compiled.py --devices 8 --layers 2 --seq 4096 \
    --rows 64 --prompt 2048 --gen 4096 --attention blockwise --prefill-rows 4
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys


def _args():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument(
    "--devices",
    type=int,
    default=8,
    help="forced CPU device count; 0 = use the real backend",
  )
  ap.add_argument(
    "--preset",
    default="small",
    help="'small' or a launch/memory_model.py PRESETS key",
  )
  ap.add_argument("--mesh", default="1,4,2", help="data,fsdp,tensor")
  ap.add_argument("--seq", type=int, default=512, help="train sequence")
  ap.add_argument("--remat", default="full")
  ap.add_argument("--rows", type=int, default=16, help="prefill rows")
  ap.add_argument("--prompt", type=int, default=128)
  ap.add_argument("--gen", type=int, default=128)
  ap.add_argument(
    "--attention",
    default="einsum",
    help="rla_jax.models.attention implementation (train and prefill)",
  )
  ap.add_argument(
    "--prefill-rows",
    type=int,
    default=0,
    help="rows per batch shard per prefill piece; 0 = the whole batch",
  )
  ap.add_argument(
    "--layers", type=int, default=0, help="override num_layers (0: preset)"
  )
  ap.add_argument(
    "--materialize",
    action="store_true",
    help="also build and shard the real model (small only)",
  )
  return ap.parse_args()


ARGS = _args()
if ARGS.devices > 0:
  os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_"
    f"host_platform_device_count={ARGS.devices}"
  )
  os.environ["JAX_PLATFORMS"] = "cpu"
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from launch import memory_model as mm
from launch import memory_phases as mp
from launch import param_memory as pm
from rla_jax import sharding as shd
from rla_jax.models import unrolled
from rla_jax.models.kv_cache import (
  cache_logical_axes,
  init_cache,
  is_axes,
)
from rla_jax.models.logprobs import sequence_logprobs
from rla_jax.models.qwen import Qwen
from rla_jax.sampling import prefill as pieces
from rla_jax.sampling import programs

SMALL = mm.SMALL


def abstract_state(cfg, mesh, rules, param_dtype, dtype):
  """(graphdef, State of sharded ShapeDtypeStructs) via nnx.eval_shape."""
  model = nnx.eval_shape(
    lambda: Qwen(
      cfg,
      rngs=nnx.Rngs(0),
      dtype=dtype,
      param_dtype=param_dtype,
      remat=ARGS.remat,
      attention=ARGS.attention,
    )
  )
  graphdef, state = nnx.split(model)

  def place(var):
    v = var.get_value()
    spec = shd.logical_to_spec(var.logical_axes, v.shape, mesh, rules)
    return var.replace(
      jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=NamedSharding(mesh, spec))
    )

  return graphdef, jax.tree.map(
    place, state, is_leaf=lambda x: isinstance(x, nnx.Variable)
  )


def stats(compiled) -> dict:
  m = compiled.memory_analysis()
  keys = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
  )
  out = {k.replace("_size_in_bytes", ""): int(getattr(m, k)) for k in keys}
  out["peak"] = out["argument"] + out["output"] - out["alias"] + out["temp"]
  return out


def compiled_train(cfg, mesh) -> dict:
  graphdef, params = abstract_state(
    cfg, mesh, shd.TRAIN_RULES, jnp.float32, jnp.bfloat16
  )
  tx = optax.adamw(1e-6, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0)
  opt = jax.eval_shape(tx.init, params)
  p_leaves = jax.tree.leaves(params)
  o_leaves, o_def = jax.tree.flatten(opt)
  repl = NamedSharding(mesh, P())
  if len(o_leaves) != 1 + 2 * len(p_leaves):
    raise RuntimeError("unexpected AdamW state layout")
  o_sh = [repl] + [p.sharding for p in p_leaves] * 2
  opt = jax.tree.unflatten(
    o_def,
    [
      jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=s)
      for leaf, s in zip(o_leaves, o_sh, strict=True)
    ],
  )
  dp = mesh.shape["data"] * mesh.shape["fsdp"]
  batch_sh = shd.batch_sharding(mesh, shd.TRAIN_RULES)
  tokens = jax.ShapeDtypeStruct((dp, ARGS.seq), jnp.int32, sharding=batch_sh)
  mask = jax.ShapeDtypeStruct((dp, ARGS.seq), jnp.int32, sharding=batch_sh)

  def train_step(params, opt_state, tokens, mask):
    def loss_fn(p):
      lp = sequence_logprobs(nnx.merge(graphdef, p), tokens, mask)
      return -(lp * mask).sum() / mask.sum()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  p_sh = jax.tree.map(lambda x: x.sharding, params)
  o_sh_tree = jax.tree.map(lambda x: x.sharding, opt)
  step = jax.jit(
    train_step, out_shardings=(p_sh, o_sh_tree, repl), donate_argnums=(0, 1)
  )
  got = stats(step.lower(params, opt, tokens, mask).compile())
  fake = pm.fake_mesh(*(mesh.shape[a] for a in shd.MESH_AXES))
  wl = mm.Workload(remat=ARGS.remat, attention=ARGS.attention)
  est = mp.train_phase_bytes(cfg, fake, ARGS.seq, wl)
  est["grads_f32_micro"] = est.pop("grads_f32_accum+micro") // 2
  return {
    "compiled": got,
    "analytical": est,
    "analytical_args": est["params_f32"]
    + est["adam_mu_nu_f32"]
    + 2 * dp * ARGS.seq * 4 // dp,
    "analytical_temp": est["grads_f32_micro"]
    + est["gathered_bf16_weights"]
    + est["activations"],
  }


def _lower_prefill(cfg, mesh, params, cache, tokens):
  """The sampler's prefill lowered on abstract inputs: `programs.prefill_whole`
  (whole batch) or, with --prefill-rows, `prefill.prefill` with the
  PiecePlan the Sampler builds (rows per batch shard, the SAMPLE_RULES
  batch axes)."""
  dt, att = jnp.dtype(jnp.bfloat16), ARGS.attention
  if ARGS.prefill_rows > 0:
    axes = dict(shd.SAMPLE_RULES)["batch"]
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    plan = pieces.PiecePlan(
      rows=ARGS.prefill_rows,
      shards=math.prod(mesh.shape[a] for a in axes),
      mesh=mesh,
      batch_axes=axes,
    )
    low = pieces.prefill.lower(
      cfg, dt, plan, params, cache, tokens, tokens, attention=att
    )
  else:
    low = programs.prefill_whole.lower(
      cfg, dt, params, cache, tokens, tokens, attention=att
    )
  return low


def compiled_prefill(cfg, mesh) -> dict:
  """The sampler's own prefill program (`programs.prefill_whole`: layer-unrolled
  bf16 weight copy, per-layer bf16 cache; with --prefill-rows the
  piecewise `prefill.prefill` with the PiecePlan the Sampler builds),
  compiled on abstract inputs."""
  graphdef, state = abstract_state(
    cfg, mesh, shd.SAMPLE_RULES, jnp.bfloat16, jnp.bfloat16
  )
  model = nnx.merge(graphdef, state)
  shapes = jax.eval_shape(
    lambda st: unrolled.unstack(nnx.merge(graphdef, st)), state
  )
  params = jax.tree.map(
    lambda axes, x: jax.ShapeDtypeStruct(
      x.shape,
      x.dtype,
      sharding=(
        NamedSharding(
          mesh, shd.logical_to_spec(axes, x.shape, mesh, shd.SAMPLE_RULES)
        )
      ),
    ),
    unrolled.logical_axes(model),
    shapes,
    is_leaf=is_axes,
  )
  rows, slots = ARGS.rows, ARGS.prompt + ARGS.gen
  cache = jax.eval_shape(lambda: init_cache(cfg, rows, slots, jnp.bfloat16))
  cache = jax.tree.map(
    lambda axes, x: jax.ShapeDtypeStruct(
      x.shape,
      x.dtype,
      sharding=(
        NamedSharding(
          mesh, shd.logical_to_spec(axes, x.shape, mesh, shd.SAMPLE_RULES)
        )
      ),
    ),
    cache_logical_axes(cfg),
    cache,
    is_leaf=is_axes,
  )
  batch_sh = shd.batch_sharding(mesh, shd.SAMPLE_RULES)
  tokens = jax.ShapeDtypeStruct(
    (rows, ARGS.prompt), jnp.int32, sharding=batch_sh
  )
  got = stats(_lower_prefill(cfg, mesh, params, cache, tokens).compile())
  fake = pm.fake_mesh(*(mesh.shape[a] for a in shd.MESH_AXES))
  est = mp.sample_phase_bytes(
    cfg,
    fake,
    rows,
    ARGS.prompt,
    ARGS.gen,
    ARGS.prefill_rows or None,
    ARGS.attention,
  )
  return {"compiled": got, "analytical": est}


def real_param_shards(cfg, mesh) -> dict:
  """Builds the model, shards it, and sums each device's shard bytes."""
  model = Qwen(cfg, rngs=nnx.Rngs(0))
  model = shd.shard_module(model, mesh, shd.TRAIN_RULES)
  per_device = {d.id: 0 for d in mesh.devices.flat}
  for leaf in jax.tree.leaves(nnx.state(model, nnx.Param)):
    for s in leaf.addressable_shards:
      per_device[s.device.id] += s.data.nbytes
  fake = pm.fake_mesh(*(mesh.shape[a] for a in shd.MESH_AXES))
  return {
    "per_device": sorted(per_device.values()),
    "analytical": pm.per_device_param_bytes(cfg, fake, shd.TRAIN_RULES, 4),
    "total": pm.param_count(cfg) * 4,
  }


def main():
  cfg = SMALL if ARGS.preset == "small" else mm.PRESETS[ARGS.preset]
  if ARGS.layers:
    cfg = cfg.replace(num_layers=ARGS.layers)
  sizes = [int(x) for x in ARGS.mesh.split(",")]
  mesh = shd.make_mesh(*sizes)
  result = {
    "backend": jax.default_backend(),
    "devices": jax.device_count(),
    "preset": ARGS.preset,
    "mesh": dict(mesh.shape),
    "seq": ARGS.seq,
    "remat": ARGS.remat,
    "rows": ARGS.rows,
    "prompt": ARGS.prompt,
    "gen": ARGS.gen,
    "attention": ARGS.attention,
    "prefill_rows": ARGS.prefill_rows,
    "layers": cfg.num_layers,
  }
  if ARGS.materialize:
    result["params"] = real_param_shards(cfg, mesh)
  result["train"] = compiled_train(cfg, mesh)
  result["prefill"] = compiled_prefill(cfg, mesh)
  print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
  main()
