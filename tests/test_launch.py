"""The launcher's command line: config resolution, overrides and bad input.

Each case runs `python launch/tpu_run.py` in a subprocess and checks that it
fails fast with one clear message (before anything is compiled).
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, "launch", "tpu_run.py")


def _run(args, env=None, timeout=240):
  full_env = {**os.environ, **(env or {})}
  return subprocess.run(
    [sys.executable, LAUNCH, *args],
    capture_output=True,
    text=True,
    timeout=timeout,
    env=full_env,
    cwd=ROOT,
  )


def test_unknown_config_name():
  proc = _run(["--config=nope", "--workdir=/tmp/unused"])
  assert proc.returncode != 0
  assert "unknown config 'nope'; known configs: alfworld, coding" in (
    proc.stderr
  )


def test_unknown_preset(tmp_path):
  proc = _run(["--config=alfworld:giant", f"--workdir={tmp_path}"])
  assert proc.returncode != 0
  assert "configs/alfworld.py: unknown preset 'giant'" in proc.stderr


def test_unknown_key(tmp_path):
  proc = _run(
    ["--config=alfworld", "--config.env.num_taskz=3", f"--workdir={tmp_path}"]
  )
  assert proc.returncode != 0
  assert "num_taskz" in proc.stderr


def test_unknown_nested_key(tmp_path):
  proc = _run(
    [
      "--config=alfworld",
      "--config.warmstart.settings.no_such_key=1",
      f"--workdir={tmp_path}",
    ]
  )
  assert proc.returncode == 2
  assert "no_such_key" in proc.stderr and "Traceback" not in proc.stderr


def test_every_warm_start_field_is_overridable_and_checked(tmp_path):
  # policy_answer is not set by the preset: it comes from the defaults
  proc = _run(
    [
      "--config=alfworld",
      "--config.warmstart.settings.policy_answer=essay",
      f"--workdir={tmp_path}",
    ],
    env={"RLA_JAX_CACHE": str(tmp_path)},
  )
  assert proc.returncode == 2
  assert (
    "policy_answer must be one of" in proc.stderr and "'essay'" in proc.stderr
  )
  assert not os.path.exists(tmp_path / "alfworld"), "warm start began"
  # a field the loop derives (from env.room_size) is not offered
  proc = _run(
    [
      "--config=alfworld",
      "--config.warmstart.settings.room_size=full",
      f"--workdir={tmp_path}",
    ]
  )
  assert proc.returncode == 2 and "room_size" in proc.stderr


def test_fewer_slots_than_tasks_per_step(tmp_path):
  proc = _run(
    ["--config=alfworld", "--config.env.num_slots=3", f"--workdir={tmp_path}"],
    env={"RLA_JAX_CACHE": str(tmp_path)},
  )
  assert proc.returncode != 0
  assert "config env.num_slots=3 must be >= env.num_tasks=6" in proc.stderr
  assert not os.path.exists(tmp_path / "alfworld"), "warm start began"


def test_missing_model_directory(tmp_path):
  proc = _run(
    [
      "--config=coding:smoke",
      f"--workdir={tmp_path}",
      "--config.model.policy_dir=/nonexistent/policy",
      "--config.model.tokenizer_dir=/nonexistent/tok",
      "--config.model.reward_dir=/nonexistent/rm",
    ]
  )
  assert proc.returncode != 0
  assert (
    "config.model.tokenizer_dir: directory '/nonexistent/tok' does "
    "not exist" in proc.stderr
  )


@pytest.mark.slow
def test_incompatible_checkpoint_is_refused(tmp_path):
  env = {
    "RLA_JAX_CACHE": str(tmp_path / "cache"),
    "RLA_JAX_XLA_CACHE": str(tmp_path / "xla"),
  }
  work = str(tmp_path / "run")
  first = _run(
    ["--config=coding:smoke", "--config.total_steps=1", f"--workdir={work}"],
    env=env,
  )
  assert first.returncode == 0, first.stderr[-2000:]
  assert os.path.isdir(os.path.join(work, "checkpoints", "0"))
  second = _run(
    [
      "--config=coding:smoke",
      "--config.total_steps=2",
      "--config.env.programs_per_task=3",
      f"--workdir={work}",
    ],
    env=env,
  )
  assert second.returncode != 0
  assert "was written with config fingerprint" in second.stderr
  assert "use a new --workdir" in second.stderr
