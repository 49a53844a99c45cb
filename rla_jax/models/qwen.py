"""Qwen2 / Qwen2.5 / Qwen3 / Llama decoder in Flax NNX.

One module serves training (a full sequence, no cache) and sampling (a chunk
of new tokens appended to a `KVCache`). Layers are stacked along a leading
L axis; without a cache they run with `jax.lax.scan`, so compile time does
not grow with depth. With a cache the call goes to the layer-unrolled
forward of `rla_jax.models.unrolled` (the sampler calls that directly on a
pre-unstacked parameter copy).
Every parameter carries `logical_axes` metadata (e.g. ("embed", "heads",
"head_dim")) that `rla_jax.sharding` maps to mesh axes; model code never
names a mesh axis.

Dimension letters: B batch, T new tokens, S key slots, D hidden, N query
heads, K kv heads, G = N/K, H head_dim, F mlp, V vocab, L layers.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from flax import nnx

from rla_jax.models import unrolled
from rla_jax.models.attention import attention as masked_attention
from rla_jax.models.attention import check_implementation
from rla_jax.models.config import QwenConfig
from rla_jax.models.kv_cache import KVCache
from rla_jax.models.ops import (
  attention_inputs,
  attention_output_and_mlp,
  rms_norm,
)
from rla_jax.models.visual_tokens import (
  VisualTokens,
  add_deepstack,
  place_features,
)

REMAT_POLICIES = {
  "none": None,
  "full": jax.checkpoint_policies.nothing_saveable,
  "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}

# Parameter name -> logical axes (leading "layers" axis for stacked ones).
LAYER_PARAM_AXES = {
  "input_norm": ("layers", "norm"),
  "post_attn_norm": ("layers", "norm"),
  "wq": ("layers", "embed", "heads", "head_dim"),
  "wk": ("layers", "embed", "kv_heads", "head_dim"),
  "wv": ("layers", "embed", "kv_heads", "head_dim"),
  "wo": ("layers", "heads", "head_dim", "embed"),
  "bq": ("layers", "heads", "head_dim"),
  "bk": ("layers", "kv_heads", "head_dim"),
  "bv": ("layers", "kv_heads", "head_dim"),
  "bo": ("layers", "embed"),
  "q_norm": ("layers", "norm"),
  "k_norm": ("layers", "norm"),
  "w_gate": ("layers", "embed", "mlp"),
  "w_up": ("layers", "embed", "mlp"),
  "w_down": ("layers", "mlp", "embed"),
  "b_gate": ("layers", "mlp"),
  "b_up": ("layers", "mlp"),
  "b_down": ("layers", "embed"),
}


def layer_param_shapes(cfg: QwenConfig) -> dict[str, tuple[int, ...]]:
  """Shapes of the stacked per-layer parameters present in `cfg`."""
  L, D, N, K, H, F = (
    cfg.num_layers,
    cfg.hidden_size,
    cfg.num_heads,
    cfg.num_kv_heads,
    cfg.head_dim,
    cfg.intermediate_size,
  )
  shapes = {
    "input_norm": (L, D),
    "post_attn_norm": (L, D),
    "wq": (L, D, N, H),
    "wk": (L, D, K, H),
    "wv": (L, D, K, H),
    "wo": (L, N, H, D),
    "w_gate": (L, D, F),
    "w_up": (L, D, F),
    "w_down": (L, F, D),
  }
  if cfg.qkv_bias:
    shapes.update(bq=(L, N, H), bk=(L, K, H), bv=(L, K, H))
  if cfg.o_bias:
    shapes.update(bo=(L, D))
  if cfg.qk_norm:
    shapes.update(q_norm=(L, H), k_norm=(L, H))
  if cfg.mlp_bias:
    shapes.update(b_gate=(L, F), b_up=(L, F), b_down=(L, D))
  return shapes


def init_param(rngs, shape, init, param_dtype, axes):
  """An nnx.Param of `shape` with logical `axes`: init "ones", "zeros" or
  N(0, 0.02^2) (shared by the decoder and the vision tower)."""
  if init == "ones":
    value = jnp.ones(shape, param_dtype)
  elif init == "zeros":
    value = jnp.zeros(shape, param_dtype)
  else:
    value = (0.02 * jax.random.normal(rngs.params(), shape)).astype(param_dtype)
  return nnx.Param(value, logical_axes=axes)


class Qwen(nnx.Module):
  """Qwen2/Qwen3/Llama causal LM with stacked, scanned layers (the family's
  differences are options of `QwenConfig`). `remat`: a `REMAT_POLICIES`
  key; `attention`: a `rla_jax.models.attention` implementation (both
  forwards; the sampler reads it from the model)."""

  def __init__(
    self,
    cfg: QwenConfig,
    *,
    rngs: nnx.Rngs,
    dtype=jnp.float32,
    param_dtype=jnp.float32,
    remat: str = "none",
    attention: str = "auto",
  ):
    if remat not in REMAT_POLICIES:
      raise ValueError(
        f"remat must be one of {sorted(REMAT_POLICIES)}, got {remat!r}"
      )
    self.cfg = cfg
    self.dtype = dtype
    self.remat = remat
    check_implementation(attention)
    self.attention = attention
    self.embed = init_param(
      rngs,
      (cfg.vocab_size, cfg.hidden_size),
      "normal",
      param_dtype,
      ("vocab", "embed"),
    )
    layers = {}
    for name, shape in layer_param_shapes(cfg).items():
      init = (
        "ones"
        if name.endswith("norm")
        else "zeros"
        if name.startswith("b")
        else "normal"
      )
      layers[name] = init_param(
        rngs, shape, init, param_dtype, LAYER_PARAM_AXES[name]
      )
    self.layers = nnx.Dict(layers)
    self.final_norm = init_param(
      rngs, (cfg.hidden_size,), "ones", param_dtype, ("norm",)
    )
    if not cfg.tie_word_embeddings:
      self.lm_head = init_param(
        rngs,
        (cfg.hidden_size, cfg.vocab_size),
        "normal",
        param_dtype,
        ("embed", "vocab"),
      )

  # ------------------------------------------------------------ pieces
  def lm_head_matrix(self) -> jax.Array:
    """The [D, V] output projection (the embedding, transposed, if tied)."""
    if self.cfg.tie_word_embeddings:
      return self.embed[...].T
    return self.lm_head[...]

  def logits_from_hidden(self, h: jax.Array) -> jax.Array:
    """[..., D] final hidden states -> [..., V] float32 logits."""
    w = self.lm_head_matrix().astype(self.dtype)
    return jnp.einsum(
      "...d,dv->...v",
      h.astype(self.dtype),
      w,
      preferred_element_type=jnp.float32,
    )

  def _layer(self, p, x, positions, mask):
    """One decoder layer over a full chunk. x: [B, T, D]; mask: [B, T] bool
    (real tokens): token i attends j <= i with mask[b, j]. Returns x'."""
    cfg, dt = self.cfg, self.dtype
    q, k, v = attention_inputs(cfg, p, x, positions, dt)
    attn = masked_attention(
      q,
      k.transpose(0, 2, 1, 3),
      v.transpose(0, 2, 1, 3),
      mask,
      implementation=self.attention,
    )
    return attention_output_and_mlp(cfg, p, x, attn, dt)

  # ------------------------------------------------------------ forward
  def hidden_states(
    self,
    tokens: jax.Array,
    mask: jax.Array | None = None,
    cache: KVCache | None = None,
    positions: jax.Array | None = None,
    visual: VisualTokens | None = None,
  ) -> tuple[jax.Array, KVCache | None]:
    """Final-norm hidden states [B, T, D] and the updated cache.

    tokens: [B, T] int; mask: [B, T] (1 = real token, 0 = padding; default
    all real). Without a cache the tokens attend causally to each other;
    with a cache they are written at slots [cache.end, cache.end + T) and
    attend to every valid earlier slot (`unrolled.forward`). positions
    ([B, T], or [B, T, 3] with cfg.mrope_section) default to the running
    count of real tokens (so padding never shifts positions). visual:
    image features placed at image-pad tokens, with DeepStack additions
    after the first layers (`visual_tokens`).
    """
    if cache is not None:
      return unrolled.forward(
        self.cfg,
        unrolled.unstack(self),
        tokens,
        mask,
        cache,
        positions,
        self.dtype,
        attention=self.attention,
        visual=visual,
      )
    B, T = tokens.shape
    mask = jnp.ones((B, T), bool) if mask is None else mask.astype(bool)
    if positions is None:
      positions = jnp.maximum(jnp.cumsum(mask, axis=1) - 1, 0).astype(jnp.int32)
    x = self.embed[...].astype(self.dtype)[tokens]
    if visual is not None:
      x = place_features(x, visual)
    layer_params = {k: v[...] for k, v in self.layers.items()}

    def body(x, p_and_index):
      p, i = p_and_index
      x = self._layer(p, x, positions, mask)
      if visual is not None:
        x = add_deepstack(x, visual, i)
      return x, None

    if self.remat != "none":
      body = jax.checkpoint(body, policy=REMAT_POLICIES[self.remat])
    layer_index = jnp.arange(self.cfg.num_layers, dtype=jnp.int32)
    x, _ = jax.lax.scan(body, x, (layer_params, layer_index))
    h = rms_norm(x, self.final_norm[...], self.cfg.rms_norm_eps)
    return h, None

  def __call__(
    self,
    tokens,
    mask=None,
    cache=None,
    positions=None,
    logits: Literal["all", "last"] = "all",
    visual: VisualTokens | None = None,
  ):
    """Logits ([B, T, V] or, with logits="last", [B, V]) and new cache."""
    h, cache = self.hidden_states(tokens, mask, cache, positions, visual)
    if logits == "last":
      h = h[:, -1]
    return self.logits_from_hidden(h), cache
