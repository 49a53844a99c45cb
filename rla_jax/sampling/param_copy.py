"""The sampler's copy of a model's parameters.

The sampler keeps its own copy, unstacked per layer for the unrolled
sampling forward (`rla_jax.models.unrolled`), with floating parameters in
the model's compute dtype: a trainer holding float32 master weights
samples from a bfloat16 copy (half the memory and bandwidth) when it
computes in bfloat16.
"""

from __future__ import annotations

import functools

import jax
from flax import nnx

from rla_jax.models import unrolled
from rla_jax.models.qwen import Qwen
from rla_jax.sampling import image_prefill
from rla_jax.sampling.placement import Placement


class LayerCopier:
  """Makes per-layer copies of a model's parameters: one jitted program per
  model structure and compute dtype, its outputs placed by the sampling
  rules on a mesh."""

  def __init__(self, placement: Placement):
    self.placement = placement
    self._programs = {}

  def __call__(self, model: Qwen, compute) -> unrolled.UnrolledParams:
    """`model`'s parameters (already placed for sampling) unstacked per
    layer, floating ones cast to the compute dtype."""
    graphdef, state = nnx.split(model)
    key = (graphdef, compute.name)  # one program per model structure
    if key not in self._programs:

      def fn(st):
        return unrolled.unstack(nnx.merge(graphdef, st), compute)

      out = None
      if self.placement.mesh is not None:
        out = self.placement.shardings(
          unrolled.logical_axes(model), jax.eval_shape(fn, state)
        )
      self._programs[key] = jax.jit(fn, out_shardings=out)
    return self._programs[key](state)


def vision(model, compute):
  """(graphdef, state) of a Qwen3-VL model's vision tower, floating
  parameters cast to the compute dtype."""
  graphdef, state = nnx.split(model.vision)
  cast = functools.partial(image_prefill.cast_floating, dtype=compute)
  return graphdef, jax.jit(cast)(state)
