"""Qwen2/Qwen3 parity with transformers, cache decoding, checkpoint I/O."""

import json
import os

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_hf_checkpoint, hf_logits

from rla_jax.models import (
  CheckpointError,
  ConfigError,
  QwenConfig,
  init_cache,
  load_qwen,
  save_qwen,
)


def _batch(vocab, seed=0):
  rng = np.random.RandomState(seed)
  tokens = rng.randint(0, vocab, (3, 9))
  mask = np.ones((3, 9), np.int64)
  mask[1, :4] = 0  # left padding
  mask[2, :1] = 0
  return tokens, mask


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3"])
@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (6, 2)])
def test_logits_match_transformers(tmp_path, model_type, tie, heads, kv_heads):
  path = build_hf_checkpoint(
    str(tmp_path), model_type, tie=tie, num_heads=heads, num_kv_heads=kv_heads
  )
  tokens, mask = _batch(300)
  ref = hf_logits(path, tokens, mask)
  model = load_qwen(path)
  assert model.cfg.num_groups == heads // kv_heads
  ours, _ = model(jnp.asarray(tokens), jnp.asarray(mask))
  real = mask.astype(bool)
  assert np.abs(np.asarray(ours)[real] - ref[real]).max() <= 1e-4


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3"])
def test_export_round_trip_through_transformers(tmp_path, model_type):
  src = build_hf_checkpoint(str(tmp_path / "src"), model_type, tie=False)
  model = load_qwen(src)
  out = str(tmp_path / "out")
  save_qwen(model, out)
  tokens, mask = _batch(300, seed=1)
  ref = hf_logits(src, tokens, mask)
  again = hf_logits(out, tokens, mask)  # transformers loads our export
  real = mask.astype(bool)
  assert np.abs(again[real] - ref[real]).max() <= 1e-5
  reloaded = load_qwen(out)
  ours, _ = reloaded(jnp.asarray(tokens), jnp.asarray(mask))
  assert np.abs(np.asarray(ours)[real] - ref[real]).max() <= 1e-4


def test_cache_decoding_matches_full_forward(tiny_qwen3_dir):
  model = load_qwen(tiny_qwen3_dir)
  tokens, mask = _batch(300, seed=2)
  full, _ = model(jnp.asarray(tokens), jnp.asarray(mask))
  # token by token
  cache = init_cache(model.cfg, 3, 16)
  steps = []
  for t in range(tokens.shape[1]):
    logits, cache = model(
      jnp.asarray(tokens[:, t : t + 1]),
      jnp.asarray(mask[:, t : t + 1]),
      cache=cache,
    )
    steps.append(np.asarray(logits[:, 0]))
  stepwise = np.stack(steps, 1)
  real = mask.astype(bool)
  assert np.abs(stepwise[real] - np.asarray(full)[real]).max() <= 1e-4
  # a multi-token chunk appended to a cache (prefill then continuation)
  cache = init_cache(model.cfg, 3, 16)
  a, cache = model(
    jnp.asarray(tokens[:, :5]), jnp.asarray(mask[:, :5]), cache=cache
  )
  b, cache = model(
    jnp.asarray(tokens[:, 5:]), jnp.asarray(mask[:, 5:]), cache=cache
  )
  chunked = np.concatenate([np.asarray(a), np.asarray(b)], 1)
  assert np.abs(chunked[real] - np.asarray(full)[real]).max() <= 1e-4
  assert int(cache.end) == 9
  assert np.asarray(cache.next_pos).tolist() == mask.sum(1).tolist()


def test_sharded_safetensors_and_v4_config(tmp_path):
  path = build_hf_checkpoint(
    str(tmp_path), "qwen2", tie=False, max_shard_size="40KB", v4_config=True
  )
  assert os.path.exists(os.path.join(path, "model.safetensors.index.json"))
  with open(os.path.join(path, "config.json")) as f:
    assert "rope_theta" in json.load(f)
  tokens, mask = _batch(300, seed=3)
  ref = hf_logits(path, tokens, mask)
  ours, _ = load_qwen(path)(jnp.asarray(tokens), jnp.asarray(mask))
  real = mask.astype(bool)
  assert np.abs(np.asarray(ours)[real] - ref[real]).max() <= 1e-4


def test_bfloat16_params_load(tiny_qwen3_dir):
  model = load_qwen(
    tiny_qwen3_dir, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16
  )
  assert model.embed[...].dtype == jnp.bfloat16
  tokens, mask = _batch(300)
  logits, _ = model(jnp.asarray(tokens), jnp.asarray(mask))
  assert logits.dtype == jnp.float32 and np.isfinite(np.asarray(logits)).all()


# ------------------------------------------------------------ bad input
def _edit_config(path, fn):
  cpath = os.path.join(path, "config.json")
  with open(cpath) as f:
    d = json.load(f)
  fn(d)
  with open(cpath, "w") as f:
    json.dump(d, f)


def test_missing_config_names_file(tmp_path):
  with pytest.raises(ConfigError, match="config.json: config file not found"):
    load_qwen(str(tmp_path))


def test_malformed_config(tmp_path):
  path = build_hf_checkpoint(str(tmp_path), "qwen3", tie=True)
  with open(os.path.join(path, "config.json"), "w") as f:
    f.write("{not json")
  with pytest.raises(ConfigError, match="config.json: malformed JSON"):
    load_qwen(path)


def test_unsupported_model_type_and_missing_key(tmp_path):
  path = build_hf_checkpoint(str(tmp_path), "qwen3", tie=True)
  _edit_config(path, lambda d: d.update(model_type="gpt2"))
  with pytest.raises(ConfigError, match="unsupported model_type 'gpt2'"):
    load_qwen(path)
  _edit_config(
    path, lambda d: (d.update(model_type="qwen3"), d.pop("hidden_size"))
  )
  with pytest.raises(ConfigError, match="missing required key 'hidden_size'"):
    load_qwen(path)


def test_missing_and_misshaped_tensors(tmp_path):
  from safetensors.numpy import load_file, save_file

  path = build_hf_checkpoint(str(tmp_path), "qwen3", tie=False)
  st = os.path.join(path, "model.safetensors")
  tensors = load_file(st)
  key = "model.layers.1.self_attn.k_norm.weight"
  save_file({k: v for k, v in tensors.items() if k != key}, st)
  with pytest.raises(CheckpointError, match=f"missing tensor '{key}'"):
    load_qwen(path)
  tensors["model.layers.0.mlp.up_proj.weight"] = np.zeros((5, 5), np.float32)
  save_file(tensors, st)
  with pytest.raises(
    CheckpointError,
    match=r"'model.layers.0.mlp.up_proj.weight' has shape "
    r"\(5, 5\), expected \(96, 48\)",
  ):
    load_qwen(path)


def test_config_rejects_bad_head_ratio():
  with pytest.raises(ConfigError, match="multiple of num_kv_heads"):
    QwenConfig("qwen3", 10, 8, 8, 1, 3, 2, 4)
