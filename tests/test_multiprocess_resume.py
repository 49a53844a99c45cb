"""Exact resume of a two-process (jax.distributed) run after SIGKILL.

Two worker processes (tests/multiprocess_resume_worker.py) run three RL
steps of the coding loop with a coordinator on 127.0.0.1 and gloo CPU
collectives, one CPU device each (FSDP-sharded learners across the
processes, cooperative Orbax checkpoints after every step); step 1 accepts
an adapted task and trains the policy on it. The same pair is then started
on a fresh workdir, both processes are SIGKILLed once the checkpoint of
step 1 exists, and restarted (with a new coordinator): they must resume
from that checkpoint and end with the uninterrupted run's metrics and
parameters, bit for bit.

The coding loop (not ALFWorld's) because its smoke run trains: with the
oracle its policy learns at step 1, so the checkpoint holds moved,
sharded parameters and optimizer state and an accepted task, whereas the
tiny random-init ALFWorld models of tests/test_multiprocess.py produce no
training sample in a few steps (all rollouts fail, all judgements are
unparseable: every advantage is 0).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from multiprocess_resume_worker import KILL_AFTER_STEP, TOTAL_STEPS
from test_multiprocess import _free_port, _wait_all

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKER = os.path.join(_REPO, "tests", "multiprocess_resume_worker.py")
_TIMEOUT_S = 300  # per run; every worker is killed past this (no CI hang)


def _build_models(root) -> str:
  """The smoke coding models, built once (the workers must not race to
  build them into one cache); returns the JSON file naming their dirs."""
  from configs import coding
  from rla_jax.warmstart.coding import embedded_coding_models

  c = coding.get_config("smoke")
  c.embedded.cache_dir = str(root / "models")
  path = str(root / "model_dirs.json")
  with open(path, "w") as f:
    json.dump(embedded_coding_models(c, log=lambda msg: None), f)
  return path


def _start_pair(models, workdir, name, root, xla_cache):
  """Both processes of one two-process run; (procs, log paths, outputs)."""
  base = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith("JAX_") and k != "XLA_FLAGS"
  }
  address = f"127.0.0.1:{_free_port()}"
  procs, logs, outs = [], [], []
  for pid in range(2):
    env = {
      **base,
      "PYTHONPATH": _REPO,
      "JAX_PLATFORMS": "cpu",
      "JAX_COORDINATOR_ADDRESS": address,
      "JAX_NUM_PROCESSES": "2",
      "JAX_PROCESS_ID": str(pid),
      "RLA_JAX_XLA_CACHE": xla_cache,
    }
    outs.append(str(root / f"{name}_p{pid}.npz"))
    logs.append(str(root / f"{name}_p{pid}.log"))
    with open(logs[-1], "w") as log:
      procs.append(
        subprocess.Popen(
          [sys.executable, _WORKER, models, workdir, outs[-1]],
          env=env,
          stdout=log,
          stderr=subprocess.STDOUT,
        )
      )
  return procs, logs, outs


def _tails(procs, logs):
  out = []
  for p, path in zip(procs, logs, strict=True):
    with open(path, errors="replace") as f:
      out.append(f"--- {path} (rc {p.returncode}) ---\n" + f.read()[-4000:])
  return "\n".join(out)


def _assert_same(got, want, what):
  assert sorted(got) == sorted(want), what
  assert json.loads(str(got["loop_history"])) == json.loads(
    str(want["loop_history"])
  ), f"{what}: metrics history"
  for key in want:
    if key != "loop_history":
      np.testing.assert_array_equal(
        got[key], want[key], err_msg=f"{what}: {key}"
      )


@pytest.mark.slow
def test_two_process_run_resumes_exactly_after_sigkill(tmp_path):
  models = _build_models(tmp_path)
  xla_cache = str(tmp_path / "xla")

  # 1. the uninterrupted two-process run
  full = str(tmp_path / "work_full")
  procs, logs, outs = _start_pair(models, full, "full", tmp_path, xla_cache)
  _wait_all(procs, logs, time.monotonic() + _TIMEOUT_S)
  reference = [dict(np.load(o)) for o in outs]
  assert [int(r["process_count"]) for r in reference] == [2, 2]
  _assert_same(reference[1], reference[0], "process 1 vs process 0")
  history = json.loads(str(reference[0]["loop_history"]))
  assert [r["step"] for r in history] == list(range(1, TOTAL_STEPS + 1))
  # Row step = s + 1 holds RL step s: by the kill point an adapted task has
  # been accepted and the policy has trained (moved parameters to restore).
  at_kill = history[KILL_AFTER_STEP]
  assert at_kill["step"] == KILL_AFTER_STEP + 1
  assert at_kill["env/accepted_total"] >= 1
  assert at_kill["policy/updates"] >= 1

  # 2. the same run, both processes SIGKILLed after that checkpoint
  killed = str(tmp_path / "work_killed")
  procs, logs, _ = _start_pair(models, killed, "killed", tmp_path, xla_cache)
  kill_ckpt = os.path.join(killed, "checkpoints", str(KILL_AFTER_STEP))
  deadline = time.monotonic() + _TIMEOUT_S
  try:
    while not os.path.isdir(kill_ckpt):
      if any(p.poll() is not None for p in procs):
        pytest.fail("a worker ended before the kill:\n" + _tails(procs, logs))
      if time.monotonic() > deadline:
        pytest.fail("no checkpoint written in time:\n" + _tails(procs, logs))
      time.sleep(0.05)
  finally:
    for p in procs:
      if p.poll() is None:
        p.send_signal(signal.SIGKILL)
    for p in procs:
      p.wait(timeout=60)
  assert [p.returncode for p in procs] == [-signal.SIGKILL] * 2, _tails(
    procs, logs
  )
  last_ckpt = os.path.join(killed, "checkpoints", str(TOTAL_STEPS - 1))
  assert not os.path.isdir(last_ckpt), "killed after the last checkpoint"

  # 3. both processes restarted on the killed run's workdir
  procs, logs, outs = _start_pair(
    models, killed, "resumed", tmp_path, xla_cache
  )
  _wait_all(procs, logs, time.monotonic() + _TIMEOUT_S)
  for path in logs:
    with open(path, errors="replace") as f:
      log = f.read()
    assert f"resumed from checkpoint step {KILL_AFTER_STEP}" in log, path
  for pid, out in enumerate(outs):
    _assert_same(dict(np.load(out)), reference[pid], f"resumed process {pid}")
