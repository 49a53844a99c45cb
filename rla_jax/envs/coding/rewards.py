"""Coding-setting rewards and metrics as pure functions over execution result
matrices.

Shapes: P = code samples of one task, T = ground-truth tests, U = generated
unit tests.
Follows the reference (``reward/llm_rl_reward.py`` of Gen-Verse/Open-AgentRL):
- policy reward: fraction of GT tests passed, z-scored within the task's P
  samples;
- unit-test reward: count-based discrimination of incorrect programs, z-scored
  over U;
- training band: tasks train only if the pass-all accuracy is in [0.2, 0.8];
- metrics Code (GT-pass-all acc), UT (syn_ut_acc) and Detect (perfect_ut_rate).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rla_jax.rl.advantages import group_zscore

ACC_LOW, ACC_HIGH = 0.2, 0.8


def _as_bool_matrix(name: str, m, rows: int | None = None) -> np.ndarray:
  a = np.asarray(m)
  if a.ndim != 2:
    raise ValueError(
      f"{name} must be a 2-D [rows, cols] matrix, got shape {a.shape}"
    )
  if rows is not None and a.shape[0] != rows:
    raise ValueError(f"{name} has {a.shape[0]} rows, expected {rows}")
  return a.astype(bool)


def pass_fraction(gt_pass) -> np.ndarray:
  """r_p = (1/T) sum_t gt_pass[p, t].   gt_pass: bool [P, T] -> float [P]."""
  m = _as_bool_matrix("gt_pass", gt_pass)
  if m.shape[1] == 0:
    raise ValueError(
      "gt_pass has no test columns (T == 0): a task needs ground-truth tests"
    )
  return m.mean(axis=1)


def code_rewards(gt_pass) -> np.ndarray:
  """Policy reward: group_zscore_p( (1/T) sum_t gt_pass[p, t] ).

  gt_pass: bool [P, T] (ground-truth test results of P code samples)
  -> float [P]. Unparseable samples should enter as all-False rows. All zeros
  when every sample scores the same.
  """
  return group_zscore(pass_fraction(gt_pass))


def gt_code_mask(gt_pass) -> np.ndarray:
  """c_p = AND_t gt_pass[p, t] ("GT code": passes every ground-truth test).
  bool [P, T] -> bool [P]."""
  m = _as_bool_matrix("gt_pass", gt_pass)
  return m.all(axis=1) & (m.shape[1] > 0)


def accuracy(gt_pass) -> float:
  """Task accuracy acc = (1/P) sum_p c_p, the pass-all proportion.
  bool [P, T] -> float."""
  mask = gt_code_mask(gt_pass)
  return float(mask.mean()) if mask.size else 0.0


def filter_by_accuracy_band(
  accs: Sequence[float], low: float = ACC_LOW, high: float = ACC_HIGH
) -> np.ndarray:
  """bool [N]: which of N tasks (given their accuracies) are inside the training
  band."""
  a = np.asarray(accs, dtype=np.float64)
  return (a >= low) & (a <= high)


def unit_test_raw_rewards(gt_code, gen_pass, valid) -> np.ndarray:
  """Raw unit-test reward before standardisation.

  With C = {p : gt_code[p]} (correct codes), W = the other codes, test u is a
  "GT UT" iff gen_pass[p, u] for every p in C. Then
    |W| > 0:  r_u = #{p in W : not gen_pass[p, u]}   if u is a GT UT
              r_u = -#{p in W : gen_pass[p, u]}      otherwise
    |W| = 0:  r_u = +1 if u is a GT UT else -1
    invalid (unparseable) tests: r_u = -(|W| + 1), strictly below any valid test
      (deviation: the reference executes the empty test and ignores validity).
  Requires |C| >= 1 (the reference skips tasks without a correct code; see
  unit_test_rewards).

  gt_code: bool [P]; gen_pass: bool [P, U]; valid: bool [U] -> float [U].
  """
  c = np.asarray(gt_code, dtype=bool)
  if c.ndim != 1:
    raise ValueError(f"gt_code_mask must be 1-D [P], got shape {c.shape}")
  g = _as_bool_matrix("gen_pass", gen_pass, rows=c.shape[0])
  v = np.asarray(valid, dtype=bool)
  if v.shape != (g.shape[1],):
    raise ValueError(
      f"valid must have shape [U]=({g.shape[1]},), got {v.shape}"
    )
  if not c.any():
    raise ValueError(
      "unit_test_raw_rewards needs at least one correct code (gt_code all "
      "False)"
    )
  is_gt_ut = g[c].all(axis=0)  # [U]
  wrong = g[~c]  # [|W|, U]
  n_wrong = wrong.shape[0]
  if n_wrong == 0:
    raw = np.where(is_gt_ut, 1.0, -1.0)
  else:
    rejected = (~wrong).sum(axis=0)
    accepted = wrong.sum(axis=0)
    raw = np.where(is_gt_ut, rejected, -accepted).astype(np.float64)
  return np.where(v, raw, -(n_wrong + 1.0))


def unit_test_rewards(gt_code_mask, gen_pass, valid) -> np.ndarray:
  """Unit-test generator reward: group_zscore_u(unit_test_raw_rewards(...)).

  gt_code_mask: bool [P]; gen_pass: bool [P, U]; valid: bool [U] -> float [U].
  When no code is correct the group carries no signal (the reference skips it):
  zeros [U].
  """
  c = np.asarray(gt_code_mask, dtype=bool)
  if not c.any():
    _as_bool_matrix("gen_pass", gen_pass, rows=c.shape[0])
    return np.zeros(np.asarray(valid).shape[0], dtype=np.float64)
  return group_zscore(unit_test_raw_rewards(c, gen_pass, valid))


def coding_metrics(
  gt_pass_per_task: Sequence,
  gen_pass_per_task: Sequence | None = None,
  valid_per_task: Sequence | None = None,
) -> dict[str, float]:
  """Metrics over N tasks (paper names; reference names in brackets).

  code   [GT-pass-all acc]: (sum_n sum_p c_np) / (sum_n P_n), over every
         code sample.
  ut     [syn_ut_acc]: fraction of generated tests that pass all correct
         codes, over tasks with at least one correct code.
  detect [perfect_ut_rate]: fraction of generated tests that pass all correct
         codes AND fail all incorrect codes, over tasks having both kinds.
  Invalid generated tests count as not correct / not perfect.

  gt_pass_per_task[n]: bool [P_n, T_n]; gen_pass_per_task[n]: bool [P_n, U_n];
  valid_per_task[n]: bool [U_n].
  """
  n_codes = n_gt_codes = 0
  ut_total = ut_correct = det_total = det_perfect = 0
  for n, gt in enumerate(gt_pass_per_task):
    c = gt_code_mask(gt)
    n_codes += c.size
    n_gt_codes += int(c.sum())
    if gen_pass_per_task is None:
      continue
    g = _as_bool_matrix(
      f"gen_pass_per_task[{n}]", gen_pass_per_task[n], rows=c.size
    )
    v = (
      np.ones(g.shape[1], bool)
      if valid_per_task is None
      else np.asarray(valid_per_task[n], bool)
    )
    if g.shape[1] == 0 or not c.any():
      continue
    correct_ut = g[c].all(axis=0) & v
    ut_total += g.shape[1]
    ut_correct += int(correct_ut.sum())
    if (~c).any():
      det_total += g.shape[1]
      det_perfect += int((correct_ut & (~g[~c]).all(axis=0)).sum())
  return {
    "code": n_gt_codes / n_codes if n_codes else 0.0,
    "ut": ut_correct / ut_total if ut_total else 0.0,
    "detect": det_perfect / det_total if det_total else 0.0,
  }
