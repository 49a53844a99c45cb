"""The memory plan's compiled checks: XLA's memory analysis of
`launch/memory_plan_compiled.py` runs (8 forced CPU devices, subprocesses),
the einsum-vs-blockwise before/after check, and the vision tower check,
each with its analytical counterpart and its docs/MEMORY_PLAN.md section."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys

# The repository root (the compiled-check script's directory's parent).
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from launch.accelerators import (
  GiB,
)
from launch.memory_model import (
  PRESETS,
  SMALL,
  VL_PRESETS,
  Workload,
)
from launch.memory_phases import (
  sample_phase_bytes,
  train_phase_bytes,
)
from launch.memory_vision import (
  image_feature_bytes,
  screenshot_grid,
  vision_encode_bytes,
  vision_train_activation_bytes,
)
from launch.param_memory import (
  fake_mesh,
)
from launch.plan_tables import (
  markdown_table,
)
from rla_jax import sharding as shd


def reestimate(r: dict) -> dict:
  """Recomputes a recorded run's analytical side with the current model."""
  cfg = SMALL if r["preset"] == "small" else PRESETS[r["preset"]]
  if r.get("layers"):
    cfg = cfg.replace(num_layers=r["layers"])
  mesh = fake_mesh(*(r["mesh"][a] for a in shd.MESH_AXES))
  att = r.get("attention", "einsum")  # the recorded H200 lines: einsum
  wl = Workload(remat=r["remat"], attention=att)
  est = train_phase_bytes(cfg, mesh, r["seq"], wl)
  grads = est.pop("grads_f32_accum+micro") // 2
  r = json.loads(json.dumps(r))
  r["train"]["analytical_temp"] = (
    grads + est["gathered_bf16_weights"] + est["activations"]
  )
  r["prefill"]["analytical"] = sample_phase_bytes(
    cfg,
    mesh,
    r["rows"],
    r["prompt"],
    r["gen"],
    r.get("prefill_rows") or None,
    att,
  )
  return r


def prefill_temp(analytical: dict) -> int:
  """The analytical counterpart of a compiled prefill's temporaries: one
  layer's transient (+ the piece's cache slice with row pieces)."""
  return analytical["prefill_transient"] + analytical.get(
    "prefill_piece_cache", 0
  )


def _run_tag(r: dict) -> str:
  """A recorded run's label: backend, preset, layers, mesh, train length,
  remat and attention."""
  att = r.get("attention", "einsum")
  return (
    f"{r['backend']} {r['preset']} L={r.get('layers', '-')} mesh "
    f"{tuple(r['mesh'].values())} T={r['seq']} remat={r['remat']} {att}"
  )


def _prefill_tag(r: dict) -> str:
  """A recorded run's prefill label: rows, prompt, slots, attention and
  row pieces."""
  att = r.get("attention", "einsum")
  return (
    f"{r['backend']} {r['preset']} prefill rows={r['rows']} "
    f"P={r['prompt']} S={r['prompt'] + r['gen']} {att} "
    f"pieces={r.get('prefill_rows') or 'whole'}"
  )


def _compiled_run_rows(r: dict) -> list[tuple]:
  """(run, quantity, analytical bytes, compiled bytes) rows of one
  re-estimated run: the train step's arguments and temporaries, the
  prefill's, and the real parameter shards when the run recorded them."""
  tr, pf = r["train"], r["prefill"]
  an = pf["analytical"]
  tag = _run_tag(r)
  rows = [
    (
      tag,
      "train args (params+mu+nu+batch)",
      tr["analytical_args"],
      tr["compiled"]["argument"],
    ),
    (
      tag,
      "train temp (grads+gathered+activations)",
      tr["analytical_temp"],
      tr["compiled"]["temp"],
    ),
    (
      _prefill_tag(r),
      "prefill args (bf16 weights + KV cache)",
      an["weights_bf16"] + an["kv_cache_bf16"],
      pf["compiled"]["argument"],
    ),
    (
      "",
      "prefill temp (one layer's transient [+ piece cache])",
      prefill_temp(an),
      pf["compiled"]["temp"],
    ),
  ]
  if "params" in r:
    rows.append(
      (
        tag,
        "real param shards on each device (fp32)",
        r["params"]["analytical"],
        max(r["params"]["per_device"]),
      )
    )
  return rows


def compiled_section(compiled: list[dict], title: str) -> list[str]:
  """The "### {title}" table of recorded compiled runs: each run's
  analytical side re-estimated (`reestimate`) next to XLA's bytes."""
  rows = [
    row for r in map(reestimate, compiled) for row in _compiled_run_rows(r)
  ]
  body = [
    (a, b, f"{c:,}", f"{d:,}", f"{d / c:.2f}" if c else "-")
    for a, b, c, d in rows
  ]
  return (
    [f"### {title}", ""]
    + markdown_table(
      (
        "run",
        "quantity (bytes / device)",
        "analytical",
        "XLA compiled",
        "compiled / analytical",
      ),
      body,
    )
    + [""]
  )


