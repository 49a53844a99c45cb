"""Shared test fixtures: tiny random Hugging Face Qwen checkpoints, the
smoke preset's ALFWorld warm start, and one persistent XLA compilation
cache and one cache of embedded coding and GUI models for the whole
session.

Checkpoints are built with transformers (torch, CPU) in a temp dir once
per session and loaded by rla_jax in the tests; the warm start is built
once per session by `launch/build_warmstart.py`, by whichever xdist worker
asks first.

Most of the suite's time is XLA compiling tiny models' programs, and the
loop tests' subprocesses compile the same smoke-preset programs again and
again. `pytest_configure` gives every process of the session (the pytest
workers and the launchers they start) one fresh cache directory through
RLA_JAX_XLA_CACHE, removed when the session ends: a program one process
compiled is loaded, not compiled again, by the processes after it, and
nothing is read from or left in the user's own cache. The embedded models
(RLA_JAX_CACHE) are shared the same way: the GUI smoke models took ~45 s
to build, once per test that used them.
`CompileCounter` counts a program loaded from that cache as a compile
(tests/test_compilation_cache.py), so no-recompile checks keep their teeth.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import psutil
import pytest
from filelock import FileLock

from rla_jax.envs.gui.chromium import ChromiumNotFoundError, find_browser
from rla_jax.models import QwenConfig

# The session's cache directory (the XLA cache and the embedded models),
# where this process created it (the pytest controller, or a run without
# xdist); xdist workers and launcher subprocesses inherit its paths.
_OWNED_CACHES: str | None = None


def pytest_configure(config):
  global _OWNED_CACHES
  del config
  if "PYTEST_XDIST_WORKER" not in os.environ:
    _OWNED_CACHES = tempfile.mkdtemp(prefix="rla_jax-tests-")
    os.environ["RLA_JAX_XLA_CACHE"] = os.path.join(_OWNED_CACHES, "xla")
    # Unbounded: with a bound, JAX's LRU cache scans every entry on every
    # write (43 ms over 908 entries here), quadratic over a session's
    # thousands of programs; the directory goes when the session ends.
    os.environ["RLA_JAX_XLA_CACHE_MAX_MB"] = "-1"
    # The embedded coding and GUI models (rla_jax.warmstart.coding.
    # EmbeddedCache): built once per settings hash in the session, however
    # many tests and launcher subprocesses ask (builds are file-locked).
    os.environ["RLA_JAX_CACHE"] = os.path.join(_OWNED_CACHES, "models")
  from launch.cli import enable_compilation_cache

  enable_compilation_cache()


def pytest_unconfigure(config):
  del config
  if _OWNED_CACHES is not None:
    shutil.rmtree(_OWNED_CACHES, ignore_errors=True)


def session_shared_dir(tmp_path_factory) -> str:
  """A directory every xdist worker of this session sees (the per-worker
  base temp's parent; the base temp itself without xdist)."""
  base = tmp_path_factory.getbasetemp()
  return str(base.parent if "PYTEST_XDIST_WORKER" in os.environ else base)


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


def _browser_missing_reason() -> str | None:
  """Why headless Chromium cannot start here (None if it can); browser
  tests skip with it (`.ci/run` installs chromium and chromium-driver)."""
  try:
    find_browser()
  except ChromiumNotFoundError as error:
    return str(error)
  return None


needs_browser = pytest.mark.skipif(
  _browser_missing_reason() is not None,
  reason=f"no headless Chromium: {_browser_missing_reason()}",
)


def still_running(procs: list, timeout_s: float) -> list:
  """The psutil processes of procs still running after up to timeout_s (a
  zombie whose new parent does not reap it counts as ended)."""

  def running(p) -> bool:
    with contextlib.suppress(psutil.NoSuchProcess):
      return p.status() != psutil.STATUS_ZOMBIE
    return False

  deadline = time.monotonic() + timeout_s
  while any(running(p) for p in procs) and time.monotonic() < deadline:
    time.sleep(0.1)
  return [p for p in procs if running(p)]


def kill_processes(procs: list) -> None:
  """SIGKILLs the psutil processes of procs that still exist (whatever a
  test left, nothing outlives it)."""
  for p in procs:
    with contextlib.suppress(psutil.NoSuchProcess):
      p.kill()


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
  config.warmstart.dir / --config.warmstart.dir. The first xdist worker to
  ask builds it under a file lock; the others wait and load it (tests only
  read it)."""
  import subprocess
  import sys

  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  shared = session_shared_dir(tmp_path_factory)
  out = os.path.join(shared, "warmstart", "alfworld-smoke")
  argv = [
    "launch/build_warmstart.py",
    "--config=alfworld:smoke",
    f"--out={out}",
  ]
  log = os.path.join(shared, "warmstart", "alfworld-smoke.stderr")
  os.makedirs(os.path.dirname(out), exist_ok=True)
  with FileLock(log + ".lock"):
    if not os.path.exists(log):
      proc = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=root,
      )
      assert proc.returncode == 0, proc.stderr[-3000:]
      with open(log, "w") as f:
        f.write(proc.stderr)
  with open(log) as f:
    return WarmStartBuild(out, argv, f.read())


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
  """On an xdist worker: JAX's caches freed before the worker reports it
  has finished (xdist sends that after every sessionfinish impl). The
  controller then tells the worker to exit, and execnet sends a worker
  whose session is still running 5 s later a SIGINT
  (execnet.gateway_base._terminate_execution). Two of session 29's four
  full runs printed such an interrupt, ignored in JAX's GC callback during
  the worker's end-of-session garbage collection, after the last test:
  that collection now runs before the report."""
  del session, exitstatus
  if "PYTEST_XDIST_WORKER" in os.environ:
    import gc

    import jax

    # (0.8-1.9 s after 25 tests a worker; a whole suite's worker holds
    # hundreds of tests' programs)
    jax.clear_caches()
    gc.collect()
