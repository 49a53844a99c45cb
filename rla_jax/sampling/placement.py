"""Where the sampler's arrays live: an optional device mesh and the
logical-axis rules that map array axes onto it.

Without a mesh everything stays on the default device. On a mesh, host
inputs are placed shard by shard with `distributed.put_global` (each
process copies only the slices its own devices hold), and the batch axis
is sharded over the mesh axes of the "batch" rule.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding

from rla_jax import distributed
from rla_jax import sharding as shd
from rla_jax.models.kv_cache import is_axes


@dataclasses.dataclass(frozen=True)
class Placement:
  """The sampler's mesh (None: a single device) and logical-axis rules."""

  mesh: Mesh | None
  rules: shd.Rules

  @property
  def batch_axes(self) -> tuple[str, ...]:
    """The mesh axes the batch axis is sharded over (() without a mesh)."""
    if self.mesh is None:
      return ()
    target = dict(self.rules).get("batch") or ()
    return (target,) if isinstance(target, str) else tuple(target)

  @property
  def batch_shards(self) -> int:
    """How many shards the batch axis is split into (1 without a mesh)."""
    return int(np.prod([self.mesh.shape[a] for a in self.batch_axes]))

  @property
  def spans_processes(self) -> bool:
    """True when the mesh has devices of other processes."""
    return self.mesh is not None and not all(
      d.process_index == jax.process_index() for d in self.mesh.devices.flat
    )

  def sharding(self, axes, shape) -> NamedSharding:
    """The sharding of an array of these logical axes and shape."""
    return NamedSharding(
      self.mesh, shd.logical_to_spec(axes, shape, self.mesh, self.rules)
    )

  def shardings(self, axes, shapes):
    """`sharding` over a tree of logical axes and the matching tree of
    shaped values (e.g. `jax.eval_shape`'s)."""
    return jax.tree.map(
      lambda a, x: self.sharding(a, x.shape), axes, shapes, is_leaf=is_axes
    )

  def module(self, module):
    """`module` with every parameter placed by the rules (`module` itself
    without a mesh)."""
    if self.mesh is None:
      return module
    return shd.shard_module(module, self.mesh, self.rules)

  def place(self, x, axes):
    """Host array `x` on the device(s): sharded by its logical axes on a
    mesh, on the default device without one."""
    if self.mesh is None:
      return jnp.asarray(x)
    return distributed.put_global(x, self.sharding(axes, np.shape(x)))
