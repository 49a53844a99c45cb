"""Parameter counts and per-device parameter bytes of the memory model.

Everything shape-related comes from the real code: parameter shapes and
logical axes from `nnx.eval_shape(Qwen(cfg))` (`Qwen3VL(cfg)` for the
vision-language preset; nothing is allocated), shard shapes from
`rla_jax.sharding.logical_to_spec` applied to those true shapes on a mesh
of the slice's size (`fake_mesh`, `shard_shape`). The closed forms
(`param_count_formula`, `vision_param_count_formula`) are checked against
the real counts (`param_count`). Also the text / vision parts of a config
(`text_config`, `vision_config`). The presets and workloads are in
`launch/memory_model.py`.
"""

from __future__ import annotations

import functools
import math
import types

from flax import nnx

from rla_jax import sharding as shd
from rla_jax.models.config import QwenConfig
from rla_jax.models.qwen import Qwen
from rla_jax.models.qwen3_vl import Qwen3VL, Qwen3VLConfig, VisionConfig


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
