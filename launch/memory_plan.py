"""Memory and step-time plan of RLAnything's paper presets on rentable slices.

Builds on `launch/memory_model.py` (per-device bytes from the real model
definition and sharding rules) and writes docs/MEMORY_PLAN.md:

  python launch/memory_plan.py --out docs/MEMORY_PLAN.md [--compiled]

--compiled also runs `launch/memory_plan_compiled.py` in subprocesses with 8
forced CPU devices and adds XLA's compiled memory analysis of a small config
next to the analytical numbers, the before/after check
(`BEFORE_AFTER_ARGS`: einsum + whole-batch prefill vs blockwise + 4-row
pieces at the paper's lengths, predicted vs measured factors), and the
vision tower check (`vision_compiled_check`, Qwen3-VL-8B widths).

The main tables use what the paper presets run (`memory_model.PAPER`:
flash-style attention, 4-row prefill pieces) for the AlfWorld workload and
the coding one (`memory_model.CODING`); "before" columns use the einsum
attention with a whole-batch prefill. Qwen3-VL-8B in the GUI setting
(`memory_model.GUI`, and `GUI_AS_CODED` for the current image layout) has
its own section.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from launch.memory_model import (
  ACCELERATORS,
  CODING,
  DECODE_BW_UTIL,
  F32,
  GUI,
  GUI_AS_CODED,
  PRESETS,
  SMALL,
  TRAIN_MFU,
  USABLE_HBM_FRACTION,
  VL_PRESETS,
  Accelerator,
  GiB,
  Workload,
  attention_kind,
  attention_prefill_bytes,
  fake_mesh,
  image_feature_bytes,
  images_per_device,
  param_count,
  param_count_formula,
  per_device_param_bytes,
  sample_phase_bytes,
  screenshot_grid,
  screenshot_tokens,
  slice_label,
  smart_resize,
  text_config,
  train_activation_bytes,
  train_phase_bytes,
  vision_config,
  vision_encode_bytes,
  vision_flops_per_image,
  vision_train_activation_bytes,
)
from rla_jax import sharding as shd
from rla_jax.models.config import QwenConfig

# ------------------------------------------------------------------ plan
TENSOR_SIZES = (1, 2, 4, 8)
PHASES = ("policy_sample", "rm_sample", "policy_train", "rm_train")


@dataclasses.dataclass
class SlicePlan:
  """Memory of every phase of one RL step on one slice."""

  acc: Accelerator
  chips: int
  train_tensor: int
  sample_tensor: int
  phases: dict[str, dict[str, int]]  # phase -> term -> bytes (per device)
  persistent: dict[str, int]  # phase -> co-resident fp32 params

  @property
  def usable(self) -> float:
    return self.acc.hbm_bytes * USABLE_HBM_FRACTION

  def peak(self, coresident: bool) -> int:
    return max(
      sum(t.values()) + (self.persistent[p] if coresident else 0)
      for p, t in self.phases.items()
    )

  def fits(self, coresident: bool) -> bool:
    return self.peak(coresident) <= self.usable


def plan_slice(
  pol: QwenConfig,
  rm: QwenConfig,
  acc: Accelerator,
  chips: int,
  wl: Workload,
  train_tensor: int,
  sample_tensor: int,
) -> SlicePlan:
  """Phase memories for given training / sampling tensor-parallel sizes.

  Co-resident assumption: both models' fp32 master parameters stay on the
  devices (train sharding) for the whole RL step; AdamW state exists only
  while its model trains (the reference re-creates it every RL step); the
  bf16 sampling copy and the KV cache exist only while sampling.
  """
  tm = fake_mesh(1, chips // train_tensor, train_tensor)
  sm = fake_mesh(1, chips // sample_tensor, sample_tensor)
  f32 = {
    name: per_device_param_bytes(c, tm, shd.TRAIN_RULES, F32)
    for name, c in (("policy", pol), ("rm", rm))
  }
  phases = {
    "policy_sample": sample_phase_bytes(
      pol,
      sm,
      wl.policy_rows,
      wl.policy_prompt,
      wl.policy_gen,
      wl.prefill_rows_per_device,
      wl.attention,
      wl.policy_images,
      wl.screen,
      wl.images_sharded,
    ),
    "rm_sample": sample_phase_bytes(
      rm,
      sm,
      wl.rm_rows,
      wl.rm_prompt,
      wl.rm_gen,
      wl.prefill_rows_per_device,
      wl.attention,
      wl.rm_images,
      wl.screen,
      wl.images_sharded,
    ),
    "policy_train": train_phase_bytes(
      pol, tm, wl.policy_prompt + wl.policy_gen, wl, wl.policy_images
    ),
    "rm_train": train_phase_bytes(
      rm, tm, wl.rm_prompt + wl.rm_gen, wl, wl.rm_images
    ),
  }
  persistent = {
    "policy_sample": f32["policy"] + f32["rm"],
    "rm_sample": f32["policy"] + f32["rm"],
    "policy_train": f32["rm"],
    "rm_train": f32["policy"],
  }
  return SlicePlan(acc, chips, train_tensor, sample_tensor, phases, persistent)


def best_plan(pol, rm, acc, chips, wl, coresident=True) -> SlicePlan:
  """Smallest-peak training tensor size; sampling tensor size that fits
  with the fastest decode (ties: the smaller tensor axis)."""
  sizes = [t for t in TENSOR_SIZES if t <= chips and chips % t == 0]
  plans = [
    plan_slice(pol, rm, acc, chips, wl, tt, st) for tt in sizes for st in sizes
  ]

  def key(p):
    return (
      not p.fits(coresident),
      p.peak(coresident)
      if not p.fits(coresident)
      else step_time(pol, rm, p, wl)["total"],
      p.train_tensor,
      p.sample_tensor,
    )

  return min(plans, key=key)


def smallest_fitting(pol, rm, acc, wl, coresident=True) -> SlicePlan | None:
  for chips in acc.slice_chips:
    p = best_plan(pol, rm, acc, chips, wl, coresident)
    if p.fits(coresident):
      return p
  return None


# ------------------------------------------------------------- step time
def attention_flops_per_token(cfg, context: int) -> int:
  """Forward QK^T and PV: 4*L*N*H*context (full context: neither the einsum
  nor the blockwise attention skips masked tiles)."""
  cfg = text_config(cfg)
  return 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * context


def train_attention_passes(attention: str) -> float:
  """Attention forward-equivalents per trained token: old-logprob forward
  1 + forward 1 + backward 2 (einsum: dV, dP, dQ, dK from the kept
  probs) or 2.5 (flash: the FlashAttention-2 backward recomputes QK^T, a
  5th matmul)."""
  return 4.0 if attention_kind(attention) == "einsum" else 4.5


def prefill_pieces(rows: int, chips: int, sample_tensor: int, wl) -> int:
  """Sequential prefill pieces per turn: ceil(r / rp), r rows per device
  (sampling mesh: chips / sample_tensor batch shards)."""
  r = -(-rows // (chips // sample_tensor))
  rp = wl.prefill_rows_per_device
  return 1 if rp is None or rp >= r else -(-r // rp)


def vision_seconds(
  cfg, plan: SlicePlan, wl: Workload, rows: int, images_per_row: int
) -> dict[str, float]:
  """Seconds of the vision tower per RL step for one role ({} for a text
  model or no images): every turn's call encodes its rows' screenshots
  (a fresh prompt each turn: the reference's policy and judge prompts
  are rebuilt per step), training encodes each sample's screenshots per
  micro-batch. Per device, `images_per_device` images per call / micro-
  batch (sharded: its rows'; as coded: all of them), split only by the
  tensor axis (heads, MLP), at peak x TRAIN_MFU:
  encode = turns x images x (matmul + attention) / (tensor x F);
  train = micro-steps x images x (4 matmul + a attention) / (tensor x F),
  4 = old-logprob forward + forward + backward (2), a =
  `train_attention_passes`; micro-steps = samples / (batch shards x b)."""
  v = vision_config(cfg)
  if v is None or not images_per_row or wl.screen is None:
    return {}
  acc, n = plan.acc, plan.chips
  f = vision_flops_per_image(
    v, math.prod(screenshot_grid(v, wl.screen)), text_config(cfg).hidden_size
  )
  per_chip = acc.bf16_flops * TRAIN_MFU
  out = {}
  dp_s = n // plan.sample_tensor
  img = images_per_device(images_per_row, rows, dp_s, wl.images_sharded)
  out["encode"] = (
    wl.turns
    * img
    * (f["matmul"] + f["attention"])
    / (plan.sample_tensor * per_chip)
  )
  dp_t = n // plan.train_tensor
  b = wl.micro_batch_per_device
  micro_steps = -(-rows * wl.turns // (dp_t * b))
  img = images_per_device(images_per_row, dp_t * b, dp_t, wl.images_sharded)
  passes = train_attention_passes(wl.attention)
  out["train"] = (
    micro_steps
    * img
    * (4 * f["matmul"] + passes * f["attention"])
    / (plan.train_tensor * per_chip)
  )
  return out


def step_time(pol, rm, plan: SlicePlan, wl: Workload) -> dict[str, float]:
  """Seconds per RL step per phase (see module docstring for the model).

  train: (8N + a*attn) * tokens (old-logprob forward 2N + fwd/bwd 6N,
         a = `train_attention_passes`) / (chips * peak * TRAIN_MFU);
  prefill: max((2N + attn) * prompt tokens / (chips * peak * TRAIN_MFU),
           turns * pieces * bf16 weights shard / (BW * util)): row pieces
           run the same FLOPs; each piece re-reads the weights once;
  decode: gen steps * max(bytes per device per step / (BW * util),
          2N*rows/chips / (peak * TRAIN_MFU)), bytes = bf16 weights shard +
          whole KV cache shard (every slot is read each step);
  N = the text decoder's parameters; Qwen3-VL adds "{role}_vision_encode"
  and "{role}_vision_train" (`vision_seconds`).
  """
  acc, n = plan.acc, plan.chips
  flops = n * acc.bf16_flops * TRAIN_MFU
  bw = acc.hbm_bytes_per_s * DECODE_BW_UTIL
  passes = train_attention_passes(wl.attention)
  out = {}
  for role, cfg, prompt, gen, rows, images in (
    (
      "policy",
      pol,
      wl.policy_prompt,
      wl.policy_gen,
      wl.policy_rows,
      wl.policy_images,
    ),
    ("rm", rm, wl.rm_prompt, wl.rm_gen, wl.rm_rows, wl.rm_images),
  ):
    N, S = param_count(cfg, "text"), prompt + gen
    samples = rows * wl.turns
    attn = attention_flops_per_token(cfg, S)
    out[f"{role}_train"] = samples * S * (8 * N + passes * attn) / flops
    ph = plan.phases[f"{role}_sample"]
    pieces = prefill_pieces(rows, n, plan.sample_tensor, wl)
    out[f"{role}_prefill"] = max(
      samples * prompt * (2 * N + attn) / flops,
      wl.turns * pieces * ph["weights_bf16"] / bw,
    )
    step_bytes = ph["weights_bf16"] + ph["kv_cache_bf16"]
    per_step = max(
      step_bytes / bw,
      2 * N * rows / n / (acc.bf16_flops * TRAIN_MFU),
    )
    out[f"{role}_decode"] = wl.turns * gen * per_step
    for k, t in vision_seconds(cfg, plan, wl, rows, images).items():
      out[f"{role}_vision_{k}"] = t
  out["total"] = sum(out.values())
  return out


# -------------------------------------------------------------- document
def _g(x: float) -> str:
  return f"{x / GiB:.1f}"


def _table(header, rows) -> list[str]:
  out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  return out + ["| " + " | ".join(map(str, r)) + " |" for r in rows]


def _breakdown(plan: SlicePlan) -> list[str]:
  rows = []
  for phase, terms in plan.phases.items():
    for term, b in terms.items():
      rows.append((phase, term, _g(b)))
    rows.append(
      (
        phase,
        "co-resident fp32 params of the idle model(s)",
        _g(plan.persistent[phase]),
      )
    )
    rows.append(
      (
        phase,
        "**phase total (co-resident)**",
        f"**{_g(sum(terms.values()) + plan.persistent[phase])}**",
      )
    )
  return _table(("phase", "term", "GiB / device"), rows)


def _time_lines(pol, rm, plan, wl) -> list[str]:
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
      f"({_g(ph_p['weights_bf16'])} GiB weights + "
      f"{_g(ph_p['kv_cache_bf16'])} GiB KV per chip) / {bw:.3g} = "
      f"**{t['policy_decode']:.0f} s**",
      f"- RM decode: {wl.turns} waves x {wl.rm_gen} steps x "
      f"({_g(ph_r['weights_bf16'])} + {_g(ph_r['kv_cache_bf16'])} GiB) / "
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


def _compiled_section(compiled: list[dict], title: str) -> list[str]:
  rows = []
  for r in map(reestimate, compiled):
    tr, pf = r["train"], r["prefill"]
    att = r.get("attention", "einsum")
    tag = (
      f"{r['backend']} {r['preset']} L={r.get('layers', '-')} mesh "
      f"{tuple(r['mesh'].values())} T={r['seq']} remat={r['remat']} {att}"
    )
    rows.append(
      (
        tag,
        "train args (params+mu+nu+batch)",
        tr["analytical_args"],
        tr["compiled"]["argument"],
      )
    )
    rows.append(
      (
        tag,
        "train temp (grads+gathered+activations)",
        tr["analytical_temp"],
        tr["compiled"]["temp"],
      )
    )
    an = pf["analytical"]
    rows.append(
      (
        f"{r['backend']} {r['preset']} prefill rows={r['rows']} "
        f"P={r['prompt']} S={r['prompt'] + r['gen']} {att} "
        f"pieces={r.get('prefill_rows') or 'whole'}",
        "prefill args (bf16 weights + KV cache)",
        an["weights_bf16"] + an["kv_cache_bf16"],
        pf["compiled"]["argument"],
      )
    )
    rows.append(
      (
        "",
        "prefill temp (one layer's transient [+ piece cache])",
        prefill_temp(an),
        pf["compiled"]["temp"],
      )
    )
    if "params" in r:
      rows.append(
        (
          tag,
          "real param shards on each device (fp32)",
          r["params"]["analytical"],
          max(r["params"]["per_device"]),
        )
      )
  body = [
    (a, b, f"{c:,}", f"{d:,}", f"{d / c:.2f}" if c else "-")
    for a, b, c, d in rows
  ]
  return (
    [f"### {title}", ""]
    + _table(
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


def _slice_table(cfg: QwenConfig, wl: Workload) -> list[str]:
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
        f"{_g(co.peak(True))} / {_g(co.usable)}" if co else "-",
        slice_label(acc, off.chips) if off else "none",
        f"{step_time(cfg, cfg, co, wl)['total']:.0f}" if co else "-",
        (
          f"{slice_label(acc, old.chips)} ({_g(old.peak(True))} GiB, "
          f"{step_time(cfg, cfg, old, before)['total']:.0f} s)"
        )
        if old
        else "none",
        f"{step_time(cfg, cfg, same, wl)['total']:.0f}" if same else "-",
      )
    )
  return _table(
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


def _coding_section(wl: Workload) -> list[str]:
  """The coding paper preset's workload (`memory_model.CODING`)."""
  cfg = PRESETS["qwen2.5-7b-instruct"]
  L = [
    f"## {wl.name}: qwen2.5-7b-instruct as policy and unit-test generator",
    "",
    f"configs/coding.py 'paper': {wl.tasks} tasks x {wl.rollouts} programs "
    f"= {wl.policy_rows} policy rows (prompt {wl.policy_prompt} + gen "
    f"{wl.policy_gen}) and {wl.rm_rows} unit-test rows ({wl.rm_prompt} + "
    f"{wl.rm_gen}), each phase one Sampler call, {wl.turns} turn; same "
    "attention and 4-row prefill pieces; prefill counted over every row "
    "(upper bound: the sampler prefills each prompt once and repeats its "
    "cache). Step times count one update pass per step, as above (the "
    "preset runs updates_per_step = 2).",
    "",
  ]
  L += _slice_table(cfg, wl)
  for acc in ACCELERATORS:
    co = smallest_fitting(cfg, cfg, acc, wl, True)
    if co is not None and acc.name.startswith("H100"):
      L += ["", f"### {wl.name} on {slice_label(acc, co.chips)}", ""]
      L += _breakdown(co)
  return L + [""]


def _plan_notes(wl: Workload) -> list[str]:
  """Why the slices shrank and what the step times do (main tables)."""
  h100 = next(a for a in ACCELERATORS if a.name.startswith("H100"))
  tokens = wl.prefill_rows_per_device * wl.policy_prompt
  return [
    "",
    f"Main columns: what the paper presets run, attention "
    f"'{wl.attention}' (config.model.attention = 'auto' resolves to "
    "pallas_tpu on TPU and to cudnn on GPU for bf16; both are flash-style "
    "and tile-bounded like blockwise, whose term the model uses for "
    f"them) and {wl.prefill_rows_per_device}-row prefill pieces per "
    "device (config.rollout.prefill_rows = 4, rla_jax/sampling/prefill.py)."
    " 'before': the einsum attention and a whole-batch prefill "
    "(prefill_rows = 0), whose [rows, N, P, S] scores dominated the RM "
    "sampling phase.",
    "",
    "Step times: the earlier plan's 'with 4-row prefill chunks' column "
    "was 3-7x slower only because its slices were 4-16x smaller: the step "
    "model never charged the pieces anything, the same work simply ran on "
    "fewer chips (decode, being bandwidth-bound per chip, scales less "
    "than 1/chips). The new sampler's fori_loop over row pieces runs the "
    "same FLOPs; the only extra cost modelled is that each piece re-reads "
    f"the weights: one piece is {wl.prefill_rows_per_device} x "
    f"{wl.policy_prompt} = {tokens} tokens per device, ~{tokens} FLOP per "
    f"bf16 weight byte, far above the ridge point (H100: "
    f"{h100.bf16_flops / h100.hbm_bytes_per_s:.0f} FLOP/B), so prefill "
    "stays compute-bound. What remains is the flash backward's recomputed "
    "QK^T (4.5 instead of 4 attention passes per trained token, "
    "`train_attention_passes`); the last column (the new configuration "
    "on the before slice) shows that cost is small.",
    "",
  ]


# Where each value of the qwen3-vl-8b preset was checked (search of stored
# public pages; the official Qwen/Qwen3-VL-8B-Instruct config.json itself
# was not among them).
_GGUF = (
  "Ollama's GGUF metadata of qwen3-vl:8b-instruct (converted from the "
  "official checkpoint)"
)
_DERIVED = (
  "config.json of fine-tunes that copy the base config (huggingface.co "
  "Steinate/Cortex, Balfiky/mobthing2, Chhagan005/CSM-DocExtract-8N)"
)
VL_SOURCES = (
  ("text vocab_size", "151936", _DERIVED + "; not in the GGUF excerpt"),
  (
    "text hidden 4096, intermediate 12288, 36 layers, 32 heads, 8 kv "
    "heads, head_dim 128",
    "as preset",
    _GGUF + " (embedding_length, feed_forward_length, block_count, "
    "head_count, head_count_kv, key_length); " + _DERIVED,
  ),
  (
    "mrope_section, interleaved; rope_theta",
    "(24, 20, 20), True; 5e6",
    _DERIVED + "; rope_theta also GGUF rope.freq_base 5e6",
  ),
  ("tie_word_embeddings", "False", _DERIVED),
  (
    "vision depth 27, hidden 1152, 16 heads, patch 16, temporal patch 2, "
    "merge 2, deepstack (8, 16, 24)",
    "as preset",
    _GGUF + " (vision.block_count, embedding_length, head_count, "
    "patch_size, temporal_patch_size, spatial_merge_size, "
    "deepstack_visual_indexes)",
  ),
  (
    "vision intermediate 4304, 2304 position embeddings",
    "as preset",
    "not in the GGUF excerpt: transformers' Qwen3VLVisionConfig defaults "
    "(depth 27, hidden 1152, intermediate 4304, 16 heads), the 32B "
    "config.json (quanliang/F1: same tower, 4304, 2304) and a C++ port's "
    "header for Qwen3-VL-8B (4304, out 4096); not from the 8B file itself",
  ),
  (
    "vision out_hidden_size",
    "4096",
    "= text hidden (Qwen3VLConfig requires it); NeMo Megatron-Bridge "
    "Qwen3VLTransformerConfig default 4096",
  ),
  (
    "processor min / max pixels",
    "65536 / 16777216",
    "preprocessor_config.json of a copy of Qwen3-VL-8B-Instruct "
    "(cdreetz/Qwen3-VL-8B-Instruct: size.shortest_edge / longest_edge) "
    "and GGUF vision.shortest_edge / longest_edge",
  ),
  (
    "total parameters",
    "8,767,123,696 (eval_shape)",
    "published 8.77B (LM Studio's qwen3-vl-8b card); Hugging Face "
    "lists 9B (rounded)",
  ),
)


def _vl_slice_rows(cfg, wl: Workload) -> list[tuple]:
  """Per chip: smallest slice of wl (co-resident), its tensor sizes, peak
  and step time."""
  rows = []
  for acc in ACCELERATORS:
    co = smallest_fitting(cfg, cfg, acc, wl, True)
    if co is None:
      big = best_plan(cfg, cfg, acc, acc.slice_chips[-1], wl)
      none = (
        f"none (largest, {slice_label(acc, big.chips)}: peak "
        f"{_g(big.peak(True))} GiB in {_peak_phase(big)})"
      )
    rows.append(
      (
        acc.name,
        slice_label(acc, co.chips) if co else none,
        f"t={co.train_tensor}, s={co.sample_tensor}" if co else "-",
        f"{_g(co.peak(True))} / {_g(co.usable)}" if co else "-",
        f"{step_time(cfg, cfg, co, wl)['total']:.0f}" if co else "-",
      )
    )
  return rows


def _peak_phase(plan: SlicePlan) -> str:
  """The phase that sets a plan's co-resident peak."""
  return max(
    plan.phases,
    key=lambda p: sum(plan.phases[p].values()) + plan.persistent[p],
  )


def _reference_cluster_lines(cfg, wl: Workload) -> list[str]:
  """The reference's own cluster: 12 nodes x 8 GPUs (96, not a rentable
  power of two here), H100 and H200."""
  out = []
  for acc in ACCELERATORS:
    if "{nodes}" not in acc.slice_name:
      continue
    p = best_plan(cfg, cfg, acc, 96, wl)
    out.append(
      f"- 12x8 {acc.name.split()[0]} (the reference's 96 GPUs): t="
      f"{p.train_tensor}, s={p.sample_tensor}, peak {_g(p.peak(True))} / "
      f"{_g(p.usable)} GiB ({'fits' if p.fits(True) else 'does not fit'}"
      f", {_peak_phase(p)}), RL step "
      f"{step_time(cfg, cfg, p, wl)['total']:.0f} s"
    )
  return out


def _vl_section(name: str, cfg, wl: Workload, as_coded: Workload) -> list:
  """The Qwen3-VL preset in the GUI setting (`memory_model.GUI`)."""
  v, t = vision_config(cfg), text_config(cfg)
  grid = screenshot_grid(v, wl.screen)
  P, tok = math.prod(grid), screenshot_tokens(v, wl.screen)
  fl = vision_flops_per_image(v, P, t.hidden_size)
  text_prompt = 2 * param_count(cfg, "text") * wl.policy_prompt
  text_prompt += wl.policy_prompt * attention_flops_per_token(
    t, wl.policy_prompt
  )
  L = [
    f"## {name} as policy and judge: the GUI setting ({wl.name})",
    "",
    "Qwen3-VL-8B (`memory_model.VL_PRESETS`, a real `Qwen3VLConfig`; "
    "parameters from `nnx.eval_shape(Qwen3VL(cfg))`, shards from the real "
    "rules, vision axes included) as both the policy and the judge "
    f"(reference sections 4, 8): {wl.tasks} tasks x {wl.rollouts} "
    f"rollouts = {wl.policy_rows} trajectories x {wl.turns} steps, policy "
    f"prompt {wl.policy_prompt} + {wl.policy_gen} new tokens, judge "
    f"m={wl.judgements}: {wl.rm_rows} rows of {wl.rm_prompt} + "
    f"{wl.rm_gen}. Screenshots {wl.screen[1]}x{wl.screen[0]}: the policy "
    f"prompt holds {wl.policy_images} (current and previous), the judge's "
    f"{wl.rm_images} (previous, current, next). Each turn's prompts are "
    "new (the reference rebuilds them every step), so every call encodes "
    "its screenshots; a prompt with images is prefilled as one whole-batch"
    " chunk (`rla_jax/sampling/image_prefill.py`: no row pieces). Same "
    "precision, residency and attention ('blockwise' = the flash-style "
    "'auto') as above; the vision tower is trained with the decoder.",
    "",
    "### Configuration checked against published sources",
    "",
  ]
  L += _table(("field", "value", "checked against"), VL_SOURCES)
  L += ["", "### Parameters", ""]
  L += _table(
    ("part", "eval_shape sum", "closed form", "fp32 GiB"),
    [
      (
        "text decoder",
        f"{param_count(cfg, 'text'):,}",
        f"{param_count_formula(t):,}",
        _g(4 * param_count(cfg, "text")),
      ),
      (
        "vision tower",
        f"{param_count(cfg, 'vision'):,}",
        f"{param_count_formula(cfg) - param_count_formula(t):,}",
        _g(4 * param_count(cfg, "vision")),
      ),
      (
        "total",
        f"{param_count(cfg):,}",
        f"{param_count_formula(cfg):,}",
        _g(4 * param_count(cfg)),
      ),
    ],
  )
  factor = v.patch_size * v.spatial_merge_size
  L += [
    "",
    "### Screenshots and prompts",
    "",
    f"The image processor's `smart_resize` (factor = patch {v.patch_size} "
    f"x merge {v.spatial_merge_size} = {factor}, pixels within "
    "[65536, 16777216]) and the tower's patch grid, per screenshot; the "
    "tower attends over all P patches of an image (bidirectional), the "
    "prompt holds P / 4 merged tokens. FLOPs: one forward "
    "(`memory_model.vision_flops_per_image`).",
    "",
  ]
  rows = []
  for screen in ((720, 1280), (1080, 1920), (1440, 2560)):
    h, w = smart_resize(*screen, factor)
    g = screenshot_grid(v, screen)
    f = vision_flops_per_image(v, math.prod(g), t.hidden_size)
    rows.append(
      (
        f"{screen[1]}x{screen[0]}",
        f"{w}x{h}",
        f"{g[0]} x {g[1]}",
        f"{math.prod(g):,}",
        f"{screenshot_tokens(v, screen):,}",
        f"{f['matmul'] / 1e12:.1f}",
        f"{f['attention'] / 1e12:.1f}",
      )
    )
  L += _table(
    (
      "screen",
      "resized (w x h)",
      "patch grid h x w",
      "patches P",
      "merged tokens",
      "fwd matmul TFLOP",
      "fwd attention TFLOP",
    ),
    rows,
  )
  L += [
    "",
    f"At {wl.screen[1]}x{wl.screen[0]}: the policy prompt's "
    f"{wl.policy_images} screenshots are {wl.policy_images * tok:,} of its "
    f"{wl.policy_prompt} tokens (text: up to "
    f"{wl.policy_prompt - wl.policy_images * tok:,}), the judge's "
    f"{wl.rm_images} are {wl.rm_images * tok:,} of {wl.rm_prompt} (text: up"
    f" to {wl.rm_prompt - wl.rm_images * tok:,}; the 8192 cap holds at most"
    f" {wl.rm_prompt // tok} screenshots). One screenshot's tower forward "
    f"is {(fl['matmul'] + fl['attention']) / 1e12:.1f} TFLOP, "
    f"{(fl['matmul'] + fl['attention']) / text_prompt:.0%} of the text "
    f"decoder's forward over a whole {wl.policy_prompt}-token prompt "
    f"({text_prompt / 1e12:.0f} TFLOP); over half of it is the P^2 "
    "attention.",
    "",
    "### Vision tower activations per screenshot (tensor 1)",
    "",
    f"P = {P:,} patches, {v.num_heads} heads: einsum materialises "
    f"[{v.num_heads}, P, P] scores per image and layer; flash keeps tiles. "
    "Encode: one layer's transient (`vision_encode_bytes`); train: the "
    "tower's scan has no remat, so all 27 layers' forward activations are "
    "kept (`vision_train_activation_bytes`).",
    "",
  ]
  rows = []
  for att in ("einsum", "blockwise"):
    tr = vision_train_activation_bytes(v, 1, P, t.hidden_size, 1, att)
    rows.append(
      (
        att,
        _g(
          attention_prefill_bytes(
            1, v.num_heads, v.num_heads, P, P, v.head_dim, att
          )
        ),
        _g(vision_encode_bytes(v, 1, P, 1, att)),
        _g(tr["saved"]),
        _g(tr["layer"]),
        _g(image_feature_bytes(v, 1, P, t.hidden_size)),
      )
    )
  L += _table(
    (
      "attention",
      "encode: attention transient GiB",
      "encode: layer transient GiB",
      "train: saved by the scan GiB",
      "train: one layer's backward GiB",
      "features + DeepStack GiB",
    ),
    rows,
  )
  L += [
    "",
    "### Smallest slices",
    "",
    "Images sharded with their rows (each device encodes its own rows' "
    "screenshots; what the plan needs):",
    "",
  ]
  L += _slice_table(cfg, wl)
  L += [
    "",
    "As coded now (`GUI_AS_CODED`): the Sampler places a call's pixels "
    "replicated (`sampler.py`, `(None,) * ndim`) and the Learner a micro-"
    "batch's (`Learner._place_batch`), so every device encodes every image"
    " of the call / micro-batch, the count rounded up to a power of two "
    f"(RM call: {wl.rm_rows} rows x {wl.rm_images} = "
    f"{wl.rm_rows * wl.rm_images} -> "
    f"{images_per_device(wl.rm_images, wl.rm_rows, 1, False)} images on "
    "every device):",
    "",
  ]
  L += _table(
    (
      "chip",
      "smallest slice (co-resident)",
      "tensor train/sample",
      "peak / usable GiB",
      "RL step s (upper bound)",
    ),
    _vl_slice_rows(cfg, as_coded),
  )
  L += ["", "On the reference's cluster size, images sharded:", ""]
  L += _reference_cluster_lines(cfg, wl)
  L += ["", "and as coded now:", ""]
  L += _reference_cluster_lines(cfg, as_coded)
  for acc in ACCELERATORS:
    co = smallest_fitting(cfg, cfg, acc, wl, True)
    if co is None:
      continue
    ph = co.phases
    L += [
      "",
      f"### {name} on {slice_label(acc, co.chips)} ({acc.name}), images "
      "sharded",
      "",
    ]
    L += _breakdown(co)
    dp = co.chips // co.sample_tensor
    L += [
      "",
      "prefill_transient is the larger of the text layer's and the vision"
      " layer's (they run one after the other): vision encode of "
      f"{images_per_device(wl.rm_images, wl.rm_rows, dp, True)} judge "
      "screenshots per device = "
      + _g(
        vision_encode_bytes(
          v,
          images_per_device(wl.rm_images, wl.rm_rows, dp, True),
          P,
          co.sample_tensor,
          wl.attention,
        )
      )
      + f" GiB; RM sampling total {_g(sum(ph['rm_sample'].values()))} GiB.",
      "",
      "Step time:",
      "",
    ]
    L += _time_lines(cfg, cfg, co, wl)
  return L + [""]


def render(
  wl: Workload,
  compiled: dict[str, list[dict]],
  before_after: dict[str, dict] | None = None,
  vision_check: list | None = None,
) -> str:
  L = [
    "# Memory and step-time plan (generated)",
    "",
    "Generated by `python launch/memory_plan.py --out docs/MEMORY_PLAN.md"
    " --compiled`; do not edit by hand. Model: `launch/memory_model.py`.",
    "",
    "## Assumptions",
    "",
    "- Precision: fp32 master params, fp32 AdamW mu+nu, fp32 grads "
    "(accumulator + one micro-batch), bf16 compute; sampling uses a bf16 "
    "tensor-parallel-only weight copy (SAMPLE_RULES) and a bf16 KV cache. "
    "bf16-only weights would not train at lr 1e-6 (update/weight ~5e-5 < "
    "bf16 resolution 3.9e-3).",
    "- Residency (primary): *co-resident params, sequential phases*: both "
    "models' fp32 params stay sharded on the devices all RL step; AdamW "
    "state lives only while its model trains (the reference re-creates it"
    " every RL step, spec 3.3); KV cache and sampling copy only while "
    "sampling. Secondary: *offload*, idle model's params on host.",
    f"- Usable HBM = {USABLE_HBM_FRACTION} x capacity. Training MFU "
    f"{TRAIN_MFU}; decode at {DECODE_BW_UTIL} of peak HBM bandwidth "
    "(memory-bound: each step reads the weights shard and the whole KV "
    "cache shard: no attention implementation skips empty slots).",
    f"- Attention: '{wl.attention}' (flash-style, tile-bounded: "
    "[rows, N, 128, 128] tiles + O(T) row statistics; "
    "`memory_model.attention_train_bytes` / `attention_prefill_bytes`), "
    f"prefill in pieces of {wl.prefill_rows_per_device} rows per device; "
    "'before' columns: einsum attention ([rows, N, T, S] f32 scores) and "
    "a whole-batch prefill.",
    f"- Workload per RL step (AlfWorld paper preset): {wl.tasks} tasks x "
    f"{wl.rollouts} rollouts = {wl.policy_rows} trajectories x "
    f"{wl.turns} turns (assumed mean; max 40); policy prompt "
    f"{wl.policy_prompt} + gen {wl.policy_gen}; RM m={wl.judgements} "
    f"judgements per step, prompt {wl.rm_prompt} + gen {wl.rm_gen}, "
    f"{wl.rm_rows} RM rows sampled concurrently; training micro-batch "
    f"{wl.micro_batch_per_device} sequence/device, remat "
    f"'{wl.remat}', log-prob chunk {wl.logprob_chunk}. Token counts are "
    "caps (upper bounds).",
    "- Meshes: training (data=1, fsdp=chips/t, tensor=t), sampling "
    "(1, chips/s, s), t, s in {1,2,4,8}, chosen per slice (training: "
    "lowest peak; sampling: fastest decode that fits). A mesh axis that "
    "does not divide a dimension is dropped (28 heads: tensor 8 -> "
    "replicated), exactly as `rla_jax.sharding.logical_to_spec` does.",
    "",
    "### Hardware (per chip)",
    "",
  ]
  L += _table(
    ("chip", "HBM GiB", "bf16 TFLOP/s", "HBM GB/s", "source"),
    [
      (
        a.name,
        f"{a.hbm_bytes / GiB:.1f}",
        f"{a.bf16_flops / 1e12:g}",
        f"{a.hbm_bytes_per_s / 1e9:g}",
        a.source,
      )
      for a in ACCELERATORS
    ],
  )
  L += ["", "## Parameter counts", ""]
  L += _table(
    (
      "preset",
      "eval_shape sum",
      "closed form",
      "fp32 GiB",
      "train state 16 B/param GiB",
    ),
    [
      (
        k,
        f"{param_count(c):,}",
        f"{param_count_formula(c):,}",
        _g(4 * param_count(c)),
        _g(16 * param_count(c)),
      )
      for k, c in {**PRESETS, **VL_PRESETS}.items()
    ],
  )
  L += [
    "",
    "Qwen2.5-7B-Instruct's published count is 7,615,616,512 "
    "(7.62e9); Qwen3-8B's is 8.19e9; Qwen3-VL-8B's 8.77e9 (text decoder "
    "+ vision tower, section qwen3-vl-8b below).",
    "",
  ]
  for name, cfg in PRESETS.items():
    L += [f"## {name} as policy and reward model", ""]
    L += _slice_table(cfg, wl)
    L += _plan_notes(wl)
    for acc in ACCELERATORS:
      co = smallest_fitting(cfg, cfg, acc, wl, True)
      if co is None:
        continue
      L += (
        ["", f"### {name} on {slice_label(acc, co.chips)} ({acc.name})", ""]
        + _breakdown(co)
        + ["", "Step time:", ""]
      )
      L += _time_lines(cfg, cfg, co, wl)
    L += [""]
  L += _coding_section(dataclasses.replace(CODING, turns=1))
  for name, cfg in VL_PRESETS.items():
    L += _vl_section(name, cfg, GUI, GUI_AS_CODED)
  L += [
    "## Activation memory by remat policy and attention "
    "(qwen2.5-7b-instruct, 1 sequence/device, tensor 1)",
    "",
  ]
  rows = []
  for T in (4096, 6144):
    for att in ("einsum", "blockwise"):
      for remat in ("none", "dots", "full"):
        a = train_activation_bytes(
          PRESETS["qwen2.5-7b-instruct"], 1, T, 1, remat, attention=att
        )
        rows.append(
          (T, att, remat, _g(a["saved"]), _g(a["layer"]), _g(a["head"]))
        )
  L += _table(
    (
      "T",
      "attention",
      "remat",
      "saved by scan GiB",
      "one layer fwd+bwd GiB",
      "log-prob head GiB",
    ),
    rows,
  )
  L += [
    "",
    "## Analytical vs XLA compiled memory",
    "",
    "Parameter and state bytes must match exactly (they do, up to the "
    "4-byte AdamW step counter). Activations/transients are estimates; "
    "XLA CPU keeps more f32 temporaries than the GPU backend, so the GPU "
    "numbers calibrate the per-score constants.",
    "",
  ]
  for title, rs in compiled.items():
    L += _compiled_section(rs, title)
  if before_after:
    L += _before_after_section(before_after)
  if vision_check:
    L += _vision_check_section(vision_check)
  return "\n".join(L) + "\n"


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


def _vision_check_section(results: list) -> list[str]:
  rows = [
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
  train = sorted(
    (
      r
      for r in results
      if r["mode"] == "train" and r["attention"] == "blockwise"
    ),
    key=lambda r: r["depth"],
  )
  L = [
    "### Vision tower: analytical vs XLA compiled (run now, compile only)",
    "",
    "`memory_plan.vision_compiled_check`: the real `VisionTower` at "
    "Qwen3-VL-8B's widths, depth cut to a few blocks, one 1920x1080 "
    "screenshot, bf16 compute; XLA `memory_analysis()` temporaries. The "
    "CPU backend keeps more f32 temporaries than GPU (text model above: "
    "CPU 1.8-2.5x, H200 0.87-1.16x of the analytical train temp); no GPU "
    "was available for this check.",
    "",
  ]
  L += _table(
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
    rows,
  )
  if len(train) >= 2:
    a, b = train[0], train[-1]
    dl = b["depth"] - a["depth"]
    per_an = (b["analytical"] - a["analytical"]) / dl
    per_c = (b["compiled"] - a["compiled"]) / dl
    L += [
      "",
      f"Per extra layer (train, blockwise, depth {a['depth']} -> "
      f"{b['depth']}): analytical {per_an / GiB:.2f} GiB, compiled "
      f"{per_c / GiB:.2f} GiB ({per_c / per_an:.1f}x). The plan above uses "
      "the analytical terms; if GPU memory follows the CPU slope, the "
      "training phase's vision activations are that much larger, which "
      "remat of the tower's scan would remove.",
    ]
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


def _run_script(args: list[str]) -> dict:
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
  return [_run_script(["--devices", "8", "--materialize"])]


def run_before_after() -> dict[str, dict]:
  """The before/after compiled check (`BEFORE_AFTER_ARGS`)."""
  return {k: _run_script(a) for k, a in BEFORE_AFTER_ARGS.items()}


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


def _before_after_section(results: dict[str, dict]) -> list[str]:
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
      "prefill (`sampler._prefill`); after: blockwise attention, 4-row "
      "pieces (`rla_jax.sampling.prefill.prefill`). Bytes per device, "
      "XLA `memory_analysis()` temporaries. Commands:",
      "",
    ]
    + [f"    {c}" for c in cmd]
    + [""]
    + _table(
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
    + _compiled_section(list(results.values()), "The two runs in full")
  )


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--out", default="docs/MEMORY_PLAN.md")
  ap.add_argument(
    "--compiled",
    action="store_true",
    help="run the 8-device CPU compiled checks (~3 min)",
  )
  ap.add_argument(
    "--gpu-results",
    default=os.path.join(_REPO, "docs", "MEMORY_PLAN_compiled_h200.jsonl"),
    help="JSON lines from memory_plan_compiled.py on a GPU",
  )
  ap.add_argument("--turns", type=int, default=Workload.turns)
  a = ap.parse_args(argv)
  wl = Workload(turns=a.turns)
  compiled, before_after, vision_check = {}, None, None
  if a.compiled:
    vision_check = vision_compiled_check()
    compiled["8 forced CPU devices (run now; einsum attention)"] = (
      run_compiled_cpu()
    )
    before_after = run_before_after()
  if a.gpu_results and os.path.exists(a.gpu_results):
    with open(a.gpu_results) as f:
      compiled[
        "one H200, JAX 0.11.2 (recorded; compile only; einsum attention, "
        "whole-batch prefill: measured before the memory-bounded attention)"
      ] = [json.loads(line) for line in f if line.strip()]
  text = render(wl, compiled, before_after, vision_check)
  with open(a.out, "w") as f:
    f.write(text)
  print(f"wrote {a.out}")


if __name__ == "__main__":
  main()
