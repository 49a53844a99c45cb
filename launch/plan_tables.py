"""Markdown pieces shared by the memory plan's sections (GiB figures,
tables, a plan's breakdown and step time, a preset's slice table)."""

from __future__ import annotations

import dataclasses

from launch.accelerators import (
  ACCELERATORS,
  DECODE_BW_UTIL,
  TRAIN_MFU,
  GiB,
  slice_label,
)
from launch.memory_model import (
  Workload,
)
from launch.param_memory import (
  param_count,
)
from launch.slice_plan import (
  SlicePlan,
  best_plan,
  prefill_pieces,
  smallest_fitting,
  step_time,
)
from rla_jax.models.config import QwenConfig


def gib(x: float) -> str:
  return f"{x / GiB:.1f}"


def markdown_table(header, rows) -> list[str]:
  out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  return out + ["| " + " | ".join(map(str, r)) + " |" for r in rows]


def breakdown_lines(plan: SlicePlan) -> list[str]:
  rows = []
  for phase, terms in plan.phases.items():
    for term, b in terms.items():
      rows.append((phase, term, gib(b)))
    rows.append(
      (
        phase,
        "co-resident fp32 params of the idle model(s)",
        gib(plan.persistent[phase]),
      )
    )
    rows.append(
      (
        phase,
        "**phase total (co-resident)**",
        f"**{gib(sum(terms.values()) + plan.persistent[phase])}**",
      )
    )
  return markdown_table(("phase", "term", "GiB / device"), rows)


def time_lines(pol, rm, plan, wl) -> list[str]:
  acc, n = plan.acc, plan.chips
  t = step_time(pol, rm, plan, wl)
  Np, Nr = param_count(pol, "text"), param_count(rm, "text")
  ph_p, ph_r = plan.phases["policy_sample"], plan.phases["rm_sample"]
  fl = n * acc.bf16_flops * TRAIN_MFU
  tok_p = wl.policy_rows * wl.turns * (wl.policy_prompt + wl.policy_gen)
  tok_r = wl.rm_rows * wl.turns * (wl.rm_prompt + wl.rm_gen)
  bw = acc.hbm_bytes_per_s * DECODE_BW_UTIL
  layout = (
    "each device its own rows' images"
    if wl.images_sharded
    else "every device every image"
  )
  return (
    [
      f"- effective FLOP/s = {n} chips x {acc.bf16_flops:.3g} x {TRAIN_MFU}"
      f" = {fl:.3g}; effective HBM bandwidth = {acc.hbm_bytes_per_s:.3g} x "
      f"{DECODE_BW_UTIL} = {bw:.3g} B/s per chip",
      f"- policy train: {tok_p:.3g} tokens x (8 x {Np:.3g} + attention) / "
      f"{fl:.3g} = **{t['policy_train']:.0f} s**",
      f"- RM train: {tok_r:.3g} tokens x (8 x {Nr:.3g} + attention) / "
      f"{fl:.3g} = **{t['rm_train']:.0f} s**",
      f"- prefill: policy {t['policy_prefill']:.0f} s, RM "
      f"{t['rm_prefill']:.0f} s (2N + attention per prompt token; "
      f"{prefill_pieces(wl.policy_rows, n, plan.sample_tensor, wl)} / "
      f"{prefill_pieces(wl.rm_rows, n, plan.sample_tensor, wl)} row pieces "
      "per turn, each re-reading the weights: compute-bound)",
      f"- policy decode: {wl.turns} turns x {wl.policy_gen} steps x "
      f"({gib(ph_p['weights_bf16'])} GiB weights + "
      f"{gib(ph_p['kv_cache_bf16'])} GiB KV per chip) / {bw:.3g} = "
      f"**{t['policy_decode']:.0f} s**",
      f"- RM decode: {wl.turns} waves x {wl.rm_gen} steps x "
      f"({gib(ph_r['weights_bf16'])} + {gib(ph_r['kv_cache_bf16'])} GiB) / "
      f"{bw:.3g} = **{t['rm_decode']:.0f} s**",
    ]
    + [
      f"- {role} vision tower: encode {t[f'{role}_vision_encode']:.0f} s "
      f"({wl.turns} calls), train {t[f'{role}_vision_train']:.0f} s "
      f"({layout}; `vision_seconds`)"
      for role in ("policy", "rm")
      if f"{role}_vision_encode" in t
    ]
    + [
      f"- **total {t['total']:.0f} s per RL step** (upper bound: every "
      "prompt and response at its cap)",
    ]
  )


def slice_table(cfg: QwenConfig, wl: Workload) -> list[str]:
  """Smallest slices per chip for `wl` and for its 'before' (einsum,
  whole-batch prefill), with step times."""
  before = dataclasses.replace(
    wl, attention="einsum", prefill_rows_per_device=None
  )
  rows = []
  for acc in ACCELERATORS:
    co = smallest_fitting(cfg, cfg, acc, wl, True)
    off = smallest_fitting(cfg, cfg, acc, wl, False)
    old = smallest_fitting(cfg, cfg, acc, before, True)
    same = best_plan(cfg, cfg, acc, old.chips, wl) if old else None
    rows.append(
      (
        acc.name,
        slice_label(acc, co.chips) if co else "none <= 256 chips",
        f"t={co.train_tensor}, s={co.sample_tensor}" if co else "-",
        f"{gib(co.peak(True))} / {gib(co.usable)}" if co else "-",
        slice_label(acc, off.chips) if off else "none",
        f"{step_time(cfg, cfg, co, wl)['total']:.0f}" if co else "-",
        (
          f"{slice_label(acc, old.chips)} ({gib(old.peak(True))} GiB, "
          f"{step_time(cfg, cfg, old, before)['total']:.0f} s)"
        )
        if old
        else "none",
        f"{step_time(cfg, cfg, same, wl)['total']:.0f}" if same else "-",
      )
    )
  return markdown_table(
    (
      "chip",
      "smallest slice (co-resident)",
      "tensor train/sample",
      "peak / usable GiB",
      "smallest slice (offload)",
      "RL step s (upper bound)",
      "before (einsum, whole-batch prefill): slice (peak, step s)",
      "now on the before slice: step s",
    ),
    rows,
  )
