"""Judge metrics of rla_jax.rl.evaluation on hand-computed cases."""

import json
import math

import numpy as np
import pytest

from rla_jax.metrics import keys
from rla_jax.rl import evaluation, judge_accuracy

# 2 trajectories x 3 step slots x m=3 votes; trajectory 1 has 2 real steps.
SCORES = np.array(
  [
    [[1, 1, -1], [-1, -1, 1], [1, 0, 1]],  # votes +1, -1, +1
    [[0, 1, -1], [1, 1, 1], [1, 1, 1]],  # votes -1, +1, (padding)
  ]
)
MASK = np.array([[True, True, True], [True, True, False]])
LABELS = [[1, 1, -1], [-1, 1]]


def test_majority_vote_needs_a_strict_majority_of_plus_ones():
  np.testing.assert_array_equal(
    judge_accuracy.majority_vote(SCORES), [[1, -1, 1], [-1, 1, 1]]
  )
  assert judge_accuracy.majority_vote(np.array([1, -1])) == -1  # tie


def test_process_accuracy_and_breakdown_by_hand():
  # real steps: (vote, label) = (+,+) (-,+) (+,-) (-,-) (+,+)
  assert evaluation.rm_process_accuracy(SCORES, MASK, LABELS) == 3 / 5
  out = evaluation.rm_process_breakdown(SCORES, MASK, LABELS)
  assert out["positive_rate"] == 3 / 5
  assert out["label_positive_rate"] == 3 / 5  # labels + + - - +
  # recall of +1: 2 of 3; recall of -1: 1 of 2
  assert math.isclose(out["balanced_accuracy"], (2 / 3 + 1 / 2) / 2)


def test_breakdown_with_one_class_or_no_steps():
  out = evaluation.rm_process_breakdown(SCORES, MASK, [[1, 1, 1], [1, 1]])
  assert math.isnan(out["balanced_accuracy"])
  empty = evaluation.rm_process_breakdown(SCORES, np.zeros_like(MASK), LABELS)
  assert math.isnan(empty["positive_rate"])
  assert math.isnan(empty["label_positive_rate"])


def test_outcome_accuracy_by_hand():
  # mean step scores: traj 0 = 4/9 > 0 -> predicts success; traj 1 = 3/6 > 0
  assert (
    evaluation.rm_outcome_accuracy(SCORES, MASK, np.array([True, False]))
    == 1 / 2
  )


def test_judge_metrics_gathers_the_four_by_hand():
  out = evaluation.judge_metrics(SCORES, MASK, LABELS, np.array([True, False]))
  assert out["eval/rm_process_accuracy"] == 3 / 5
  assert out["eval/rm_positive_rate"] == 3 / 5
  assert out["eval/rm_label_positive_rate"] == 3 / 5
  assert math.isclose(
    out["eval/rm_process_balanced_accuracy"], (2 / 3 + 1 / 2) / 2
  )
  # mean real-step scores: trajectory 0 (1+1-1-1-1+1+1+0+1)/9 > 0 -> won,
  # right; trajectory 1 (0+1-1+1+1+1)/6 > 0 -> won, wrong.
  assert out["eval/rm_outcome_accuracy"] == 1 / 2


def test_paired_difference_by_hand_and_against_numpy():
  start = [1, 0, 0, 1, 0]
  end = [1, 1, 0, 0, 1]  # d = 0, +1, 0, -1, +1: mean 1/5
  p = evaluation.paired_difference(start, end)
  assert (p.mean_start, p.mean_end, p.change, p.n) == (0.4, 0.6, 0.2, 5)
  # var(d, ddof=1) = (3 * 0.8**2 + 0.2**2 + 1.2**2) / 4 = 0.7
  assert math.isclose(p.stderr, math.sqrt(0.7 / 5))
  d = np.array(end, float) - np.array(start, float)
  assert math.isclose(p.stderr, d.std(ddof=1) / math.sqrt(d.size))
  # Pairing matters: independent means would have a larger s.e. here.
  rng = np.random.default_rng(0)
  s = rng.integers(0, 2, 256)
  e = np.where(rng.random(256) < 0.1, 1 - s, s)  # 10% of runs flip
  p = evaluation.paired_difference(s, e)
  assert p.n == 256
  assert math.isclose(p.change, e.mean() - s.mean())
  assert math.isclose(p.stderr, np.sqrt(np.var(e - s, ddof=1) / 256))
  unpaired = np.sqrt((s.var(ddof=1) + e.var(ddof=1)) / 256)
  assert p.stderr < unpaired / 2


def test_paired_difference_one_run_all_equal_and_bad_shapes():
  one = evaluation.paired_difference([0], [1])
  assert (one.change, one.n) == (1.0, 1) and math.isnan(one.stderr)
  same = evaluation.paired_difference([1, 0, 1], [1, 0, 1])
  assert (same.change, same.stderr) == (0.0, 0.0)
  shift = evaluation.paired_difference([0, 0, 0], [1, 1, 1])
  assert (shift.change, shift.stderr) == (1.0, 0.0)  # every d equal
  for start, end in (([], []), ([0, 1], [1]), ([[0, 1]], [[1, 0]])):
    with pytest.raises(ValueError, match="shape"):
      evaluation.paired_difference(start, end)


def test_success_metrics_pair_each_split_with_its_start():
  won = {"a": [1, 1, 0, 0], "b": [0]}
  first = evaluation.success_metrics(won, None)
  assert first == {
    "eval/a_success": 0.5,
    "eval/a_runs": 4,
    "eval/b_success": 0.0,
    "eval/b_runs": 1,
  }
  later = evaluation.success_metrics(won, {"a": [0, 1, 0, 1], "b": [1]})
  assert later["eval/a_success_change"] == 0.0  # d = +1, 0, 0, -1
  assert math.isclose(
    later["eval/a_success_change_stderr"], math.sqrt((2 / 3) / 4)
  )
  assert later["eval/b_success_change"] == -1.0
  assert math.isnan(later["eval/b_success_change_stderr"])


