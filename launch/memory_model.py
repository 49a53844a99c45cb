"""Per-device memory model of the Qwen policy / reward model (analytical).

Everything shape-related comes from the real code: parameter shapes and
logical axes from `nnx.eval_shape(Qwen(cfg))` (`Qwen3VL(cfg)` for the
vision-language preset; nothing is allocated), shard
shapes from `rla_jax.sharding.logical_to_spec` applied to those true shapes
on a mesh of the slice's size. Activation and transient terms are analytical
estimates of what `rla_jax.models.qwen` materialises, by attention
implementation (`rla_jax.models.attention`, `attention_kind` here):
"einsum" (and "xla") materialise the [B, N, T, S] float32 scores;
"blockwise", "pallas_tpu" and "cudnn" are flash-style and keep only
[b, N, block_q, block_k] tiles plus O(T) row statistics ("auto" resolves to
one of these on TPU and GPU). They are checked against XLA's compiled
`memory_analysis()` on a small config by `launch/memory_plan_compiled.py`
(both implementations, whole batch and row pieces); for 7B/8B the numbers
are analytical only.

Precision plan (stated, used throughout): fp32 master parameters, fp32 AdamW
mu and nu, fp32 gradients (an accumulator and one micro-batch's), bf16
compute; the sampler holds a bf16, tensor-parallel-only copy of the weights
and a bf16 KV cache. fp32 masters are required: with the paper's lr 1e-6 an
Adam update (~lr) is ~5e-5 of a typical weight (~0.02), far below bf16's
relative resolution (2^-8 = 3.9e-3), so bf16-only weights would not move.

Qwen3-VL (`VL_PRESETS`, the GUI setting `GUI`): the vision tower's
parameters are counted, sharded and kept like the text model's; its
activations (per image, bidirectional attention over the P patches of a
screenshot) and FLOPs are analytical estimates of what
`rla_jax.models.qwen3_vl.vision` materialises, not checked against compiled
memory. Screenshot sizes follow the image processor's `smart_resize`.

Screenshots and the vision tower's terms are in `launch/memory_vision.py`;
the per-phase totals built from both in `launch/memory_phases.py`; the plan
built on them is `launch/memory_plan.py`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types

from flax import nnx

from rla_jax import sharding as shd
from rla_jax.models.config import QwenConfig
from rla_jax.models.kv_cache import cache_logical_axes
from rla_jax.models.qwen import Qwen
from rla_jax.models.qwen3_vl import Qwen3VL, Qwen3VLConfig, VisionConfig

GiB = 2**30
F32, BF16 = 4, 2
USABLE_HBM_FRACTION = 0.90  # XLA/runtime reserve and fragmentation headroom
TRAIN_MFU = 0.40  # model-FLOP utilisation for training and prefill
DECODE_BW_UTIL = 0.70  # achieved / peak HBM bandwidth for decode
# Bytes live per attention score (the einsum attention materialises them).
# Calibrated against XLA GPU compiled memory of Qwen2.5-7B on one H200
# (docs/MEMORY_PLAN_compiled_h200.jsonl): prefill measured ~6.2 B/score;
# train (remat full) ~4 B/score, we keep 6 B (f32 scores + bf16 probs) as a
# conservative bound.
SCORE_BYTES_TRAIN = 6
SCORE_BYTES_PREFILL = 6
# Flash-style attention (`attention._blockwise`): tile sizes (the module's
# defaults) and bytes per element of its tile-bounded temporaries.
BLOCK_Q = BLOCK_K = 128
FLASH_IMPLEMENTATIONS = ("blockwise", "pallas_tpu", "cudnn", "auto")
EINSUM_IMPLEMENTATIONS = ("einsum", "xla")


@dataclasses.dataclass(frozen=True)
class Accelerator:
  """One chip kind: capacity, peak dense bf16 FLOP/s and HBM bandwidth."""

  name: str
  hbm_bytes: float
  bf16_flops: float
  hbm_bytes_per_s: float
  slice_chips: tuple[int, ...]  # slice sizes one can rent, in chips
  slice_name: str  # format of the slice name, {n} = chips
  source: str


ACCELERATORS = (
  Accelerator(
    "TPU v5e",
    16 * GiB,
    197e12,
    819e9,
    (1, 4, 8, 16, 32, 64, 128, 256),
    "v5litepod-{n}",
    "cloud.google.com/tpu/docs/v5e: 16 GiB HBM2, 197 TF/s bf16, 819 GB/s",
  ),
  Accelerator(
    "TPU v5p",
    95 * GiB,
    459e12,
    2765e9,
    (4, 8, 16, 32, 64, 128, 256),
    "v5p-{n2}",
    "cloud.google.com/tpu/docs/v5p: 95 GiB HBM2e, 459 TF/s bf16, "
    "2765 GB/s; slice name counts TensorCores (2 per chip)",
  ),
  Accelerator(
    "TPU v6e",
    32 * GiB,
    918e12,
    1640e9,
    (1, 4, 8, 16, 32, 64, 128, 256),
    "v6e-{n}",
    "cloud.google.com/tpu/docs/v6e: 32 GiB HBM, 918 TF/s bf16, 1640 GB/s",
  ),
  Accelerator(
    "H100 80GB SXM",
    81559 * 2**20,
    989e12,
    3.35e12,
    (1, 2, 4, 8, 16, 32, 64),
    "{nodes}x8 H100",
    "NVIDIA H100 SXM datasheet: 80 GB HBM3 (nvidia-smi: 81559 "
    "MiB), 989 TF/s dense bf16 (1979 sparse), 3.35 TB/s",
  ),
  Accelerator(
    "H200 141GB SXM",
    143771 * 2**20,
    989e12,
    4.8e12,
    (1, 2, 4, 8, 16, 32, 64),
    "{nodes}x8 H200",
    "NVIDIA H200 datasheet: 141 GB HBM3e, 989 TF/s dense bf16, "
    "4.8 TB/s (nvidia-smi shows 143771 MiB)",
  ),
)


def slice_label(acc: Accelerator, chips: int) -> str:
  if "{nodes}" in acc.slice_name:
    return (
      f"{chips}x {acc.name.split()[0]}"
      if chips < 8
      else acc.slice_name.format(nodes=chips // 8)
    )
  return acc.slice_name.format(n=chips, n2=2 * chips)


PRESETS = {
  "qwen2.5-7b-instruct": QwenConfig(
    model_type="qwen2",
    vocab_size=152064,
    hidden_size=3584,
    intermediate_size=18944,
    num_layers=28,
    num_heads=28,
    num_kv_heads=4,
    head_dim=128,
    tie_word_embeddings=False,
  ),
  "qwen3-8b": QwenConfig(
    model_type="qwen3",
    vocab_size=151936,
    hidden_size=4096,
    intermediate_size=12288,
    num_layers=36,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    tie_word_embeddings=False,
  ),
}


# Qwen3-VL-8B (the GUI setting's policy and judge): the shapes of
# Qwen/Qwen3-VL-8B-Instruct's config.json (docs/MEMORY_PLAN.md, section
# "qwen3-vl-8b", says which value was checked against which source).
VL_PRESETS = {
  "qwen3-vl-8b": Qwen3VLConfig(
    # Qwen3-8B's decoder shapes, with Qwen3-VL's rope and M-RoPE layout.
    text=PRESETS["qwen3-8b"].replace(
      rope_theta=5_000_000.0,
      max_position_embeddings=262144,
      mrope_section=(24, 20, 20),
    ),
    vision=VisionConfig(
      depth=27,
      hidden_size=1152,
      intermediate_size=4304,
      num_heads=16,
      out_hidden_size=4096,
      patch_size=16,
      temporal_patch_size=2,
      spatial_merge_size=2,
      num_position_embeddings=2304,
      deepstack_visual_indexes=(8, 16, 24),
    ),
  ),
}


# The small config of the compiled checks (dims divide every mesh axis <= 8).
SMALL = QwenConfig(
  model_type="qwen2",
  vocab_size=1024,
  hidden_size=256,
  intermediate_size=512,
  num_layers=4,
  num_heads=8,
  num_kv_heads=4,
  head_dim=32,
)


@dataclasses.dataclass(frozen=True)
class Workload:
  """One RL step of the AlfWorld paper setting (reference section 3.3;
  `CODING` below: the coding paper preset).

  Token counts are the configured caps (upper bounds): every prompt at its
  max length, every response at its max generation length.
  """

  name: str = "alfworld:paper"
  tasks: int = 16
  rollouts: int = 8
  turns: int = 20  # mean interaction steps per trajectory
  policy_prompt: int = 2048
  policy_gen: int = 2048
  rm_prompt: int = 2048
  rm_gen: int = 4096
  judgements: int = 3  # m RM samples per (trajectory, step)
  # RM rows per task instead (coding: tests_per_task unit-test generations
  # per task, sampled in one call); None = trajectories x judgements.
  rm_rows_per_task: int | None = None
  micro_batch_per_device: int = 1
  remat: str = "full"
  logprob_chunk: int = 128
  # rows per device per prefill piece; None = the whole batch at once (the
  # Sampler's prefill_rows = 0; the paper presets set 4).
  prefill_rows_per_device: int | None = 4
  # `rla_jax.models.attention` implementation (config.model.attention); the
  # paper presets run "auto" = pallas_tpu on TPU, cudnn on GPU (bf16):
  # both tile-bounded like "blockwise", the term used for them here.
  attention: str = "blockwise"
  # Screenshots (Qwen3-VL workloads): (height, width) pixels of one, and
  # how many a policy / RM prompt holds (their merged tokens are part of
  # the prompt lengths above). images_sharded: each device encodes only
  # its own rows' images; False is the code as it is now (the Sampler and
  # the Learner replicate a call's / micro-batch's pixels, so every device
  # encodes every image, the count rounded up to a power of two).
  screen: tuple[int, int] | None = None
  policy_images: int = 0
  rm_images: int = 0
  images_sharded: bool = True

  @property
  def trajectories(self) -> int:
    return self.tasks * self.rollouts

  @property
  def policy_rows(self) -> int:  # concurrent policy rows
    return self.trajectories

  @property
  def rm_rows(self) -> int:  # concurrent RM rows: one step of every traj x m
    if self.rm_rows_per_task is not None:
      return self.tasks * self.rm_rows_per_task
    return self.trajectories * self.judgements


# What the paper presets run (flash attention, 4-row prefill pieces) and
# the plan before the memory-bounded attention (einsum, whole-batch prefill).
PAPER = Workload()
BEFORE = Workload(attention="einsum", prefill_rows_per_device=None)
# configs/coding.py "paper": 64 tasks x 32 programs (2048 policy rows in one
# Sampler call, prompt 2048 + 2048), 16 generated tests per task (1024 RM
# rows, 2048 + 4096), one turn. Prefill is counted over every row (an upper
# bound: the sampler prefills each prompt once and repeats its cache).
CODING = Workload(
  name="coding:paper",
  tasks=64,
  rollouts=32,
  turns=1,
  rm_rows_per_task=16,
)


# The GUI (OSWorld) setting, reference sections 3.3, 4, 8: 12 tasks x 8
# rollouts, 30 steps (the training cap: an upper bound), policy prompt cap
# 8192 and 2048 new tokens per call (the sampler's cap; training allows
# 4096 but a response is never longer than its call's cap), RM (judge)
# prompt 8192 + 8096, m = 3 judgements per step. Screenshots 1920x1080
# (the OSWorld VM screen): the policy prompt holds the current and the
# previous screenshot, the judge's the previous, current and next. A prompt
# with images is prefilled as one whole-batch chunk
# (`sampling.image_prefill`): no row pieces.
GUI = Workload(
  name="gui:paper",
  tasks=12,
  rollouts=8,
  turns=30,
  policy_prompt=8192,
  policy_gen=2048,
  rm_prompt=8192,
  rm_gen=8096,
  judgements=3,
  prefill_rows_per_device=None,
  screen=(1080, 1920),
  policy_images=2,
  rm_images=3,
)
# The same with the image layout of the code as it is now.
GUI_AS_CODED = dataclasses.replace(GUI, images_sharded=False)


def text_config(cfg) -> QwenConfig:
  """The text decoder's config: cfg itself, or a Qwen3VLConfig's text."""
  return cfg.text if isinstance(cfg, Qwen3VLConfig) else cfg


def vision_config(cfg) -> VisionConfig | None:
  """A Qwen3VLConfig's vision tower config; None for a text model."""
  return cfg.vision if isinstance(cfg, Qwen3VLConfig) else None


