"""Llama-family (LlamaForCausalLM) parity with transformers: logits, greedy
tokens through the Sampler, export round trip, llama3 RoPE scaling."""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import hf_logits

from rla_jax.models import load_model, save_model
from rla_jax.models.ops import rope_inv_freq
from rla_jax.sampling.sampler import Sampler

# Wavelengths of head_dim 8, theta 1e4 are ~6, 63, 628, 6283 positions: with
# an original context of 64 (low/high factors 1, 4 -> 64 and 16) the llama3
# rule keeps the first, smooths the second and divides the last two.
LLAMA3_ROPE = {
  "rope_type": "llama3",
  "rope_theta": 10000.0,
  "factor": 8.0,
  "low_freq_factor": 1.0,
  "high_freq_factor": 4.0,
  "original_max_position_embeddings": 64,
}
VARIANTS = {
  "untied": dict(tie=False),
  "tied": dict(tie=True),
  "attention_bias": dict(tie=False, attention_bias=True),
  "mlp_bias_tied": dict(tie=True, mlp_bias=True),
  "llama3_rope": dict(tie=False, rope=LLAMA3_ROPE),
}


def build_llama(path, *, tie, attention_bias=False, mlp_bias=False, rope=None):
  """Saves a random tiny HF LlamaForCausalLM (6 heads, 2 kv heads, head_dim
  8) with perturbed norms/biases; returns (path, the torch model)."""
  import torch
  import transformers

  cfg = transformers.LlamaConfig(
    vocab_size=300,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=tie,
    attention_bias=attention_bias,
    mlp_bias=mlp_bias,
    rope_parameters=rope or {"rope_type": "default", "rope_theta": 10000.0},
  )
  torch.manual_seed(0)
  model = transformers.LlamaForCausalLM(cfg).float().eval()
  with torch.no_grad():
    for p in model.parameters():
      p.add_(torch.randn_like(p) * 0.05)
  model.save_pretrained(path)
  return path, model


def _batch(seed=0):
  rng = np.random.RandomState(seed)
  tokens = rng.randint(0, 300, (3, 9))
  mask = np.ones((3, 9), np.int64)
  mask[1, :4] = 0  # left padding
  mask[2, :1] = 0
  return tokens, mask


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_llama_logits_match_transformers(tmp_path, variant):
  path, _ = build_llama(str(tmp_path), **VARIANTS[variant])
  tokens, mask = _batch()
  ref = hf_logits(path, tokens, mask)
  model = load_model(path)
  assert model.cfg.model_type == "llama"
  assert model.cfg.attention_bias == VARIANTS[variant].get("attention_bias", 0)
  ours, _ = model(jnp.asarray(tokens), jnp.asarray(mask))
  real = mask.astype(bool)
  assert np.abs(np.asarray(ours)[real] - ref[real]).max() <= 1e-4


def test_llama3_rope_frequencies_equal_transformers(tmp_path):
  path, hf = build_llama(str(tmp_path), tie=False, rope=LLAMA3_ROPE)
  cfg = load_model(path).cfg
  ref = hf.model.rotary_emb.inv_freq.numpy()
  plain = rope_inv_freq(cfg.replace(rope_scaling=None))
  assert not np.allclose(ref, plain)  # the scaling changes these frequencies
  np.testing.assert_allclose(rope_inv_freq(cfg), ref, rtol=1e-6)


@pytest.mark.parametrize("variant", ["tied", "llama3_rope"])
def test_llama_greedy_tokens_equal_transformers(tmp_path, variant):
  import torch

  path, hf = build_llama(str(tmp_path), **VARIANTS[variant])
  prompts = [[5, 17, 42], [7, 99, 3, 250, 11, 64, 8]]
  sampler = Sampler(
    load_model(path), max_prompt_len=16, max_new_tokens=12, pad_id=0
  )
  ours = sampler.generate(prompts, greedy=True).tokens
  for prompt, toks in zip(prompts, ours, strict=True):
    out = hf.generate(
      torch.tensor([prompt]),
      attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
      max_new_tokens=12,
      min_new_tokens=12,
      do_sample=False,
    )
    assert toks == out[0, len(prompt) :].tolist()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_llama_export_loads_in_transformers(tmp_path, variant):
  import transformers

  src, _ = build_llama(str(tmp_path / "src"), **VARIANTS[variant])
  out = str(tmp_path / "out")
  save_model(load_model(src), out)
  assert transformers.AutoConfig.from_pretrained(out).architectures == [
    "LlamaForCausalLM"
  ]
  tokens, mask = _batch(seed=1)
  real = mask.astype(bool)
  ref = hf_logits(src, tokens, mask)
  again = hf_logits(out, tokens, mask)  # transformers loads our export
  assert np.abs(again[real] - ref[real]).max() <= 1e-5
  assert load_model(out).cfg == load_model(src).cfg


def test_llama3_rope_reads_from_v4_and_v5_keys_and_rejects_others():
  from rla_jax.models import ConfigError, QwenConfig

  base = dict(
    model_type="llama",
    vocab_size=300,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=6,
  )
  v5 = QwenConfig.from_hf_dict({**base, "rope_parameters": LLAMA3_ROPE})
  scaling = {k: v for k, v in LLAMA3_ROPE.items() if k != "rope_theta"}
  v4 = QwenConfig.from_hf_dict(
    {**base, "rope_theta": 10000.0, "rope_scaling": scaling}
  )
  assert v4 == v5 and v5.rope_scaling.factor == 8.0
  assert v5.head_dim == 8 and not v5.qkv_bias and not v5.qk_norm
  assert QwenConfig.from_hf_dict(v5.to_hf_dict()) == v5
  yarn = {**LLAMA3_ROPE, "rope_type": "yarn"}
  with pytest.raises(ConfigError, match="c.json: rope type 'yarn' is not"):
    QwenConfig.from_hf_dict({**base, "rope_parameters": yarn}, "c.json")
