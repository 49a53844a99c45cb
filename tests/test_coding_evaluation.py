"""Coding evaluation's pure metrics on hand-computed cases: selection of a
program by the generated tests, and the per-run records a later
evaluation is paired on."""

import numpy as np
import pytest

from rla_jax.envs.coding.evaluation import (
  Selection,
  code_outcomes,
  correct_tests,
  selection_accuracy,
  selection_metrics,
  ut_outcomes,
)

# 4 programs x 2 ground-truth tests: programs 0 and 3 pass both.
GT = np.array([[1, 1], [1, 0], [0, 0], [1, 1]], bool)


def test_selection_picks_among_ties_exactly():
  # scores (valid tests passed): 2, 2, 0, 1 -> ties {0, 1}, one correct
  gen = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0]], bool)
  valid = np.array([True, True, False])  # test 2 did not parse
  assert selection_accuracy(GT, gen, valid) == Selection(0.5, 0.5)
  # test 2 valid: scores 3, 2, 1, 1 -> program 0 alone, correct
  assert selection_accuracy(GT, gen, np.ones(3, bool)) == Selection(1.0, 0.5)
  # one test all but program 1 pass: ties {0, 2, 3}, two of them correct
  three_way = np.array([[1], [0], [1], [1]], bool)
  assert selection_accuracy(GT, three_way, [True]) == Selection(2 / 3, 0.5)
  wrong_pick = np.array([[0], [1], [1], [0]], bool)  # ties {1, 2}: none
  assert selection_accuracy(GT, wrong_pick, [True]) == Selection(0.0, 0.5)


def test_selection_without_valid_tests_is_the_random_baseline():
  gen = np.ones((4, 2), bool)
  assert selection_accuracy(GT, gen, [False, False]) == Selection(0.5, 0.5)
  none = np.zeros((4, 0), bool)
  assert selection_accuracy(GT, none, np.zeros(0, bool)) == Selection(0.5, 0.5)


def test_selection_all_correct_and_none_correct():
  gen = np.array([[1], [0], [1]], bool)
  assert selection_accuracy(np.ones((3, 2), bool), gen, [True]) == Selection(
    1.0, 1.0
  )
  assert selection_accuracy(np.zeros((3, 2), bool), gen, [True]) == Selection(
    0.0, 0.0
  )


def test_selection_refuses_bad_shapes():
  with pytest.raises(ValueError, match="P = 0"):
    selection_accuracy(np.zeros((0, 2), bool), np.zeros((0, 1), bool), [True])
  with pytest.raises(ValueError, match="valid must have shape"):
    selection_accuracy(GT, np.zeros((4, 2), bool), [True])
  with pytest.raises(ValueError, match="gen_pass has 3 rows"):
    selection_accuracy(GT, np.zeros((3, 2), bool), [True, True])


def test_selection_metrics_average_over_tasks():
  gen = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0]], bool)
  m = selection_metrics(
    [GT, np.zeros((2, 1), bool)],
    [gen, np.ones((2, 1), bool)],
    [np.ones(3, bool), [True]],
  )
  # task 0: selected 1, random 0.5; task 1: 0 and 0. Gains 0.5 and 0:
  # sample std 0.5 / sqrt(2), s.e. 0.5 / sqrt(2) / sqrt(2) = 0.25.
  assert m == {
    "selected_code": 0.5,
    "random_code": 0.25,
    "selection_gain": 0.25,
    "selection_gain_stderr": pytest.approx(0.25),
  }
  one = selection_metrics([GT], [gen], [np.ones(3, bool)])
  assert one["selection_gain"] == 0.5
  assert np.isnan(one["selection_gain_stderr"])
  with pytest.raises(ValueError, match="N = 0"):
    selection_metrics([], [], [])


def test_code_outcomes_are_pass_all_per_task_and_program():
  assert code_outcomes([GT, np.array([[0, 1], [1, 1]], bool)]) == [
    1,
    0,
    0,
    1,
    0,
    1,
  ]


def test_correct_tests_by_correct_programs_and_by_reference():
  # tests: 0 passes programs 0, 3 (the correct ones); 1 passes 0 only;
  # 2 passes all but did not parse
  gen = np.array([[1, 1, 1], [0, 0, 1], [1, 0, 1], [1, 0, 1]], bool)
  valid = np.array([True, True, False])
  assert correct_tests(GT, gen, valid).tolist() == [True, False, False]
  # the reference decides, whatever the sampled programs do
  ref = np.array([False, True, True])
  assert correct_tests(GT, gen, valid, ref).tolist() == [False, True, False]
  nobody = np.zeros((4, 2), bool)  # no correct program, no reference
  assert correct_tests(nobody, gen, valid).tolist() == [False] * 3
  assert correct_tests(nobody, gen, valid, ref).tolist() == [
    False,
    True,
    False,
  ]
  with pytest.raises(ValueError, match="reference_pass must have shape"):
    correct_tests(GT, gen, valid, [True])


def test_ut_outcomes_concatenate_tasks_and_count_unjudged_tests_zero():
  gen = np.array([[1, 1, 1], [0, 0, 1], [1, 0, 1], [1, 0, 1]], bool)
  valid = np.ones(3, bool)
  nobody = np.zeros((4, 2), bool)
  all_ok = np.ones((4, 2), bool)
  assert ut_outcomes([GT, nobody], [gen, gen], [valid, valid]) == [
    *[1, 0, 1],
    *[0, 0, 0],  # no correct program, no reference: 0
  ]
  assert ut_outcomes(
    [nobody, all_ok],
    [gen, gen],
    [valid, valid],
    [np.array([1, 1, 0], bool), None],
  ) == [*[1, 1, 0], *[0, 0, 1]]  # all correct: passes all 4 programs