def fake_mesh(data: int, fsdp: int, tensor: int):
  """An object with `.shape` only: all `logical_to_spec` reads."""
  return types.SimpleNamespace(
    shape={"data": data, "fsdp": fsdp, "tensor": tensor}
  )


# ------------------------------------------------------------ parameters
@functools.cache
def abstract_params(cfg) -> tuple:
  """((path, shape, logical_axes), ...) from nnx.eval_shape (no allocation)
  of `Qwen(cfg)`, or `Qwen3VL(cfg)` for a Qwen3VLConfig (the vision
  tower's paths start with "vision/")."""
  model_class = Qwen3VL if isinstance(cfg, Qwen3VLConfig) else Qwen
  model = nnx.eval_shape(lambda: model_class(cfg, rngs=nnx.Rngs(0)))
  out = []
  for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
    out.append(
      (
        "/".join(map(str, path)),
        tuple(var.get_value().shape),
        tuple(var.logical_axes),
      )
    )
  return tuple(out)


def _part_of(path: str, part: str) -> bool:
  """Whether a parameter path belongs to part ("all", "text", "vision")."""
  if part not in ("all", "text", "vision"):
    raise ValueError(f"part must be 'all', 'text' or 'vision', got {part!r}")
  is_vision = path.startswith("vision/")
  return part == "all" or is_vision == (part == "vision")