# The vision tower check (compile only, this process's default backend):
# (mode, attention, depth) at the real widths on one 1920x1080 screenshot.
VISION_CHECKS = (
  ("train", "blockwise", 2),
  ("train", "blockwise", 4),
  ("train", "einsum", 2),
  ("encode", "blockwise", 4),
)


def vision_compiled_check(checks=VISION_CHECKS, screen=(1080, 1920)) -> list:
  """XLA's compiled temporaries of the real `VisionTower` (Qwen3-VL-8B
  widths, depth cut, one DeepStack merger, bf16 compute) on one screenshot
  next to the analytical terms: train = jax.grad of the features' sum
  (the scan keeps every layer: saved + one layer's backward + io of
  `vision_train_activation_bytes`); encode = the forward
  (`vision_encode_bytes` + the features)."""
  import jax
  import jax.numpy as jnp
  from flax import nnx

  from rla_jax.models.qwen3_vl.vision import VisionTower

  full = VL_PRESETS["qwen3-vl-8b"]
  out = []
  for mode, att, depth in checks:
    v = dataclasses.replace(
      full.vision, depth=depth, deepstack_visual_indexes=(0,)
    )
    grid = screenshot_grid(v, screen)
    P = math.prod(grid)
    tower = nnx.eval_shape(
      lambda v=v, att=att: VisionTower(
        v, rngs=nnx.Rngs(0), dtype=jnp.bfloat16, attention=att
      )
    )
    graphdef, state = nnx.split(tower)
    pixels = jax.ShapeDtypeStruct((1, P, v.patch_dim), jnp.float32)

    def features(state, pixels, graphdef=graphdef, grid=grid):
      return nnx.merge(graphdef, state)(pixels, grid)

    def loss(state, pixels):
      f, d = features(state, pixels)
      return f.astype(jnp.float32).sum() + d.astype(jnp.float32).sum()

    fn = jax.grad(loss) if mode == "train" else features
    compiled = jax.jit(fn).lower(state, pixels).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    D = full.text.hidden_size
    if mode == "train":
      a = vision_train_activation_bytes(v, 1, P, D, 1, att)
      analytical = a["saved"] + a["layer"] + a["io"]
    else:
      analytical = vision_encode_bytes(v, 1, P, 1, att)
      analytical += image_feature_bytes(v, 1, P, D)
    out.append(
      {
        "mode": mode,
        "attention": att,
        "depth": depth,
        "patches": P,
        "backend": jax.default_backend(),
        "analytical": int(analytical),
        "compiled": int(temp),
      }
    )
  return out


def _vision_check_rows(results: list) -> list[tuple]:
  """One table row per vision check result, bytes and their ratio."""
  return [
    (
      r["backend"],
      r["mode"],
      r["attention"],
      r["depth"],
      f"{r['patches']:,}",
      f"{r['analytical']:,}",
      f"{r['compiled']:,}",
      f"{r['compiled'] / r['analytical']:.2f}",
    )
    for r in results
  ]


def _vision_layer_slope_lines(results: list) -> list[str]:
  """The per-extra-layer growth of the blockwise train checks (shallowest
  vs deepest), analytical vs compiled; [] with fewer than two depths."""
  train = sorted(
    (
      r
      for r in results
      if r["mode"] == "train" and r["attention"] == "blockwise"
    ),
    key=lambda r: r["depth"],
  )
  if len(train) < 2:
    return []
  a, b = train[0], train[-1]
  dl = b["depth"] - a["depth"]
  per_an = (b["analytical"] - a["analytical"]) / dl
  per_c = (b["compiled"] - a["compiled"]) / dl
  return [
    "",
    f"Per extra layer (train, blockwise, depth {a['depth']} -> "
    f"{b['depth']}): analytical {per_an / GiB:.2f} GiB, compiled "
    f"{per_c / GiB:.2f} GiB ({per_c / per_an:.1f}x). The plan above uses "
    "the analytical terms; if GPU memory follows the CPU slope, the "
    "training phase's vision activations are that much larger, which "
    "remat of the tower's scan would remove.",
  ]


