"""Exact resume after SIGKILL of a run whose task pool holds an accepted
adapted task (the coding loop through the launcher).

The run (tests/coding_oracle_run.py: the launcher plus an oracle that
makes half of the programs of every derived task pass) proposes an easier
variant of its level-2 task at RL step 0, accepts it at step 1 (candidate
accuracy 1/2 under the default bands) and trains on it, checkpoints, and
is SIGKILLed after that checkpoint. The resumed run must continue on the
accepted task: its metrics and final task pool (accepted totals, slot
histories, registry) equal an uninterrupted run's.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rla_jax.metrics.keys import is_wall_clock_key

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "tests", "coding_oracle_run.py")
TIMEOUT_S = 600  # every run is killed past this (a hang cannot block CI)
# 4 train tasks of the select family (levels 2-3: every one has an easier
# variant). 3 steps: propose (step 0), accept (step 1, checkpointed, then
# killed), continue.
TOTAL_STEPS = 3
ARGS = [
  "--config=coding:smoke",
  f"--config.total_steps={TOTAL_STEPS}",
  "--config.env.num_slots=4",
  "--config.env.num_tasks=4",
]
ACCEPT_STEP = 1  # the RL step that accepts; its checkpoint is the kill point


def _cmd(workdir):
  return [sys.executable, RUNNER, *ARGS, f"--workdir={workdir}"]


def _rows(workdir):
  """metrics.jsonl without wall-clock fields."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  return [
    {k: v for k, v in r.items() if not is_wall_clock_key(k)} for r in rows
  ]


def _tasks(workdir, step):
  """The task state (pool + registry) saved in checkpoint `step`."""
  from rla_jax.checkpoint import LoopCheckpointer

  ckpt = LoopCheckpointer(workdir)
  try:
    assert ckpt.latest_step() is not None, f"no checkpoint in {workdir}"
    return ckpt.read_meta(step)["tasks"]
  finally:
    ckpt.close()


@pytest.mark.slow
def test_resume_after_sigkill_keeps_the_accepted_task(tmp_path):
  full = str(tmp_path / "full")
  proc = subprocess.run(
    _cmd(full),
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
    cwd=ROOT,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  reference = _rows(full)
  assert [r["step"] for r in reference] == [0, 1, 2, 3]
  # Row s + 1 holds RL step s: a candidate proposed at step 0, accepted at
  # step 1 (before the kill point) and trained on.
  assert reference[1]["env/proposed_this_step"] >= 1
  assert reference[1]["env/accepted_total"] == 0
  assert reference[ACCEPT_STEP + 1]["env/accepted_total"] >= 1
  assert reference[ACCEPT_STEP + 1]["policy/updates"] >= 1

  killed = str(tmp_path / "killed")
  child = subprocess.Popen(
    _cmd(killed),
    cwd=ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  kill_ckpt = os.path.join(killed, "checkpoints", str(ACCEPT_STEP))
  deadline = time.time() + TIMEOUT_S
  try:
    while not os.path.isdir(kill_ckpt) and child.poll() is None:
      assert time.time() < deadline, "no checkpoint written in time"
      time.sleep(0.05)
  finally:
    child.send_signal(signal.SIGKILL)
  assert child.wait(timeout=60) == -signal.SIGKILL, "run ended before kill"
  last = TOTAL_STEPS - 1
  assert not os.path.isdir(os.path.join(killed, "checkpoints", str(last)))
  # The checkpoint the resume starts from holds the accepted task.
  saved = _tasks(killed, ACCEPT_STEP)
  assert saved["pool"]["accepted_total"] >= 1
  accepted = [
    (slot, s["active_id"])
    for slot, s in saved["pool"]["slots"].items()
    if s["active_id"] != s["root_id"]
  ]
  assert accepted, "no slot holds an accepted task in the checkpoint"
  assert all(tid in saved["registry"] for _, tid in accepted)

  resumed = subprocess.run(
    _cmd(killed),
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
    cwd=ROOT,
  )
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"resumed from checkpoint step {ACCEPT_STEP}" in resumed.stderr
  assert _rows(killed) == reference
  assert _tasks(killed, last) == _tasks(full, last)
