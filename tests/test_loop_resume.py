"""End-to-end closed loops through the launcher: artefacts, and exact resume
after SIGKILL (the resumed run's metrics equal an uninterrupted run's)."""

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
from conftest import kill_processes, still_running

from rla_jax.metrics.keys import is_wall_clock_key

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, "launch", "tpu_run.py")

CASES = {
  # Accuracy bands opened so the smoke models (which rarely win in 4
  # steps) still produce policy and judge updates that a resume must
  # restore exactly.
  "alfworld": [
    "--config=alfworld:smoke",
    "--config.total_steps=3",
    "--config.reward.policy_band=(0.0,1.0)",
    "--config.reward.rm_band=(0.0,1.0)",
  ],
  "coding": ["--config=coding:smoke", "--config.total_steps=3"],
  # Real headless Chromium and MiniWoB++ pages, Qwen3-VL policy and judge.
  "gui": ["--config=gui:smoke", "--config.total_steps=3"],
}


def _cmd(case, workdir, warm_start):
  extra = [f"--config.warmstart.dir={warm_start.dir}"] * (case == "alfworld")
  return [sys.executable, LAUNCH, *CASES[case], *extra, f"--workdir={workdir}"]


def _smoke(warm_start):
  """The ALFWorld smoke config, loading the session's warm start."""
  from configs import alfworld

  c = alfworld.get_config("smoke")
  c.warmstart.dir = warm_start.dir
  return c