def param_count(cfg, part: str = "all") -> int:
  """Sum of parameter sizes of the real model definition (part: "all",
  the "text" decoder, or the "vision" tower)."""
  return int(
    sum(math.prod(s) for p, s, _ in abstract_params(cfg) if _part_of(p, part))
  )


def vision_param_count_formula(v: VisionConfig, D: int) -> int:
  """Closed form of the vision tower, Dv, Fv, Lv = depth, Cp, Q = m^2 Dv,
  E DeepStack mergers, G learned positions:
  Cp Dv + Dv (patch) + G Dv + Lv (4Dv + 3Dv^2 + 3Dv + Dv^2 + Dv + 2 Dv Fv
  + Fv + Dv) + merger(Dv) + E merger(Q), with merger(n) = 2n + Q^2 + Q +
  Q D + D (n: the LayerNorm width, Dv before the 2x2 shuffle, Q after)."""
  Dv, Fv, Lv = v.hidden_size, v.intermediate_size, v.depth
  Q, E = v.merge_unit * Dv, len(v.deepstack_visual_indexes)
  block = 4 * Dv + 3 * Dv * Dv + 3 * Dv + Dv * Dv + Dv + 2 * Dv * Fv + Fv + Dv

  def merger(norm: int) -> int:
    return 2 * norm + Q * Q + Q + Q * D + D

  return (
    v.patch_dim * Dv
    + Dv
    + v.num_position_embeddings * Dv
    + Lv * block
    + merger(Dv)
    + E * merger(Q)
  )


