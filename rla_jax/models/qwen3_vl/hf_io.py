"""Hugging Face checkpoint import/export for `Qwen3VL`.

The directory layout of `Qwen3VLForConditionalGeneration`: the text decoder
under `model.language_model.` (read by the text models' loader,
`rla_jax.models.hf_io`), `lm_head.weight`, and the vision tower under
`model.visual.`. Import streams tensor by tensor into each parameter's
target sharding after checking every tensor's presence and shape (one
error naming the directory and the tensor); export writes a directory
`transformers.Qwen3VLForConditionalGeneration.from_pretrained` loads.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors.numpy import save_file

from rla_jax.models import hf_io
from rla_jax.models.hf_io import CheckpointError
from rla_jax.models.qwen3_vl.config import Qwen3VLConfig
from rla_jax.models.qwen3_vl.model import Qwen3VL
from rla_jax.models.qwen3_vl.vision import (
  block_param_shapes,
  merger_param_shapes,
)

TEXT_PREFIX = "model.language_model."
VISION_PREFIX = "model.visual."
PREPROCESSOR_FILE = "preprocessor_config.json"

# Our vision parameter -> (HF key under model.visual., input dims of a
# linear weight or 0 for a vector). A linear weight [in..., out...] is the
# HF (out, in...) tensor flattened to (out, prod(in)) and transposed.
_BLOCK_KEYS = {
  "norm1_w": ("blocks.{i}.norm1.weight", 0),
  "norm1_b": ("blocks.{i}.norm1.bias", 0),
  "norm2_w": ("blocks.{i}.norm2.weight", 0),
  "norm2_b": ("blocks.{i}.norm2.bias", 0),
  "wqkv": ("blocks.{i}.attn.qkv.weight", 1),
  "bqkv": ("blocks.{i}.attn.qkv.bias", 0),
  "wo": ("blocks.{i}.attn.proj.weight", 2),
  "bo": ("blocks.{i}.attn.proj.bias", 0),
  "fc1": ("blocks.{i}.mlp.linear_fc1.weight", 1),
  "b1": ("blocks.{i}.mlp.linear_fc1.bias", 0),
  "fc2": ("blocks.{i}.mlp.linear_fc2.weight", 1),
  "b2": ("blocks.{i}.mlp.linear_fc2.bias", 0),
}
_MERGER_KEYS = {
  "norm_w": ("norm.weight", 0),
  "norm_b": ("norm.bias", 0),
  "fc1": ("linear_fc1.weight", 1),
  "b1": ("linear_fc1.bias", 0),
  "fc2": ("linear_fc2.weight", 1),
  "b2": ("linear_fc2.bias", 0),
}


def _vision_tensors(cfg: Qwen3VLConfig) -> dict[tuple[str, ...], list]:
  """Our vision parameter path -> [(HF key, our per-entry shape, input
  dims, HF shape)], one entry per stacked layer / merger (a single entry
  for unstacked parameters)."""
  v = cfg.vision
  out: dict[tuple[str, ...], list] = {
    ("patch_w",): [
      (
        "patch_embed.proj.weight",
        (v.patch_dim, v.hidden_size),
        1,
        (
          v.hidden_size,
          v.in_channels,
          v.temporal_patch_size,
          v.patch_size,
          v.patch_size,
        ),
      )
    ],
    ("patch_b",): [("patch_embed.proj.bias", (v.hidden_size,), 0, None)],
    ("pos_embed",): [
      ("pos_embed.weight", (v.num_position_embeddings, v.hidden_size), -1, None)
    ],
  }
  for name, shape in block_param_shapes(v).items():
    key, num_in = _BLOCK_KEYS[name]
    out[("blocks", name)] = [
      (key.format(i=i), shape[1:], num_in, None) for i in range(v.depth)
    ]
  for name, shape in merger_param_shapes(v, False).items():
    key, num_in = _MERGER_KEYS[name]
    out[("merger", name)] = [("merger." + key, shape, num_in, None)]
  E = len(v.deepstack_visual_indexes)
  for name, shape in merger_param_shapes(v, True).items():
    key, num_in = _MERGER_KEYS[name]
    out[("deepstack_mergers", name)] = [
      (f"deepstack_merger_list.{e}.{key}", shape, num_in, None)
      for e in range(E)
    ]
  return out


def _hf_shape(shape, num_in, hf_shape):
  """The HF tensor shape of one of our parameters."""
  if hf_shape is not None:
    return tuple(hf_shape)
  if num_in == 0:
    return (math.prod(shape),)
  if num_in < 0:  # an embedding table: the same layout
    return tuple(shape)
  return (math.prod(shape[num_in:]), math.prod(shape[:num_in]))


def _from_hf(x: np.ndarray, shape, num_in) -> np.ndarray:
  if num_in <= 0:
    return x.reshape(shape)
  return x.reshape(x.shape[0], -1).T.reshape(shape)


def _to_hf(x: np.ndarray, num_in, hf_shape) -> np.ndarray:
  if num_in <= 0:
    return np.ascontiguousarray(x.reshape(hf_shape))
  in_size = math.prod(x.shape[:num_in])
  return np.ascontiguousarray(x.reshape(in_size, -1).T.reshape(hf_shape))


def load_qwen3_vl(
  model_dir: str,
  *,
  dtype=jnp.float32,
  param_dtype=jnp.float32,
  remat: str = "none",
  attention: str = "auto",
  sharding_fn: Callable | None = None,
) -> Qwen3VL:
  """Loads a HF Qwen3-VL directory into a `Qwen3VL` (see `hf_io.load_qwen`
  for sharding_fn). Every tensor is checked before any weight is read."""
  cfg = Qwen3VLConfig.from_json_file(os.path.join(model_dir, "config.json"))
  reader = hf_io._TensorReader(model_dir)  # the text loader's reader
  hf_io.check_text_tensors(reader, cfg.text, TEXT_PREFIX)
  table = _vision_tensors(cfg)
  for entries in table.values():
    for key, shape, num_in, hf_shape in entries:
      hf_io._check_shape(
        reader,
        VISION_PREFIX + key,
        _hf_shape(shape, num_in, hf_shape),
        model_dir,
      )
  abstract = nnx.eval_shape(
    lambda: Qwen3VL(
      cfg,
      rngs=nnx.Rngs(0),
      dtype=dtype,
      param_dtype=param_dtype,
      remat=remat,
      attention=attention,
    )
  )

  def host_loader(names):
    if names[0] != "vision":
      return hf_io.text_host_loader(names, cfg.text, reader, TEXT_PREFIX)
    entries = table.get(tuple(names[1:]))
    if entries is None:
      raise CheckpointError(f"no HF mapping for parameter {'/'.join(names)}")
    stacked = names[1] in ("blocks", "deepstack_mergers")

    def host(index):
      if not stacked:
        key, shape, num_in, _ = entries[0]
        return _from_hf(reader.get(VISION_PREFIX + key), shape, num_in)[
          tuple(index)
        ]
      parts = [
        _from_hf(reader.get(VISION_PREFIX + key), shape, num_in)
        for key, shape, num_in, _ in entries[index[0]]
      ]
      return np.stack(parts)[(slice(None),) + tuple(index[1:])]

    return host

  return hf_io.materialise(abstract, host_loader, param_dtype, sharding_fn)


def save_qwen3_vl(
  model: Qwen3VL,
  out_dir: str,
  *,
  dtype: str = "float32",
  preprocessor: dict | None = None,
  tokenizer=None,
) -> None:
  """Exports `model` as a HF Qwen3-VL directory (config, safetensors and,
  when given, the preprocessor config dict and tokenizer)."""
  cfg = model.vl_cfg
  os.makedirs(out_dir, exist_ok=True)
  tensors = hf_io.text_tensors(model, TEXT_PREFIX)
  state = nnx.state(model.vision)
  flat = {
    tuple(str(p) for p in path): np.asarray(
      jax.device_get(var.get_value()), np.float32
    )
    for path, var in nnx.to_flat_state(state)
  }
  for path, entries in _vision_tensors(cfg).items():
    value = flat[path]
    stacked = path[0] in ("blocks", "deepstack_mergers")
    for i, (key, shape, num_in, hf_shape) in enumerate(entries):
      x = value[i] if stacked else value
      tensors[VISION_PREFIX + key] = _to_hf(
        x, num_in, _hf_shape(shape, num_in, hf_shape)
      )
  np_dtype = {"float32": np.float32, "bfloat16": jnp.bfloat16}[dtype]
  tensors = {
    k: np.ascontiguousarray(v.astype(np_dtype)) for k, v in tensors.items()
  }
  save_file(
    tensors, os.path.join(out_dir, hf_io.SINGLE_FILE), metadata={"format": "pt"}
  )
  with open(os.path.join(out_dir, "config.json"), "w") as f:
    json.dump(cfg.to_hf_dict(dtype=dtype), f, indent=2, sort_keys=True)
  if preprocessor is not None:
    with open(os.path.join(out_dir, PREPROCESSOR_FILE), "w") as f:
      json.dump(preprocessor, f, indent=2, sort_keys=True)
  if tokenizer is not None:
    tokenizer.save_pretrained(out_dir)