def _rows(workdir):
  """metrics.jsonl without wall-clock fields."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  return [
    {k: v for k, v in r.items() if not is_wall_clock_key(k)} for r in rows
  ]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_run_writes_artefacts_and_resumes_exactly_after_sigkill(
  case, tmp_path, smoke_warm_start
):
  full = str(tmp_path / "full")
  proc = subprocess.run(
    _cmd(case, full, smoke_warm_start),
    capture_output=True,
    text=True,
    timeout=600,
    cwd=ROOT,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  for path in (
    "metrics.jsonl",
    "summary.md",
    "learning_curves.png",
    "run_record.json",
    "checkpoints/2",
  ):
    assert os.path.exists(os.path.join(full, path)), path
  events = os.listdir(os.path.join(full, "tensorboard"))
  assert any(e.startswith("events.out.tfevents") for e in events)
  reference = _rows(full)
  assert [r["step"] for r in reference] == [0, 1, 2, 3]
  if case == "alfworld":  # the smoke run really trains both models
    assert reference[1]["policy/updates"] >= 1
    assert reference[1]["reward/updates"] >= 1
    _check_logged_changes(reference, full)
    _check_judge_eval(full)
  if case == "coding":
    _check_coding_changes(reference, full)

  killed = str(tmp_path / "killed")
  child = subprocess.Popen(
    _cmd(case, killed, smoke_warm_start),
    cwd=ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  first_ckpt = os.path.join(killed, "checkpoints", "0")
  deadline = time.time() + 600
  while not os.path.isdir(first_ckpt) and child.poll() is None:
    assert time.time() < deadline, "no checkpoint written in time"
    time.sleep(0.05)
  _kill_run(child)
  assert child.returncode == -signal.SIGKILL, "run ended before kill"
  assert not os.path.isdir(os.path.join(killed, "checkpoints", "2"))

  resumed = subprocess.run(
    _cmd(case, killed, smoke_warm_start),
    capture_output=True,
    text=True,
    timeout=600,
    cwd=ROOT,
  )
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "resumed from checkpoint step" in resumed.stderr
  assert _rows(killed) == reference
  records = [
    json.load(open(os.path.join(d, "run_record.json"))) for d in (full, killed)
  ]
  assert records[0] == records[1] and records[0]["total_steps"] == 3
  if case == "coding":  # the resumed end eval paired with the restored start
    _check_coding_changes(_rows(killed), killed)


@pytest.mark.slow
def test_sigterm_stops_a_gui_run_and_closes_its_browsers(tmp_path):
  """SIGTERM (a scheduler, a preempted VM) unwinds the launcher: exit 143,
  one log line, and none of the processes it started (chromedriver,
  Chromium) left running."""
  work, log_path = str(tmp_path / "run"), str(tmp_path / "stderr.log")
  with open(log_path, "w") as log:
    child = subprocess.Popen(
      [sys.executable, LAUNCH, *CASES["gui"], f"--workdir={work}"]
      + ["--config.total_steps=50"],
      cwd=ROOT,
      stdout=subprocess.DEVNULL,
      stderr=log,
    )
  deadline = time.time() + 600
  while not os.path.isdir(os.path.join(work, "checkpoints", "0")):
    assert child.poll() is None and time.time() < deadline, "no checkpoint"
    time.sleep(0.05)
  family = psutil.Process(child.pid).children(recursive=True)
  try:
    assert any(p.name() == "chromedriver" for p in family)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=120) == 143
    with open(log_path) as f:
      assert "SIGTERM: stopping" in f.read()
    _, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, f"left running: {alive}"
  finally:  # whatever failed, nothing outlives the test
    for p in [child, *family]:
      with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
        p.kill()


def _kill_run(child: subprocess.Popen) -> None:
  """SIGKILL a launcher, and check that every process it started ends on
  its own: the GUI runs' chromedriver and Chromium through their guard
  (`rla_jax.envs.gui.driver_guard`; Chromium's helpers start sessions of
  their own, so nothing else would reach them). The launcher and then its
  descendants are stopped before they are listed, so none is started
  unseen; they are resumed once the launcher is dead."""
  root = psutil.Process(child.pid)
  root.suspend()
  family = root.children(recursive=True)
  for p in family:
    with contextlib.suppress(psutil.NoSuchProcess):
      p.suspend()
  for p in list(family):  # any started before its parent was stopped
    with contextlib.suppress(psutil.NoSuchProcess):
      family += p.children(recursive=True)
  family = list({p.pid: p for p in family}.values())
  child.send_signal(signal.SIGKILL)
  child.wait(timeout=60)
  for p in family:
    with contextlib.suppress(psutil.NoSuchProcess):
      p.resume()
  alive = still_running(family, timeout_s=30.0)
  kill_processes(alive)  # whatever failed, nothing outlives the test
  assert not alive, f"processes outlived the killed run: {alive}"


def _check_logged_changes(rows, workdir):
  """The last evaluation's paired changes agree with the logged start and
  end successes, and the summary states them."""
  from rla_jax.metrics.keys import split_keys

  with open(os.path.join(workdir, "summary.md")) as f:
    summary = f.read()
  for split in ("in_distribution", "out_of_distribution"):
    k = split_keys(split)
    start, end = rows[0], rows[-1]
    assert k.change not in start and start[k.runs] == end[k.runs] == 3
    assert end[k.change] == pytest.approx(end[k.success] - start[k.success])
    assert end[k.change_stderr] >= 0
    assert f"- {split}_success {start[k.success]:.3f} -> " in summary


def _check_judge_eval(workdir):
  """launch/judge_eval.py on the finished run: its loop-reference table
  reproduces the loop's logged start and end judge accuracy, on the same
  steps with one more episode in "all"; --episodes outside [the loop's
  reference episodes, the OOD runs] is one clear error."""
  tool = os.path.join(ROOT, "launch", "judge_eval.py")

  def judge_eval(episodes):
    return subprocess.run(
      [sys.executable, tool, f"--workdir={workdir}", f"--episodes={episodes}"],
      capture_output=True,
      text=True,
      timeout=600,
      cwd=ROOT,
    )

  bad = judge_eval(9)
  assert bad.returncode == 2 and "--episodes=9 must be in [" in bad.stderr
  done = judge_eval(3)  # smoke: 2 reference episodes of 3 OOD runs
  assert done.returncode == 0, done.stderr[-3000:]
  with open(os.path.join(workdir, "judge_eval.json")) as f:
    result = json.load(f)
  assert result["loop_rows"] == "agree" and result["checkpoint_step"] == 2
  ref, every = result["loop_reference"], result["all"]
  assert (ref["num_episodes"], every["num_episodes"]) == (2, 3)
  assert every["num_steps"] > ref["num_steps"] > 0
  rows = _rows(workdir)
  for key, name in (
    ("eval/rm_process_balanced_accuracy", "balanced"),  # nan: a class absent
    ("eval/rm_positive_rate", "positive_rate"),
  ):
    np.testing.assert_allclose(
      np.array([ref[f"{name}_start"], ref[f"{name}_end"]], float),
      np.array([rows[0][key], rows[-1][key]], float),  # null: nan
      atol=1e-9,
    )
  assert 0 <= every["positive_rate_start"] <= 1
  shares = result["episodes"]
  assert shares["plus_steps"] == round(
    every["label_positive_rate"] * every["num_steps"]
  )
  assert 0 <= shares["won_share"] <= 1
  for end in ("start", "end"):  # where consistency feedback pushes each judge
    target = result["consistency_target"][end]
    assert target["num_steps"] == every["num_steps"]
    assert 0 <= target["pushed_steps"] <= target["num_steps"]
    by_verb = result["votes_by_verb"][end]  # every judged step, by verb
    assert (
      sum(c["steps"] for cells in by_verb.values() for c in cells.values())
      == every["num_steps"]
    )


def _check_coding_changes(rows, workdir):
  """The coding end evaluation's code and UT changes are paired against
  the start one's runs (the same runs at both ends) and the summary
  states them; code's start mean is start eval/code, UT's is its logged
  change_start where eval/ut is not the mean of its runs (tests judged by
  correct programs: at most start eval/ut), else start eval/ut."""
  from rla_jax.metrics.keys import paired_keys

  with open(os.path.join(workdir, "summary.md")) as f:
    summary = f.read()
  start, end = rows[0], rows[-1]
  for name in ("code", "ut"):
    k = paired_keys(name)
    assert k.change not in start and start[k.runs] == end[k.runs] > 1
    assert end[k.change_stderr] >= 0
    begin = end.get(k.change_start, start[k.success])
    assert begin <= start[k.success] + 1e-12
    if name == "code" or k.change_start not in end:
      assert begin == start[k.success]
      assert end[k.change] == pytest.approx(end[k.success] - begin)
    assert f"- {name} {begin:.3f} -> " in summary


@pytest.mark.slow
def test_judge_reference_is_the_base_policys_without_eval_at_start(
  tmp_path, smoke_warm_start
):
  """The judge's reference trajectories are the base policy's OOD episodes,
  whether an evaluation runs before training or not (the ablation's later
  stages skip it), so RM accuracies of different stages are paired."""
  from rla_jax.rl.loops import make_loop

  with_eval = make_loop(
    _smoke(smoke_warm_start), str(tmp_path / "a"), log=lambda msg: None
  )
  with_eval.evaluate(-1)
  c = _smoke(smoke_warm_start)
  c.eval.at_start = False
  without = make_loop(c, str(tmp_path / "b"), log=lambda msg: None)
  timings = {}
  without._ensure_rm_reference(timings)
  assert timings["judge_reference"] > 0  # its wall time is reported
  again = {}
  without._ensure_rm_reference(again)
  assert again == {}  # kept: not rolled out twice
  a, b = with_eval.rm_reference, without.rm_reference
  assert len(a) == len(b) == c.eval.num_rm_episodes
  assert [e.task_id for e in a] == [e.task_id for e in b]
  assert [e.response_texts for e in a] == [e.response_texts for e in b]
  assert [e.actions for e in a] == [e.actions for e in b]


def test_evaluation_plays_several_rollouts_per_game(
  tmp_path, monkeypatch, smoke_warm_start
):
  """eval.rollouts_per_game = 2: every eval game is played twice (rollout r
  of game g is episode r * G + g), success is the mean over all 2G runs, the
  judge's reference keeps one rollout per game, and a bad count is refused
  before any work. The start evaluation keeps its per-run outcomes (through
  a checkpoint's JSON state too); a later one pairs its runs with them: the
  same policy replays the same runs (change 0, s.e. 0), and against other
  start outcomes the change and s.e. are those of the per-run differences."""
  from rla_jax.rl.loops import make_loop

  c = _smoke(smoke_warm_start)
  c.eval.rollouts_per_game = 2
  loop = make_loop(c, str(tmp_path / "k2"), log=lambda msg: None)
  played = []
  rollouts = loop._rollouts

  def spy(games, ids, *args, **kwargs):
    eps = rollouts(games, ids, *args, **kwargs)
    played.append((list(ids), eps))
    return eps

  monkeypatch.setattr(loop, "_rollouts", spy)
  out = loop.evaluate(-1)
  assert len(played) == 2  # the ID and the OOD split
  for (ids, eps), name in zip(played, loop.eval_games, strict=True):
    one_pass = [g.game_id for g in loop.eval_games[name]]
    assert ids == one_pass * 2
    assert out[f"eval/{name}_success"] == pytest.approx(
      sum(e.won for e in eps) / len(eps)
    )
  ood_ids, _ = played[1]
  assert [e.task_id for e in loop.rm_reference] == ood_ids[
    : c.eval.num_rm_episodes
  ]
  _check_paired_changes(loop, out, played[:2])
  c.eval.rollouts_per_game = 0
  with pytest.raises(ValueError, match="eval.rollouts_per_game=0"):
    make_loop(c, str(tmp_path / "k0"), log=lambda msg: None)


def _outcomes(loop, played) -> dict:
  """{split: [N] 0/1 outcomes} of one evaluation's (ids, episodes) calls."""
  return {
    name: [int(e.won) for e in eps]
    for name, (_, eps) in zip(loop.eval_games, played, strict=True)
  }


def _check_paired_changes(loop, start_out, played):
  """The start evaluation's outcomes, kept through the checkpoint state,
  and the paired changes of a later evaluation (see the caller)."""
  import json

  import numpy as np

  from rla_jax.metrics.keys import EVAL_SECONDS, split_keys

  assert start_out[EVAL_SECONDS] > 0
  won = _outcomes(loop, played)
  assert loop.eval_start.won == won
  for name in loop.eval_games:
    k = split_keys(name)
    assert start_out[k.runs] == len(won[name]) == 2 * len(loop.eval_games[name])
    assert k.change not in start_out  # the start itself
  state = json.loads(json.dumps(loop.task_state()))
  kept, loop.eval_start = loop.eval_start, None
  loop.load_task_state(state)
  assert loop.eval_start == kept
  again = loop.evaluate(0)  # same policy, same seeds: the same runs
  for name in loop.eval_games:
    k = split_keys(name)
    assert again[k.success] == start_out[k.success]
    assert (again[k.change], again[k.change_stderr]) == (0.0, 0.0)
  # Other start outcomes: change and s.e. of the per-run differences.
  flipped = {n: [1 - w for w in v[:3]] + v[3:] for n, v in won.items()}
  loop.eval_start = dataclasses.replace(kept, won=flipped)
  later = loop.evaluate(1)
  end = _outcomes(loop, played[-2:])
  for name in loop.eval_games:
    k = split_keys(name)
    d = np.array(end[name]) - np.array(flipped[name])
    assert later[k.change] == pytest.approx(
      later[k.success] - np.mean(flipped[name])
    )
    assert later[k.change] == pytest.approx(d.mean())
    assert later[k.change_stderr] == pytest.approx(
      np.sqrt(d.var(ddof=1) / d.size)
    )
    assert later[k.change_stderr] > 0


def test_env_task_types_restrict_train_slots_and_eval_games(
  tmp_path, smoke_warm_start
):
  """env.task_types = one type: every training slot and evaluation game is
  of that type; an unknown name is refused before any work, naming the key."""
  from rla_jax.rl.loops import make_loop

  c = _smoke(smoke_warm_start)
  c.env.task_types = "look_at_obj_in_light"  # a type of levels 1-2
  loop = make_loop(c, str(tmp_path / "heat"), log=lambda msg: None)
  games = list(loop.registry.values()) + [
    g for split in loop.eval_games.values() for g in split
  ]
  assert len(games) == c.env.num_slots + 2 * c.eval.num_games
  assert {g.task_type for g in games} == {"look_at_obj_in_light"}
  c.env.task_types = "pick_and_place_simple, fly_to_moon"
  with pytest.raises(ValueError, match="env.task_types"):
    make_loop(c, str(tmp_path / "bad"), log=lambda msg: None)
