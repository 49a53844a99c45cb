"""Device meshes, logical-axis rules and parameter shardings.

Model code names logical axes only ("embed", "heads", "vocab", ...; see
`rla_jax.models.qwen.LAYER_PARAM_AXES`). A rule table, kept in config, maps
each logical axis to zero or more mesh axes of a ("data", "fsdp", "tensor")
mesh. Training shards weights fully (fsdp x tensor); sampling keeps weights
tensor-parallel only, so a decode step does not all-gather weights.

A mesh axis is dropped from a dimension it does not divide (e.g. 2 kv heads
on a tensor axis of 4): that dimension is then replicated over that axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

MESH_AXES = ("data", "fsdp", "tensor")

Rules = Sequence[tuple[str, str | tuple[str, ...] | None]]

TRAIN_RULES: Rules = (
  ("batch", ("data", "fsdp")),
  ("embed", "fsdp"),
  ("heads", "tensor"),
  ("kv_heads", "tensor"),
  ("mlp", "tensor"),
  ("vocab", "tensor"),
  ("layers", None),
  ("head_dim", None),
  ("norm", None),
  ("cache_slots", None),
  ("length", None),
  # Qwen3-VL's vision tower (`rla_jax.models.qwen3_vl.vision`).
  ("vision_embed", "fsdp"),
  ("vision_heads", "tensor"),
  ("vision_mlp", "tensor"),
  ("vision_merge", "fsdp"),
  ("vision_patch", None),
  ("vision_positions", None),
  ("qkv", None),
  ("deepstack", None),
)

# Weights gathered over fsdp for sampling (tensor-parallel only).
_FSDP_ONLY_AXES = ("embed", "vision_embed", "vision_merge")
SAMPLE_RULES: Rules = tuple(
  (name, None) if name in _FSDP_ONLY_AXES else (name, axes)
  for name, axes in TRAIN_RULES
)


def make_mesh(
  data: int = 1,
  fsdp: int = -1,
  tensor: int = 1,
  devices: Sequence[jax.Device] | None = None,
) -> Mesh:
  """A ("data", "fsdp", "tensor") mesh; one size may be -1 (the rest)."""
  devices = list(devices if devices is not None else jax.devices())
  sizes = [data, fsdp, tensor]
  if sizes.count(-1) > 1:
    raise ValueError(f"at most one mesh axis may be -1, got {sizes}")
  known = math.prod(s for s in sizes if s != -1)
  if -1 in sizes:
    if len(devices) % known:
      raise ValueError(
        f"{len(devices)} devices do not divide by mesh sizes {sizes}"
      )
    sizes[sizes.index(-1)] = len(devices) // known
  if math.prod(sizes) != len(devices):
    raise ValueError(
      f"mesh {dict(zip(MESH_AXES, sizes, strict=True))} needs "
      f"{math.prod(sizes)} devices, have {len(devices)}"
    )
  return Mesh(np.array(devices).reshape(sizes), MESH_AXES)


def logical_to_spec(
  axes: Sequence[str | None], shape: Sequence[int], mesh: Mesh, rules: Rules
) -> P:
  """PartitionSpec for a value with the given logical axes and shape."""
  table = dict(rules)
  used: set[str] = set()
  spec = []
  for name, dim in zip(axes, shape, strict=True):
    if name is not None and name not in table:
      raise KeyError(
        f"no sharding rule for logical axis {name!r}; "
        f"rules cover {sorted(table)}"
      )
    target = table.get(name) if name is not None else None
    targets = (target,) if isinstance(target, str) else tuple(target or ())
    kept = []
    for ax in targets:
      size = mesh.shape[ax]
      if ax in used or size == 1:
        continue
      if dim % (math.prod(mesh.shape[a] for a in kept) * size):
        continue
      kept.append(ax)
    used.update(kept)
    spec.append(
      None if not kept else kept[0] if len(kept) == 1 else tuple(kept)
    )
  return P(*spec)


def param_sharding_fn(
  mesh: Mesh, rules: Rules
) -> Callable[[Sequence[str], Sequence[int]], NamedSharding]:
  """(logical_axes, shape) -> NamedSharding, as `load_qwen` expects."""
  return lambda axes, shape: NamedSharding(
    mesh, logical_to_spec(axes, shape, mesh, rules)
  )


def state_shardings(state: nnx.State, mesh: Mesh, rules: Rules):
  """A pytree of NamedShardings matching an nnx.State of logical Params."""

  def one(var):
    value = var.get_value()
    axes = getattr(var, "logical_axes", None) or (None,) * np.ndim(value)
    return var.replace(
      NamedSharding(mesh, logical_to_spec(axes, np.shape(value), mesh, rules))
    )

  return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def shard_module(module: nnx.Module, mesh: Mesh, rules: Rules) -> nnx.Module:
  """Places every parameter of `module` on its rule-derived sharding.

  Goes through `distributed.place`, so a process-local module can be moved
  onto a mesh that spans processes.
  """
  from rla_jax.distributed import place

  graphdef, state = nnx.split(module)
  shardings = state_shardings(state, mesh, rules)
  state = jax.tree.map(
    lambda v, s: v.replace(place(v.get_value(), s.get_value())),
    state,
    shardings,
    is_leaf=lambda x: isinstance(x, nnx.Variable),
  )
  return nnx.merge(graphdef, state)


def batch_sharding(mesh: Mesh, rules: Rules, ndim: int = 2) -> NamedSharding:
  """Sharding of a [B, ...] host batch: B over the rule for "batch"."""
  target = dict(rules).get("batch")
  return NamedSharding(mesh, P(target, *([None] * (ndim - 1))))
