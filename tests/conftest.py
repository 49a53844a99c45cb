"""Shared test fixtures: tiny random Hugging Face Qwen checkpoints, and the
smoke preset's ALFWorld warm start.

Checkpoints are built with transformers (torch, CPU) in a temp dir once
per session and loaded by rla_jax in the tests; the warm start is built
once per session by `launch/build_warmstart.py`.
"""

from __future__ import annotations

import dataclasses
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest

from rla_jax.models import QwenConfig

# The tiny random Qwen3 config the sampler and attention tests share.
TINY_QWEN3 = QwenConfig(
  "qwen3",
  vocab_size=211,
  hidden_size=64,
  intermediate_size=128,
  num_layers=2,
  num_heads=4,
  num_kv_heads=2,
  head_dim=16,
)


def tiny_qwen3_config(vocab_size: int) -> QwenConfig:
  """A 2-layer Qwen3 of hidden 32 (4/2 heads of 8) for in-process tests."""
  return QwenConfig(
    "qwen3",
    vocab_size=vocab_size,
    hidden_size=32,
    intermediate_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
  )


def build_hf_checkpoint(
  path: str,
  model_type: str,
  *,
  tie: bool,
  num_heads: int = 6,
  num_kv_heads: int = 2,
  vocab: int = 300,
  hidden: int = 48,
  layers: int = 2,
  seed: int = 0,
  max_shard_size: str | None = None,
  v4_config: bool = False,
) -> str:
  """Saves a random HF Qwen2/Qwen3 model with non-trivial norms/biases."""
  import json

  import torch
  import transformers

  common = dict(
    vocab_size=vocab,
    hidden_size=hidden,
    intermediate_size=96,
    num_hidden_layers=layers,
    num_attention_heads=num_heads,
    num_key_value_heads=num_kv_heads,
    max_position_embeddings=512,
    tie_word_embeddings=tie,
    rope_theta=10000.0,
  )
  if model_type == "qwen2":
    cfg = transformers.Qwen2Config(**common)
  else:
    cfg = transformers.Qwen3Config(**common, head_dim=hidden // num_heads)
  torch.manual_seed(seed)
  model = transformers.AutoModelForCausalLM.from_config(cfg).float().eval()
  with torch.no_grad():  # perturb ones/zeros inits so norms and biases matter
    for p in model.parameters():
      p.add_(torch.randn_like(p) * 0.05)
  kw = {"max_shard_size": max_shard_size} if max_shard_size else {}
  model.save_pretrained(path, **kw)
  if v4_config:
    cpath = os.path.join(path, "config.json")
    with open(cpath) as f:
      d = json.load(f)
    rope = d.pop("rope_parameters")
    d["rope_theta"] = rope["rope_theta"]
    d["rope_scaling"] = None
    d["torch_dtype"] = d.pop("dtype", "float32")
    with open(cpath, "w") as f:
      json.dump(d, f)
  return path


def hf_logits(path: str, tokens, mask):
  """transformers' logits for a left-padded batch (explicit positions)."""
  import numpy as np
  import torch
  import transformers

  model = transformers.AutoModelForCausalLM.from_pretrained(
    path, dtype=torch.float32
  ).eval()
  pos = np.maximum(np.cumsum(mask, 1) - 1, 0)
  with torch.no_grad():
    out = model(
      input_ids=torch.tensor(tokens),
      attention_mask=torch.tensor(mask),
      position_ids=torch.tensor(pos),
    )
  return out.logits.numpy()


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory):
  return build_hf_checkpoint(
    str(tmp_path_factory.mktemp("qwen3")), "qwen3", tie=True
  )


@dataclasses.dataclass(frozen=True)
class WarmStartBuild:
  """A warm start built by `launch/build_warmstart.py` for a test session:
  its directory, the command's argv and its stderr."""

  dir: str
  argv: list[str]
  stderr: str


@pytest.fixture(scope="session")
def smoke_warm_start(tmp_path_factory) -> WarmStartBuild:
  """The smoke preset's warm start, built once per session by the build
  command (the loop only loads one): tests pass its `dir` as
  config.warmstart.dir / --config.warmstart.dir."""
  import subprocess
  import sys

  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = str(tmp_path_factory.mktemp("warmstart") / "alfworld-smoke")
  argv = [
    "launch/build_warmstart.py",
    "--config=alfworld:smoke",
    f"--out={out}",
  ]
  proc = subprocess.run(
    [sys.executable, *argv],
    capture_output=True,
    text=True,
    timeout=1200,
    cwd=root,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return WarmStartBuild(out, argv, proc.stderr)
