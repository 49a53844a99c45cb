"""Coding rewards against hand-computed examples
(values derived on paper, not from the code)."""

import math

import numpy as np
import pytest

from rla_jax.envs.coding import rewards as R
from rla_jax.rl.advantages import accuracy_in_band

T, F = True, False


def test_code_rewards_hand_example():
  # pass fractions [1, 1/2, 0, 1]: mean 5/8,
  # population var 11/64 -> std sqrt(11)/8
  gt = [[T, T], [T, F], [F, F], [T, T]]
  s11 = math.sqrt(11)
  np.testing.assert_allclose(
    R.code_rewards(gt), [3 / s11, -1 / s11, -5 / s11, 3 / s11], rtol=1e-12
  )
  np.testing.assert_allclose(R.pass_fraction(gt), [1, 0.5, 0, 1])


def test_code_rewards_all_equal_groups_give_zero():
  assert R.code_rewards([[T, T], [T, T]]).tolist() == [0.0, 0.0]  # all correct
  assert R.code_rewards([[F, F], [F, F], [F, F]]).tolist() == [
    0.0,
    0.0,
    0.0,
  ]  # none correct


def test_code_rewards_equal_pass_fractions_give_zero_despite_rounding():
  # 10 programs each passing 1 of 3 tests: the float std of ten 1/3 is
  # ~5.6e-17, not 0; every program must still get advantage 0 (not -1).
  gt = [[T, F, F]] * 10
  assert 0 < R.pass_fraction(gt).std() < 1e-15
  assert R.code_rewards(gt).tolist() == [0.0] * 10


def test_code_rewards_rejects_missing_tests():
  with pytest.raises(ValueError, match="T == 0"):
    R.code_rewards(np.zeros((3, 0), bool))
  with pytest.raises(ValueError, match="2-D"):
    R.code_rewards([T, F])


def test_accuracy_and_band():
  gt = [[T, T], [T, F], [F, F], [T, T], [T, T]]
  assert R.gt_code_mask(gt).tolist() == [T, F, F, T, T]
  assert R.accuracy(gt) == pytest.approx(3 / 5)
  # the coding band [ACC_LOW, ACC_HIGH] = [0.2, 0.8], both bounds inclusive
  for acc, inside in ((0.2, T), (0.8, T), (0.5, T), (0.19, F), (0.81, F)):
    assert accuracy_in_band(acc, R.ACC_LOW, R.ACC_HIGH) is inside
  assert R.filter_by_accuracy_band([0.0, 0.2, 0.5, 0.8, 1.0]).tolist() == [
    F,
    T,
    T,
    T,
    F,
  ]


# Codes 0 and 3 are correct (C), codes 1 and 2 are not (W).
GT_CODE = [T, F, F, T]
GEN_PASS = np.array(
  [
    # u0  u1  u2  u3
    [T, T, F, F],  # code 0 (correct)
    [F, T, T, F],  # code 1
    [F, F, T, F],  # code 2
    [T, T, T, F],  # code 3 (correct)
  ]
)
VALID = [T, T, T, F]


def test_unit_test_raw_rewards_hand_example():
  # u0: accepted by all of C, rejects both of W -> +2
  # u1: accepted by all of C, rejects one of W  -> +1
  # u2: rejects correct code 0 -> not a GT UT; accepted by both of W -> -2
  # u3: invalid -> -(|W| + 1) = -3
  assert R.unit_test_raw_rewards(GT_CODE, GEN_PASS, VALID).tolist() == [
    2.0,
    1.0,
    -2.0,
    -3.0,
  ]


def test_unit_test_rewards_standardised():
  # raw [2, 1, -2, -3]: mean -1/2, deviations [5/2, 3/2, -3/2, -5/2], var 17/4
  sd = math.sqrt(17 / 4)
  np.testing.assert_allclose(
    R.unit_test_rewards(GT_CODE, GEN_PASS, VALID),
    [2.5 / sd, 1.5 / sd, -1.5 / sd, -2.5 / sd],
    rtol=1e-12,
  )


def test_unit_test_rewards_all_codes_correct():
  gen = [[T, T, F], [T, F, F]]
  # no incorrect codes: +1 for a test every correct
  # code passes, else -1; invalid -> -(0 + 1)
  assert R.unit_test_raw_rewards([T, T], gen, [T, T, F]).tolist() == [
    1.0,
    -1.0,
    -1.0,
  ]
  np.testing.assert_allclose(
    R.unit_test_rewards([T, T], gen, [T, T, T]),
    [2 / math.sqrt(2), -1 / math.sqrt(2), -1 / math.sqrt(2)],
  )


def test_unit_test_rewards_no_correct_code_is_zero_signal():
  assert R.unit_test_rewards([F, F], [[T, F], [F, F]], [T, T]).tolist() == [
    0.0,
    0.0,
  ]
  with pytest.raises(ValueError, match="at least one correct"):
    R.unit_test_raw_rewards([F, F], [[T, F], [F, F]], [T, T])


def test_unit_test_rewards_all_invalid_tests():
  # every test invalid -> equal raw rewards -> zero after standardisation
  assert (
    R.unit_test_rewards(GT_CODE, GEN_PASS, [F, F, F, F]).tolist() == [0.0] * 4
  )


def test_unit_test_rewards_shape_errors():
  with pytest.raises(ValueError, match="rows"):
    R.unit_test_rewards([T, F], GEN_PASS, VALID)
  with pytest.raises(ValueError, match="valid"):
    R.unit_test_rewards(GT_CODE, GEN_PASS, [T, T])


def test_coding_metrics_hand_example():
  task_a = (
    np.array([[T, T], [T, F], [F, F], [T, T]]),
    GEN_PASS,
    VALID,
  )  # 2/4 correct codes
  task_b = (
    np.array([[F], [F]]),
    np.array([[T, F, T], [F, F, F]]),
    [T, T, T],
  )  # no correct code
  task_c = (
    np.array([[T], [T]]),
    np.array([[T, F], [T, T]]),
    [T, T],
  )  # all correct
  tasks = [task_a, task_b, task_c]
  m = R.coding_metrics(
    [t[0] for t in tasks], [t[1] for t in tasks], [t[2] for t in tasks]
  )
  # code: (2 + 0 + 2) / (4 + 2 + 2); ut: A has u0, u1 correct (u3 invalid), C
  # has its first test -> 3/6; detect: only A has both kinds; u0 alone also
  # rejects every incorrect code -> 1/4.
  assert m == {
    "code": pytest.approx(0.5),
    "ut": pytest.approx(0.5),
    "detect": pytest.approx(0.25),
  }
  assert R.coding_metrics([task_b[0]]) == {
    "code": 0.0,
    "ut": 0.0,
    "detect": 0.0,
  }
