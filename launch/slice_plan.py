"""Slice plans of RLAnything's paper presets: per-chip memory of each
phase and the step-time model (`launch/param_memory.py` and
`launch/activation_memory.py` give the bytes).

Used by `launch/memory_plan.py` (docs/MEMORY_PLAN.md)."""

from __future__ import annotations

import dataclasses
import math

from launch.accelerators import (
  DECODE_BW_UTIL,
  TRAIN_MFU,
  USABLE_HBM_FRACTION,
  Accelerator,
)
from launch.activation_memory import (
  F32,
  attention_kind,
)
from launch.memory_model import (
  Workload,
)
from launch.memory_phases import (
  sample_phase_bytes,
  train_phase_bytes,
)
from launch.memory_vision import (
  images_per_device,
  screenshot_grid,
  vision_flops_per_image,
)
from launch.param_memory import (
  fake_mesh,
  param_count,
  per_device_param_bytes,
  text_config,
  vision_config,
)
from rla_jax import sharding as shd
from rla_jax.models.config import QwenConfig

# Tensor-parallel sizes tried per slice, and the phases of one RL step.
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
    "policy_sample": _sample_phase(pol, sm, wl, "policy"),
    "rm_sample": _sample_phase(rm, sm, wl, "rm"),
    "policy_train": _train_phase(pol, tm, wl, "policy"),
    "rm_train": _train_phase(rm, tm, wl, "rm"),
  }
  persistent = {
    "policy_sample": f32["policy"] + f32["rm"],
    "rm_sample": f32["policy"] + f32["rm"],
    "policy_train": f32["rm"],
    "rm_train": f32["policy"],
  }
  return SlicePlan(acc, chips, train_tensor, sample_tensor, phases, persistent)


def _role_sizes(wl: Workload, role: str) -> tuple[int, int, int, int]:
  """(concurrent rows, prompt tokens, new tokens, images per row) of one
  role's ("policy" or "rm") calls in wl."""
  if role == "policy":
    return wl.policy_rows, wl.policy_prompt, wl.policy_gen, wl.policy_images
  return wl.rm_rows, wl.rm_prompt, wl.rm_gen, wl.rm_images


def _sample_phase(cfg, mesh, wl: Workload, role: str) -> dict[str, int]:
  """Per-device bytes while sampling one role's calls (`_role_sizes`) on
  the sampling mesh."""
  rows, prompt, gen, images = _role_sizes(wl, role)
  return sample_phase_bytes(
    cfg,
    mesh,
    rows,
    prompt,
    gen,
    wl.prefill_rows_per_device,
    wl.attention,
    images,
    wl.screen,
    wl.images_sharded,
  )


def _train_phase(cfg, mesh, wl: Workload, role: str) -> dict[str, int]:
  """Per-device bytes while training one role on its own samples (prompt
  + new tokens, with their images) on the training mesh."""
  _, prompt, gen, images = _role_sizes(wl, role)
  return train_phase_bytes(cfg, mesh, prompt + gen, wl, images)


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
  for role, cfg in (("policy", pol), ("rm", rm)):
    rows, prompt, gen, images = _role_sizes(wl, role)
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


def peak_phase(plan: SlicePlan) -> str:
  """The phase that sets a plan's co-resident peak."""
  return max(
    plan.phases,
    key=lambda p: sum(plan.phases[p].values()) + plan.persistent[p],
  )
