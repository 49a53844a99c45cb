"""The recorded start evaluation (rla_jax/rl/start_evaluation.py): its key,
its file, and the loop using it only when a replay of its first runs
reproduces it."""

import json
import os
import subprocess
import sys

import pytest

from configs import alfworld
from rla_jax.errors import ConfigError
from rla_jax.metrics import keys
from rla_jax.rl.start_evaluation import (
  StartEvaluation,
  check_start_record_settings,
  disagreements,
  start_key,
  start_settings,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _key(**overrides):
  c = alfworld.get_config()
  for dotted, value in overrides.items():
    section, name = dotted.split("__")
    c[section][name] = value
  return start_key(start_settings(c, "warmstart-hash"))


def test_key_follows_the_settings_that_define_the_runs():
  base = _key()
  # what defines the runs changes the key
  assert _key(eval__num_games=64) != base
  assert _key(eval__seed=1) != base
  assert _key(eval__temperature=0.7) != base
  assert _key(env__levels=(1,)) != base
  assert _key(reward__m=5) != base
  assert _key(model__dtype="bfloat16") != base
  c = alfworld.get_config()
  assert start_key(start_settings(c, "another warm start")) != base
  # what names or checks the record, or only trains, does not
  assert _key(eval__start_cache="elsewhere.json") == base
  assert _key(eval__start_check_runs=3) == base
  assert _key(eval__every=2) == base
  assert _key(env__num_tasks=3) == base
  c.seed = 7  # RL seeds share the start evaluation
  assert start_key(start_settings(c, "warmstart-hash")) == base


def test_disagreements_count_replayed_runs_that_differ():
  cached = {"a": [1, 0, 1, 1], "b": [0, 0]}
  assert disagreements(cached, {"a": [1, 0], "b": [0, 0]}) == {"a": 0, "b": 0}
  assert disagreements(cached, {"a": [0, 1, 1], "b": [1]}) == {"a": 2, "b": 1}
  with pytest.raises(ValueError, match="'b'"):
    disagreements(cached, {"b": [0, 0, 0]})
  with pytest.raises(ValueError, match="'c'"):
    disagreements(cached, {"c": [0]})


def test_record_round_trip_and_unreadable_file(tmp_path):
  rec = StartEvaluation(
    key="k",
    settings={"eval": {"seed": 1}},
    metrics={"eval/x": 0.5},
    outcomes={"won": {"a": [1, 0]}, "settings": {}},
    rm_reference=[{"task_id": "t"}],
    provenance={"command": "c"},
  )
  path = str(tmp_path / "sub" / "start.json")
  rec.save(path)
  assert StartEvaluation.load(path) == rec
  with open(path, "w") as f:
    json.dump({"key": "k"}, f)
  with pytest.raises(ConfigError, match="start.json.*build_start_eval"):
    StartEvaluation.load(path)


def test_settings_check_names_the_key():
  c = alfworld.get_config()
  check_start_record_settings(c.eval)
  c.eval.start_check_runs = 0
  with pytest.raises(ConfigError, match="eval.start_check_runs=0"):
    check_start_record_settings(c.eval)
  c.eval.start_check_runs = 257
  with pytest.raises(ConfigError, match=r"\[1, 256\]"):
    check_start_record_settings(c.eval)
  c.eval.start_check_runs = 1
  c.eval.start_cache = None
  with pytest.raises(ConfigError, match="eval.start_cache=None"):
    check_start_record_settings(c.eval)


def _smoke(warm_start, record=""):
  c = alfworld.get_config("smoke")
  c.warmstart.dir = warm_start.dir
  c.eval.start_cache = record
  c.eval.start_check_runs = 2
  return c


@pytest.fixture(scope="module")
def smoke_record(smoke_warm_start, tmp_path_factory):
  """The smoke preset's start evaluation, recorded by the build command."""
  out = str(tmp_path_factory.mktemp("start") / "start_evaluation.json")
  argv = [
    "launch/build_start_eval.py",
    "--config=alfworld:smoke",
    f"--config.warmstart.dir={smoke_warm_start.dir}",
    "--config.eval.start_check_runs=2",
    f"--out={out}",
  ]
  proc = subprocess.run(
    [sys.executable, *argv],
    capture_output=True,
    text=True,
    timeout=900,
    cwd=ROOT,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return out, argv


def _loop(config, workdir, lines):
  from rla_jax.rl.loops import make_loop

  return make_loop(config, str(workdir), log=lines.append)


@pytest.mark.slow
def test_loop_uses_a_record_its_replay_reproduces(
  smoke_warm_start, smoke_record, tmp_path
):
  path, argv = smoke_record
  rec = StartEvaluation.load(path)
  assert rec.provenance["command"] == " ".join(["python", *argv])
  assert rec.provenance["seconds"] > 0
  full_lines, lines = [], []
  full = _loop(_smoke(smoke_warm_start), tmp_path / "full", full_lines)
  measured = full.evaluate(-1)
  assert measured[keys.EVAL_START_RECORDED] == 0.0
  loop = _loop(_smoke(smoke_warm_start, path), tmp_path / "rec", lines)
  recorded = loop.evaluate(-1)
  assert recorded[keys.EVAL_START_RECORDED] == 1.0
  assert recorded[keys.EVAL_START_CHECK_RUNS] == 2
  # the final evaluation is expected to take as long as the recorded one
  assert recorded[keys.EVAL_FULL_SECONDS_ESTIMATE] == pytest.approx(
    rec.provenance["seconds"]
  )
  assert any("replayed identically" in line for line in lines)
  # The record is what the full evaluation measures on this machine.
  for k, v in measured.items():
    if k not in (keys.EVAL_SECONDS, keys.EVAL_START_RECORDED):
      assert k in recorded, k
      assert recorded[k] == pytest.approx(v, nan_ok=True), k
  assert loop.eval_start == full.eval_start
  assert [e.actions for e in loop.rm_reference] == [
    e.actions for e in full.rm_reference
  ]
  # a later evaluation is paired against the recorded outcomes
  later = loop.evaluate(0)
  from rla_jax.rl.evaluation import read_run_outcomes

  kept = read_run_outcomes(str(tmp_path / "rec"))
  assert kept[0] == rec.outcomes["won"] == full.eval_start.won
  assert sorted(kept) == [0, 1] and sorted(kept[1]) == sorted(kept[0])
  assert later[keys.split_keys("in_distribution").change] == pytest.approx(
    later[keys.EVAL_ID_SUCCESS] - measured[keys.EVAL_ID_SUCCESS]
  )


@pytest.mark.slow
def test_loop_evaluates_in_full_when_the_record_does_not_hold(
  smoke_warm_start, smoke_record, tmp_path
):
  path, _ = smoke_record
  rec = json.load(open(path))
  won = rec["outcomes"]["won"]["out_of_distribution"]
  won[1] = 1 - won[1]  # a run this machine does not reproduce
  tampered = str(tmp_path / "tampered.json")
  json.dump(rec, open(tampered, "w"))
  lines = []
  out = _loop(_smoke(smoke_warm_start, tampered), tmp_path / "a", lines)
  assert out.evaluate(-1)[keys.EVAL_START_RECORDED] == 0.0
  assert any(
    "disagrees" in line and "'out_of_distribution': 1" in line for line in lines
  )
  # Other settings: the key differs, the record is not replayed at all.
  lines = []
  c = _smoke(smoke_warm_start, path)
  c.eval.temperature = 0.9
  other = _loop(c, tmp_path / "b", lines)
  assert other.evaluate(-1)[keys.EVAL_START_RECORDED] == 0.0
  assert any("made for other settings" in line for line in lines)
  # A missing record: evaluated in full, and the log names the command.
  lines = []
  gone = _loop(
    _smoke(smoke_warm_start, str(tmp_path / "no.json")), tmp_path / "c", lines
  )
  assert gone.evaluate(-1)[keys.EVAL_START_RECORDED] == 0.0
  assert any("build_start_eval.py" in line for line in lines)