def vision_check_section(results: list) -> list[str]:
  """The vision tower check's section: what was compiled, the table of
  `vision_compiled_check` results and the per-layer slope."""
  L = [
    "### Vision tower: analytical vs XLA compiled (run now, compile only)",
    "",
    "`memory_plan_checks.vision_compiled_check`: the real `VisionTower` at "
    "Qwen3-VL-8B's widths, depth cut to a few blocks, one 1920x1080 "
    "screenshot, bf16 compute; XLA `memory_analysis()` temporaries. The "
    "CPU backend keeps more f32 temporaries than GPU (text model above: "
    "CPU 1.8-2.5x, H200 0.87-1.16x of the analytical train temp); no GPU "
    "was available for this check.",
    "",
  ]
  L += markdown_table(
    (
      "backend",
      "mode",
      "attention",
      "depth",
      "patches",
      "analytical B",
      "XLA compiled B",
      "compiled / analytical",
    ),
    _vision_check_rows(results),
  )
  L += _vision_layer_slope_lines(results)
  return L + [""]


# The before/after check on 8 forced CPU devices: the paper's lengths
# (train T=4096; prefill P=2048, S=6144, 64 rows = 16 per batch shard) with
# the small widths and 2 layers; compile only.
CHECK_ARGS = (
  "--devices 8 --mesh 1,4,2 --layers 2 --seq 4096 --rows 64 --prompt 2048"
  " --gen 4096"
).split()


BEFORE_AFTER_ARGS = {
  "before": CHECK_ARGS + ["--attention", "einsum"],
  "after": CHECK_ARGS + ["--attention", "blockwise", "--prefill-rows", "4"],
}


def run_script(args: list[str]) -> dict:
  """One `memory_plan_compiled.py` run (subprocess): its RESULT json."""
  script = os.path.join(_REPO, "launch", "memory_plan_compiled.py")
  proc = subprocess.run(
    [sys.executable, script, *args],
    capture_output=True,
    text=True,
    timeout=600,
  )
  if proc.returncode:
    raise RuntimeError(f"{script} {args} failed:\n{proc.stderr[-3000:]}")
  lines = [
    line for line in proc.stdout.splitlines() if line.startswith("RESULT ")
  ]
  return json.loads(lines[-1][len("RESULT ") :])


def run_compiled_cpu() -> list[dict]:
  """The small-config check on 8 forced CPU devices (subprocess)."""
  return [run_script(["--devices", "8", "--materialize"])]


def run_before_after() -> dict[str, dict]:
  """The before/after compiled check (`BEFORE_AFTER_ARGS`)."""
  return {k: run_script(a) for k, a in BEFORE_AFTER_ARGS.items()}


def before_after_factors(results: dict[str, dict]) -> dict[str, dict]:
  """quantity -> before, after (analytical and compiled temporaries) and
  the predicted / measured factors before / after."""
  est = {k: reestimate(r) for k, r in results.items()}
  out = {}
  for q, an, comp in (
    (
      "train step temp",
      lambda r: r["train"]["analytical_temp"],
      lambda r: r["train"]["compiled"]["temp"],
    ),
    (
      "prefill temp",
      lambda r: prefill_temp(r["prefill"]["analytical"]),
      lambda r: r["prefill"]["compiled"]["temp"],
    ),
  ):
    b, a = est["before"], est["after"]
    out[q] = {
      "analytical": (an(b), an(a)),
      "compiled": (comp(b), comp(a)),
      "predicted": an(b) / an(a),
      "measured": comp(b) / comp(a),
    }
  return out


def before_after_section(results: dict[str, dict]) -> list[str]:
  f = before_after_factors(results)
  cmd = [
    f"python launch/memory_plan_compiled.py {' '.join(a)}"
    for a in BEFORE_AFTER_ARGS.values()
  ]
  rows = [
    (
      q,
      f"{v['analytical'][0]:,} -> {v['analytical'][1]:,}",
      f"{v['compiled'][0]:,} -> {v['compiled'][1]:,}",
      f"{v['predicted']:.1f}x",
      f"{v['measured']:.1f}x",
    )
    for q, v in f.items()
  ]
  return (
    [
      "### Before / after on 8 forced CPU devices (run now, compile only)",
      "",
      "Small widths (D=256, F=512, N=8, K=4, H=32, V=1024), 2 layers, mesh"
      " (data, fsdp, tensor) = (1, 4, 2), the paper's sequence lengths: "
      "the jitted AdamW train step at T=4096 (1 sequence per device, remat"
      " full) and the sampler's prefill of 64 rows (16 per batch shard), "
      "P=2048 into S=6144 slots. Before: einsum attention, whole-batch "
      "prefill (`programs.prefill_whole`); after: blockwise attention, 4-row "
      "pieces (`rla_jax.sampling.prefill.prefill`). Bytes per device, "
      "XLA `memory_analysis()` temporaries. Commands:",
      "",
    ]
    + [f"    {c}" for c in cmd]
    + [""]
    + markdown_table(
      (
        "quantity",
        "analytical before -> after",
        "XLA compiled before -> after",
        "predicted factor",
        "measured factor",
      ),
      rows,
    )
    + [""]
    + compiled_section(list(results.values()), "The two runs in full")
  )