def test_start_outcomes_round_trip_and_refuse_changed_settings():
  fields = {k: i for i, k in enumerate(evaluation.PAIRING_FIELDS)}
  cfg = {**fields, "every": 5}  # not a pairing field
  settings = evaluation.pairing_settings(cfg)
  assert settings == fields
  start = evaluation.StartOutcomes.of({"a": [True, False]}, settings)
  assert start.won == {"a": [1, 0]}
  record = json.loads(json.dumps(start.record()))
  logged = []
  assert (
    evaluation.StartOutcomes.restore(record, settings, logged.append) == start
  )
  assert evaluation.StartOutcomes.restore(None, settings, logged.append) is None
  assert (
    evaluation.StartOutcomes.restore(
      record, evaluation.pairing_settings({**cfg, "every": 1}), logged.append
    )
    == start
  )
  assert logged == []
  changed = evaluation.pairing_settings({**cfg, "seed": 99})
  assert (
    evaluation.StartOutcomes.restore(record, changed, logged.append) is None
  )
  assert len(logged) == 1 and "not paired" in logged[0]


def test_paired_metrics_of_a_named_metric():
  """A metric's runs, and against start outcomes its paired change, s.e.
  and (asked for) the start mean, under its paired keys."""
  k = keys.paired_keys("ut")
  assert evaluation.paired_metrics(k, [1, 0, 1], None) == {"eval/ut_runs": 3}
  out = evaluation.paired_metrics(k, [1, 0, 1], [0, 0, 1], True)
  assert out["eval/ut_change"] == pytest.approx(1 / 3)  # d = 1, 0, 0
  assert out["eval/ut_change_stderr"] == pytest.approx(math.sqrt(1 / 3 / 3))
  assert out["eval/ut_change_start"] == pytest.approx(1 / 3)
  assert "eval/ut_change_start" not in evaluation.paired_metrics(
    k, [1, 0, 1], [0, 0, 1]
  )


def test_expert_step_scores_label_the_experts_steps_plus_one():
  import types

  from rla_jax.envs.alfworld import expert_plan, generate_split

  games = generate_split("train", 2, seed=3, room_size="small")
  plan = expert_plan(games[0])
  eps = [
    # the expert's own plan: every step makes progress
    types.SimpleNamespace(game=games[0], actions=plan, num_steps=len(plan)),
    # "look" twice: no progress
    types.SimpleNamespace(game=games[1], actions=["look", "look"], num_steps=2),
  ]
  scores, mask = evaluation.expert_step_scores(eps)
  K = max(len(plan), 2)
  assert scores.shape == (2, K, 1) and mask.shape == (2, K)
  assert (scores[0, : len(plan), 0] == 1).all() and mask[0].sum() == len(plan)
  assert (scores[1, :2, 0] == -1).all() and mask[1].sum() == 2
  assert (scores[~mask] == 0).all()


def test_judge_accuracy_on_own_steps_reads_only_the_judged_steps():
  """The RL step's judge diagnostic: expert labels of the judged steps only
  (0 elsewhere), and the majority vote's balanced accuracy against them."""
  import types

  from rla_jax.envs.alfworld import expert_plan, generate_split
  from rla_jax.rl.alfworld_metrics import judge_accuracy_on_own_steps

  games = generate_split("train", 2, seed=3, room_size="small")
  plan = expert_plan(games[0])
  eps = [
    types.SimpleNamespace(game=games[0], actions=plan, num_steps=len(plan)),
    types.SimpleNamespace(game=games[1], actions=["look", "look"], num_steps=2),
  ]
  K = len(plan)
  mask = np.zeros((2, K), bool)
  mask[0, :2] = mask[1, 1] = True  # judged: two expert steps and one look
  labels = evaluation.judged_step_labels(eps, mask)
  assert labels == [[1, 1] + [0] * (K - 2), [0, -1]]
  scores = np.full((2, K, 3), -1)
  scores[0, 0] = [1, 1, -1]  # +1 by majority: right; step 1 voted -1: wrong
  out = judge_accuracy_on_own_steps(eps, scores, mask)
  # recall of +1: 1 of 2; recall of -1: 1 of 1
  assert out["train/judge_balanced_accuracy"] == pytest.approx(0.75)
  assert out["train/judge_label_positive_rate"] == pytest.approx(2 / 3)
  mask[1, 1] = False  # one class only: no balanced accuracy to report
  assert judge_accuracy_on_own_steps(eps, scores, mask) == {}


def test_run_outcomes_keep_each_evaluation_and_drop_later_rows(tmp_path):
  from rla_jax.rl.evaluation import read_run_outcomes, write_run_outcomes

  assert read_run_outcomes(str(tmp_path)) == {}
  write_run_outcomes(str(tmp_path), 0, {"a": [1, 0], "b": [True]})
  write_run_outcomes(str(tmp_path), 2, {"a": [1, 1], "b": [0]})
  assert read_run_outcomes(str(tmp_path)) == {
    0: {"a": [1, 0], "b": [1]},
    2: {"a": [1, 1], "b": [0]},
  }
  # a resumed run re-evaluates row 1: row 2 (from the lost future) goes
  write_run_outcomes(str(tmp_path), 1, {"a": [0, 0], "b": [1]})
  assert sorted(read_run_outcomes(str(tmp_path))) == [0, 1]