def param_count_formula(cfg) -> int:
  """Closed form: V*D*(1 or 2) + D + L*(2D + D(N+2K)H + NHD + 3DF [+ biases
  (N+2K)H for qwen2 / attention_bias] [+ o bias D with attention_bias]
  [+ q/k norms 2H for qwen3] [+ mlp biases 2F + D with mlp_bias])
  [+ `vision_param_count_formula` for Qwen3-VL]."""
  v = vision_config(cfg)
  cfg = text_config(cfg)
  D, F, H = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
  N, K, V, L = cfg.num_heads, cfg.num_kv_heads, cfg.vocab_size, cfg.num_layers
  per_layer = 2 * D + D * (N + 2 * K) * H + N * H * D + 3 * D * F
  per_layer += (N + 2 * K) * H if cfg.qkv_bias else 0
  per_layer += D if cfg.o_bias else 0
  per_layer += 2 * H if cfg.qk_norm else 0
  per_layer += 2 * F + D if cfg.mlp_bias else 0
  text = V * D * (1 if cfg.tie_word_embeddings else 2) + D + L * per_layer
  return text + (vision_param_count_formula(v, D) if v else 0)


def shard_shape(shape, spec, mesh_shape: dict) -> tuple[int, ...]:
  """Per-device block shape of `shape` under PartitionSpec `spec`."""
  out = []
  for i, dim in enumerate(shape):
    entry = spec[i] if i < len(spec) else None
    axes = (entry,) if isinstance(entry, str) else tuple(entry or ())
    div = math.prod(mesh_shape[a] for a in axes)
    if dim % div:
      raise ValueError(f"dim {dim} of {shape} not divisible by {axes}")
    out.append(dim // div)
  return tuple(out)


def per_device_param_elems(cfg, mesh, rules, part: str = "all") -> int:
  """Elements of every parameter's shard held by one device (part: "all",
  "text" or "vision" parameters)."""
  total = 0
  for path, shape, axes in abstract_params(cfg):
    if not _part_of(path, part):
      continue
    spec = shd.logical_to_spec(axes, shape, mesh, rules)
    total += math.prod(shard_shape(shape, spec, mesh.shape))
  return total


def per_device_param_bytes(
  cfg, mesh, rules, itemsize: int, part: str = "all"
) -> int:
  return per_device_param_elems(cfg, mesh, rules, part) * itemsize


def kv_cache_bytes_per_device(
  cfg,
  rows: int,
  slots: int,
  mesh,
  rules=shd.SAMPLE_RULES,
  itemsize=BF16,
) -> int:
  """k and v, L buffers of [B, K, S, H] each (bf16), + valid [B, S] bool,
  per device."""
  cfg = text_config(cfg)
  axes = cache_logical_axes(cfg)
  kv_shape = (rows, cfg.num_kv_heads, slots, cfg.head_dim)
  kv = math.prod(
    shard_shape(
      kv_shape,
      shd.logical_to_spec(axes.k[0], kv_shape, mesh, rules),
      mesh.shape,
    )
  )
  valid = math.prod(
    shard_shape(
      (rows, slots),
      shd.logical_to_spec(axes.valid, (rows, slots), mesh, rules),
      mesh.shape,
    )
  )
  return 2 * cfg.num_layers * kv * itemsize + valid


# ----------------------------------------------------------- activations
def local_dim(dim: int, size: int) -> int:
  """`dim` split over a mesh axis of `size` when it divides (rule semantics)."""
  return dim // size if dim % size == 0 else dim


def attention_kind(attention: str) -> str:
  """ "einsum" for implementations that materialise the [b, N, T, S] scores
  (einsum, xla), "flash" for the tile-bounded ones (blockwise, pallas_tpu,
  cudnn; "auto" = pallas_tpu on TPU, cudnn on GPU for bf16)."""
  if attention in EINSUM_IMPLEMENTATIONS:
    return "einsum"
  if attention in FLASH_IMPLEMENTATIONS:
    return "flash"
  raise ValueError(
    f"attention must be one of "
    f"{sorted(EINSUM_IMPLEMENTATIONS + FLASH_IMPLEMENTATIONS)}, "
    f"got {attention!r}"
  )


def attention_train_bytes(
  b: int, N: int, K: int, T: int, H: int, attention: str
) -> dict[str, int]:
  """One layer's attention bytes in training (self-attention, S = T).

  einsum: layer = SCORE_BYTES_TRAIN per score [b, N, T, T]; saved (kept
    for the backward pass without remat) = f32 scores + bf16 probs.
  flash (`attention._blockwise`: query tiles looped by lax.map, key tiles
    by lax.scan, FlashAttention-2 custom VJP), with bq = BLOCK_Q,
    bk = BLOCK_K:
    saved = the residuals: m, l [b, N, T] f32 + out [b, T, N, H] bf16 +
      the padded q, k, v tile copies [b, T, N, H], 2 x [b, K, T, H] bf16;
    layer = the residuals + 20 B per tile element [b, N, bq, bk] (f32 s,
      p, dp, ds + bf16 p) + 4 B per [b, N, T] (D = rowsum(dO * out)) +
      10 B per [b, N, T, H] (dO tiles bf16, dq accumulator and the per-key-
      tile dq stack f32) + 12 B per [b, K, T, H] (dk, dv f32 stacks, bf16
      results). Nothing of size T x T.
  """
  if attention_kind(attention) == "einsum":
    scores = b * N * T * T
    return {"saved": scores * (F32 + BF16), "layer": scores * SCORE_BYTES_TRAIN}
  bq, bk = min(BLOCK_Q, T), min(BLOCK_K, T)
  saved = (
    b * N * T * 2 * F32 + b * T * N * H * 2 * BF16 + 2 * b * K * T * H * BF16
  )
  layer = (
    saved
    + b * N * bq * bk * 20
    + b * N * T * F32
    + b * N * T * H * 10
    + b * K * T * H * 12
  )
  return {"saved": saved, "layer": layer}


def attention_prefill_bytes(
  r: int, N: int, K: int, P: int, S: int, H: int, attention: str
) -> int:
  """One layer's attention transient of a cached forward of r rows, P
  queries, S key slots (inference: no residuals kept).

  einsum: SCORE_BYTES_PREFILL per score [r, N, P, S] (f32 scores + bf16
    probs) + the bool mask [r, P, S].
  flash (forward of `attention._blockwise`): 10 B per tile element
    [r, N, bq, bk] (f32 s and p, bf16 p) + the f32 accumulator
    [r, N, bq, H] + 6 B per [r, P, N, H] (q tiles, stacked output blocks,
    output, bf16) + 8 B per [r, N, P] (stacked m, l f32) + the padded k, v
    tile copies 2 x [r, K, S, H] bf16.
  """
  if attention_kind(attention) == "einsum":
    return r * N * P * S * SCORE_BYTES_PREFILL + r * P * S
  bq, bk = min(BLOCK_Q, P), min(BLOCK_K, S)
  return (
    r * N * bq * bk * 10
    + r * N * bq * H * F32
    + r * P * N * H * 6
    + r * N * P * 2 * F32
    + 2 * r * K * S * H * BF16
  )


def train_activation_bytes(
  cfg,
  b: int,
  T: int,
  tensor: int,
  remat: str,
  chunk: int = 128,
  attention: str = "einsum",
) -> dict[str, int]:
  """Activation bytes on one device for a micro-batch of b sequences of T.

  saved: what the layer scan keeps for the backward pass (L copies):
    full -> the bf16 carry x [b, T, D];
    dots -> carry + projection outputs q,k,v [b,T,(N+2K)H], gate/up
            [b,T,F], attn-out and down-out [b,T,D] (dots without batch dims)
            [+ the flash residuals, `attention_train_bytes`];
    none -> dots + the attention's saved bytes (einsum: fp32 scores and
            bf16 probs [b,N,T,T]) + f32 norms.
  layer: the working set of one layer's recomputed forward + backward:
    the attention's layer bytes (`attention_train_bytes`), 12 B per MLP
    element [b,T,F] (3 bf16 tensors and their grads), 24 B per residual
    element [b,T,D] (f32 norm temporaries).
  head: chunked log-probs, 3 f32 [b, C, V] buffers + 2 f32 [b, T, D].
  (The text decoder only; Qwen3-VL's tower: `vision_train_activation_bytes`.)
  """
  cfg = text_config(cfg)
  D, F, H, L = (
    cfg.hidden_size,
    cfg.intermediate_size,
    cfg.head_dim,
    cfg.num_layers,
  )
  N, K = local_dim(cfg.num_heads, tensor), local_dim(cfg.num_kv_heads, tensor)
  Fl, V = local_dim(F, tensor), local_dim(cfg.vocab_size, tensor)
  carry = b * T * D * BF16
  proj = b * T * ((N + 2 * K) * H + 2 * Fl + 2 * D) * BF16
  att = attention_train_bytes(b, N, K, T, H, attention)
  flash = attention_kind(attention) == "flash"
  saved = {
    "full": carry,
    "dots": carry + proj + (att["saved"] if flash else 0),
    "none": carry + proj + att["saved"] + 2 * b * T * D * F32,
  }
  if remat not in saved:
    raise ValueError(f"remat must be one of {sorted(saved)}, got {remat!r}")
  layer = att["layer"] + b * T * Fl * 12 + b * T * D * 24
  head = 3 * b * min(chunk, T) * V * F32 + 2 * b * T * D * F32
  return {"saved": L * saved[remat], "layer": layer, "head": head}
