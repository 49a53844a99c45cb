"""The coding warm start is built by `launch/build_warmstart.py
--config=coding` and only loaded by the loop: a tiny build through the
command stops each SFT stage at its probe target, writes the marker the
loop checks (config hash, settings, curves, metrics, provenance) and
models the coding loop then loads without building."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from flax import nnx

from rla_jax.models import load_qwen
from rla_jax.rl.loops import make_loop
from rla_jax.warmstart import coding_settings
from rla_jax.warmstart.directory import MARKER

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Tiny settings: 1-layer models, 6 SFT steps probed every 2. The coder's
# target is 0 (its first probe stops it), the tester's is above 1 (never
# met: it runs every step).
_TINY = {
  "train_tasks": 40,
  "vocab_size": 400,
  "model.hidden_size": 32,
  "model.intermediate_size": 64,
  "model.num_layers": 1,
  "model.num_heads": 2,
  "model.num_kv_heads": 1,
  "model.head_dim": 16,
  "coder_sft.steps": 6,
  "coder_sft.batch_size": 4,
  "coder_sft.eval_every": 2,
  "coder_sft.target": 0.0,
  "tester_sft.steps": 6,
  "tester_sft.batch_size": 4,
  "tester_sft.eval_every": 2,
  "tester_sft.target": 1.5,
  "sampling.max_new_tokens": 12,
  "sampling.batch_size": 4,
  "probe.tasks": 2,
  "probe.samples": 2,
  "eval.tasks": 3,
  "eval.samples": 2,
}


def _tiny_config(warm_dir: str):
  from configs import coding

  c = coding.get_config()
  c.warmstart.dir = warm_dir
  for key, value in _TINY.items():
    node = c.warmstart.settings
    *path, last = key.split(".")
    for part in path:
      node = node[part]
    node[last] = value
  return c


@pytest.mark.slow
def test_a_tiny_build_stops_at_its_probes_and_the_loop_loads_it(tmp_path):
  out = str(tmp_path / "coding-tiny")
  argv = [
    "launch/build_warmstart.py",
    "--config=coding",
    f"--out={out}",
    f"--work_dir={tmp_path / 'work'}",
    *(f"--config.warmstart.settings.{k}={v}" for k, v in _TINY.items()),
  ]
  proc = subprocess.run(
    [sys.executable, *argv],
    capture_output=True,
    text=True,
    timeout=900,
    cwd=ROOT,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(os.path.join(out, MARKER)) as f:
    marker = json.load(f)

  settings = coding_settings.warmstart_settings(_tiny_config(out))
  assert marker["config"] == json.loads(json.dumps(settings))
  assert marker["config_hash"] == coding_settings.coding_config_hash(settings)
  assert marker["provenance"]["command"] == " ".join(["python", *argv])

  report = marker["report"]
  coder, tester = (report["curves"][s] for s in ("coder_sft", "tester_sft"))
  assert coder["steps_run"] == 2, "target 0: the first probe stops it"
  assert [p["step"] for p in coder["probes"]] == [2]
  assert tester["steps_run"] == 6, "target 1.5: never met"
  assert [p["step"] for p in tester["probes"]] == [2, 4, 6]
  for p in tester["probes"]:
    assert 0.0 <= p["ut_accuracy"] <= p["valid_test_rate"] <= 1.0
  assert report["coder"]["runs"] == 3 * 2
  assert report["coder_greedy"]["runs"] == 3
  assert report["tester"]["runs"] == 3 * 2
  assert report["eval_tasks"] == 3
  # hidden 32, 1 layer: embeddings (tied) + attention + MLP + norms
  assert 400 * 32 < report["num_params"] < 400 * 32 + 20_000

  lines = []
  loop = make_loop(_tiny_config(out), str(tmp_path / "run"), log=lines.append)
  assert loop.warm_start is not None
  assert any(s.startswith(f"warm start: loaded {out} (config ") for s in lines)
  # The tester is the coder SFT'd further: the saved models differ.
  p_leaves, r_leaves = (
    [np.asarray(x) for x in jax.tree.leaves(nnx.state(load_qwen(d)))]
    for d in (os.path.join(out, "policy"), os.path.join(out, "reward"))
  )
  pairs = list(zip(p_leaves, r_leaves, strict=True))
  assert any(not np.array_equal(a, b) for a, b in pairs)
