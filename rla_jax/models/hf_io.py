"""Hugging Face checkpoint import/export for `rla_jax.models.Qwen`
(Qwen2, Qwen3 and Llama directories, by config.json's model_type).

Import streams tensor by tensor from `model.safetensors` or a sharded
`model-0000x-of-0000y.safetensors` set (via its index file) straight into
each parameter's target sharding with `jax.make_array_from_callback`: every
device's shard is read from disk on its own, so the whole model is never
materialised on one device (at most one HF tensor is on the host at once).

Export writes a directory that `transformers.AutoModelForCausalLM
.from_pretrained` loads (v5 config keys, safetensors in torch layout).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors import safe_open
from safetensors.numpy import save_file

from rla_jax.models.config import ConfigError, QwenConfig
from rla_jax.models.qwen import Qwen, layer_param_shapes

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


class CheckpointError(ValueError):
  """A checkpoint directory is missing files or tensors, or has bad shapes."""


# rla_jax stacked param -> (HF per-layer key template, HF shape or None when
# it equals our per-layer shape).
def _hf_layout(cfg: QwenConfig, prefix: str = "model."):
  D, N, K, H = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
  pre = prefix + "layers.{i}."
  table = {
    "input_norm": (pre + "input_layernorm.weight", None),
    "post_attn_norm": (pre + "post_attention_layernorm.weight", None),
    # ours [D, n, H] <-> HF (n*H, D)
    "wq": (pre + "self_attn.q_proj.weight", (N * H, D)),
    "wk": (pre + "self_attn.k_proj.weight", (K * H, D)),
    "wv": (pre + "self_attn.v_proj.weight", (K * H, D)),
    # ours [N, H, D] <-> HF (D, N*H)
    "wo": (pre + "self_attn.o_proj.weight", (D, N * H)),
    "bq": (pre + "self_attn.q_proj.bias", (N * H,)),
    "bk": (pre + "self_attn.k_proj.bias", (K * H,)),
    "bv": (pre + "self_attn.v_proj.bias", (K * H,)),
    "bo": (pre + "self_attn.o_proj.bias", None),
    "q_norm": (pre + "self_attn.q_norm.weight", None),
    "k_norm": (pre + "self_attn.k_norm.weight", None),
    "w_gate": (pre + "mlp.gate_proj.weight", (cfg.intermediate_size, D)),
    "w_up": (pre + "mlp.up_proj.weight", (cfg.intermediate_size, D)),
    "w_down": (pre + "mlp.down_proj.weight", (D, cfg.intermediate_size)),
    "b_gate": (pre + "mlp.gate_proj.bias", None),
    "b_up": (pre + "mlp.up_proj.bias", None),
    "b_down": (pre + "mlp.down_proj.bias", None),
  }
  return table


def _from_hf(name: str, x: np.ndarray, per_layer_shape) -> np.ndarray:
  """HF tensor of one layer -> our per-layer layout."""
  if name in ("wq", "wk", "wv", "w_gate", "w_up"):  # (out, in) -> (in, out)
    return x.T.reshape(per_layer_shape)
  if name == "wo":  # (D, N*H) -> (N, H, D)
    return x.T.reshape(per_layer_shape)
  if name == "w_down":  # (D, F) -> (F, D)
    return x.T
  return x.reshape(per_layer_shape)


def _to_hf(name: str, x: np.ndarray) -> np.ndarray:
  """Our per-layer layout -> HF tensor of one layer."""
  if name in ("wq", "wk", "wv", "w_gate", "w_up"):
    return np.ascontiguousarray(x.reshape(x.shape[0], -1).T)
  if name == "wo":
    return np.ascontiguousarray(x.reshape(-1, x.shape[-1]).T)
  if name == "w_down":
    return np.ascontiguousarray(x.T)
  return np.ascontiguousarray(x.reshape(-1))


class _TensorReader:
  """Reads named tensors lazily from a (possibly sharded) safetensors set."""

  def __init__(self, model_dir: str):
    self.model_dir = model_dir
    index_path = os.path.join(model_dir, INDEX_FILE)
    single = os.path.join(model_dir, SINGLE_FILE)
    if os.path.isfile(index_path):
      try:
        with open(index_path) as f:
          weight_map = json.load(f)["weight_map"]
      except (json.JSONDecodeError, KeyError) as e:
        raise CheckpointError(f"{index_path}: malformed index ({e})") from None
      self.key_to_file = {
        k: os.path.join(model_dir, v) for k, v in weight_map.items()
      }
      for path in set(self.key_to_file.values()):
        if not os.path.isfile(path):
          raise CheckpointError(f"{index_path}: names missing shard {path}")
    elif os.path.isfile(single):
      with safe_open(single, framework="numpy") as f:
        self.key_to_file = {k: single for k in f.keys()}
    else:
      raise CheckpointError(
        f"{model_dir}: no {SINGLE_FILE} or {INDEX_FILE} found"
      )
    self._handles = {}

  def has(self, key: str) -> bool:
    return key in self.key_to_file

  def get(self, key: str) -> np.ndarray:
    if key not in self.key_to_file:
      raise CheckpointError(f"{self.model_dir}: missing tensor {key!r}")
    path = self.key_to_file[key]
    if path not in self._handles:
      self._handles[path] = safe_open(path, framework="numpy")
    return self._handles[path].get_tensor(key)

  def shape(self, key: str) -> tuple[int, ...]:
    if key not in self.key_to_file:
      raise CheckpointError(f"{self.model_dir}: missing tensor {key!r}")
    path = self.key_to_file[key]
    if path not in self._handles:
      self._handles[path] = safe_open(path, framework="numpy")
    return tuple(self._handles[path].get_slice(key).get_shape())


def _check_shape(reader, key, expected, path_hint):
  got = reader.shape(key)
  if tuple(got) != tuple(expected):
    raise CheckpointError(
      f"{path_hint}: tensor {key!r} has shape {tuple(got)}, expected "
      f"{tuple(expected)}"
    )


def check_text_tensors(
  reader: _TensorReader, cfg: QwenConfig, prefix: str = "model."
) -> None:
  """Checks every text-decoder tensor's presence and shape (headers only)
  under the key prefix ("model." for causal LMs, "model.language_model."
  for Qwen3-VL)."""
  layout = _hf_layout(cfg, prefix)
  where = reader.model_dir
  for name, shape in layer_param_shapes(cfg).items():
    key_t, hf_shape = layout[name]
    for i in range(cfg.num_layers):
      _check_shape(reader, key_t.format(i=i), hf_shape or shape[1:], where)
  V, D = cfg.vocab_size, cfg.hidden_size
  _check_shape(reader, prefix + "embed_tokens.weight", (V, D), where)
  _check_shape(reader, prefix + "norm.weight", (D,), where)
  if not cfg.tie_word_embeddings:
    _check_shape(reader, "lm_head.weight", (V, D), where)


def text_host_loader(
  names: list[str],
  cfg: QwenConfig,
  reader: _TensorReader,
  prefix: str = "model.",
) -> Callable:
  """index -> host array of the text parameter at path `names` (e.g.
  ["layers", "wq"]), read from the HF tensors under `prefix`."""
  layout = _hf_layout(cfg, prefix)
  stacked = layer_param_shapes(cfg)

  def plain(key, transpose=False):
    def host(index):
      x = reader.get(key)
      return (x.T if transpose else x)[tuple(index)]

    return host

  if names[0] == "layers":
    name = names[1]
    key_t, _ = layout[name]
    per_layer = stacked[name][1:]

    def host(index):
      ids = range(cfg.num_layers)[index[0]]
      parts = [
        _from_hf(name, reader.get(key_t.format(i=i)), per_layer) for i in ids
      ]
      return np.stack(parts)[(slice(None),) + tuple(index[1:])]

    return host
  if names[0] == "embed":
    return plain(prefix + "embed_tokens.weight")
  if names[0] == "final_norm":
    return plain(prefix + "norm.weight")
  if names[0] == "lm_head":
    return plain("lm_head.weight", transpose=True)
  raise CheckpointError(f"no HF mapping for parameter {'/'.join(names)}")


def materialise(
  abstract: nnx.Module,
  host_loader: Callable[[list[str]], Callable],
  param_dtype,
  sharding_fn: Callable | None = None,
) -> nnx.Module:
  """The module `abstract` (from nnx.eval_shape) with every parameter read
  by host_loader(path names)(index) straight into its target sharding
  (sharding_fn(logical axes, shape); default the first local device)."""
  graphdef, state = nnx.split(abstract)
  default_sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  target_dtype = np.dtype(param_dtype)

  def fill(path, var):
    host_fn = host_loader([str(p) for p in path])
    shape = var.get_value().shape
    sharding = (
      sharding_fn(var.logical_axes, shape) if sharding_fn else default_sharding
    )
    value = jax.make_array_from_callback(
      shape,
      sharding,
      lambda index: np.asarray(host_fn(index)).astype(target_dtype),
    )
    return var.replace(value)

  return nnx.merge(graphdef, nnx.map_state(fill, state))


def load_qwen(
  model_dir: str,
  *,
  dtype=jnp.float32,
  param_dtype=jnp.float32,
  remat: str = "none",
  attention: str = "auto",
  sharding_fn: Callable[
    [tuple[str, ...], tuple[int, ...]], jax.sharding.Sharding
  ]
  | None = None,
) -> Qwen:
  """Loads a HF Qwen2/Qwen3/Llama checkpoint directory into a `Qwen` module.

  sharding_fn maps a parameter's (logical axes, shape) to its target sharding
  (see `rla_jax.sharding.param_sharding_fn`); default: the first local device.
  All tensor names and shapes are checked before any weight is loaded.
  """
  cfg = QwenConfig.from_json_file(os.path.join(model_dir, "config.json"))
  reader = _TensorReader(model_dir)
  check_text_tensors(reader, cfg)
  abstract = nnx.eval_shape(
    lambda: Qwen(
      cfg,
      rngs=nnx.Rngs(0),
      dtype=dtype,
      param_dtype=param_dtype,
      remat=remat,
      attention=attention,
    )
  )
  return materialise(
    abstract,
    lambda names: text_host_loader(names, cfg, reader),
    param_dtype,
    sharding_fn,
  )


def text_tensors(model: Qwen, prefix: str = "model.") -> dict[str, np.ndarray]:
  """The text decoder's HF tensors (float32 numpy, torch layout) under
  `prefix`, pulled to the host one parameter at a time."""
  cfg = model.cfg
  layout = _hf_layout(cfg, prefix)

  def host(a):
    return np.asarray(jax.device_get(a), dtype=np.float32)

  tensors = {
    prefix + "embed_tokens.weight": host(model.embed[...]),
    prefix + "norm.weight": host(model.final_norm[...]),
  }
  if not cfg.tie_word_embeddings:
    tensors["lm_head.weight"] = np.ascontiguousarray(host(model.lm_head[...]).T)
  for name, var in model.layers.items():
    key_t, _ = layout[name]
    stacked = host(var[...])
    for i in range(cfg.num_layers):
      tensors[key_t.format(i=i)] = _to_hf(name, stacked[i])
  return tensors


def save_qwen(
  model: Qwen, out_dir: str, *, dtype: str = "float32", tokenizer=None
) -> None:
  """Exports `model` as a HF checkpoint directory (config + safetensors).

  Parameters are pulled to the host one at a time. `dtype` is the stored
  tensor dtype ("float32" or "bfloat16").
  """
  cfg = model.cfg
  os.makedirs(out_dir, exist_ok=True)
  np_dtype = {"float32": np.float32, "bfloat16": jnp.bfloat16}[dtype]
  tensors = text_tensors(model)
  tensors = {
    k: np.ascontiguousarray(v.astype(np_dtype)) for k, v in tensors.items()
  }
  save_file(
    tensors, os.path.join(out_dir, SINGLE_FILE), metadata={"format": "pt"}
  )
  with open(os.path.join(out_dir, "config.json"), "w") as f:
    json.dump(cfg.to_hf_dict(dtype=dtype), f, indent=2, sort_keys=True)
  gen = {"bos_token_id": cfg.bos_token_id, "eos_token_id": cfg.eos_token_id}
  with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
    json.dump({k: v for k, v in gen.items() if v is not None}, f, indent=2)
  if tokenizer is not None:
    tokenizer.save_pretrained(out_dir)


# Family-neutral names: the same functions serve every supported model_type.
load_model = load_qwen
save_model = save_qwen

__all__ = [
  "load_qwen",
  "save_qwen",
  "load_model",
  "save_model",
  "CheckpointError",
  "ConfigError",
]
