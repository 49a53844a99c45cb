"""Coding evaluation as the paper reports it: pure functions over one eval's
execution result matrices.

Shapes: N = eval tasks, P = programs sampled per task, T = ground-truth
tests, U = generated tests per task.

* Selection (best-of-P by the generated tests): the program the generated
  tests pick among the P samples, against a uniform pick
  (`selection_accuracy`, `selection_metrics`).
* Per-run records for pairing a later evaluation with the start one: one
  0/1 outcome per (task, program) (`code_outcomes`, [N * P]) and per
  (task, generated test) (`ut_outcomes`, [N * U]), run n * P + p (resp.
  n * U + u) being the same prompt and sampling seed at both ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.envs.coding.rewards import _as_bool_matrix, gt_code_mask


@dataclasses.dataclass(frozen=True)
class Selection:
  """One task's expected pass-all accuracy of the program the generated
  tests select (`selected`) and of a uniformly random program (`random`)."""

  selected: float
  random: float


def selection_accuracy(gt_pass, gen_pass, valid) -> Selection:
  """Accuracy of the program selected by the generated tests, exactly.

  With c_p = AND_t gt_pass[p, t] (program p passes every ground-truth
  test) and score_p = sum_u gen_pass[p, u] * valid[u] (valid generated
  tests program p passes), the selected set is S = argmax_p score_p (all
  ties) and a uniform pick among the ties is correct with probability
    selected = (1 / |S|) sum_{p in S} c_p        (no RNG)
    random   = (1 / P) sum_p c_p                 (the uniform baseline)
  Without a valid test every score is 0, S is all P programs and selected
  equals random.

  gt_pass: bool [P, T]; gen_pass: bool [P, U]; valid: bool [U] -> Selection.
  ValueError on P = 0 or mismatched shapes.
  """
  correct = gt_code_mask(gt_pass)
  P = correct.shape[0]
  if P == 0:
    raise ValueError("selection_accuracy needs at least one program (P = 0)")
  g = _as_bool_matrix("gen_pass", gen_pass, rows=P)
  v = np.asarray(valid, bool)
  if v.shape != (g.shape[1],):
    raise ValueError(
      f"valid must have shape [U]=({g.shape[1]},), got {v.shape}"
    )
  score = (g & v[None, :]).sum(axis=1)  # [P]
  tied = score == score.max()
  return Selection(
    selected=float(correct[tied].mean()), random=float(correct.mean())
  )


def selection_metrics(
  gt_pass_per_task: Sequence,
  gen_pass_per_task: Sequence,
  valid_per_task: Sequence,
) -> dict[str, float]:
  """Selection accuracies averaged over N tasks (`selection_accuracy`):
    selected_code  = (1/N) sum_n selected_n
    random_code    = (1/N) sum_n random_n
    selection_gain = selected_code - random_code
    selection_gain_stderr = std_n(selected_n - random_n) / sqrt(N)
                            (ddof 1; nan for N = 1)
  gt_pass_per_task[n]: bool [P_n, T_n]; gen_pass_per_task[n]: bool
  [P_n, U_n]; valid_per_task[n]: bool [U_n]. ValueError on N = 0.
  """
  per_task = [
    selection_accuracy(gt, gen, valid)
    for gt, gen, valid in zip(
      gt_pass_per_task, gen_pass_per_task, valid_per_task, strict=True
    )
  ]
  if not per_task:
    raise ValueError("selection_metrics needs at least one task (N = 0)")
  selected = float(np.mean([s.selected for s in per_task]))
  random = float(np.mean([s.random for s in per_task]))
  gains = np.array([s.selected - s.random for s in per_task])
  N = len(gains)
  stderr = float(gains.std(ddof=1) / np.sqrt(N)) if N > 1 else float("nan")
  return {
    "selected_code": selected,
    "random_code": random,
    "selection_gain": selected - random,
    "selection_gain_stderr": stderr,
  }


def code_outcomes(gt_pass_per_task: Sequence) -> list[int]:
  """Per-run code outcomes: o[n * P + p] = c_np = AND_t gt_pass_n[p, t]
  (1 iff program p of task n passes every ground-truth test).
  gt_pass_per_task[n]: bool [P, T_n] -> [N * P] of 0/1."""
  return [int(c) for gt in gt_pass_per_task for c in gt_code_mask(gt)]


def correct_tests(gt_pass, gen_pass, valid, reference_pass=None) -> np.ndarray:
  """Which of one task's U generated tests are correct.

  With a reference program (reference_pass: bool [U], the reference run on
  test u's input prints its expected output): correct_u = valid_u AND
  reference_pass_u. Without one (None), today's rule of `coding_metrics`:
  correct_u = valid_u AND gen_pass[p, u] for every p with c_p (passes every
  correct sampled program); a task with no correct program then has no
  correct test (all False: such a task's tests count 0 in the per-run
  record, where `coding_metrics` leaves the task out of ut).

  gt_pass: bool [P, T]; gen_pass: bool [P, U]; valid: bool [U] -> bool [U].
  """
  c = gt_code_mask(gt_pass)
  g = _as_bool_matrix("gen_pass", gen_pass, rows=c.shape[0])
  v = np.asarray(valid, bool)
  if v.shape != (g.shape[1],):
    raise ValueError(
      f"valid must have shape [U]=({g.shape[1]},), got {v.shape}"
    )
  if reference_pass is not None:
    r = np.asarray(reference_pass, bool)
    if r.shape != v.shape:
      raise ValueError(
        f"reference_pass must have shape [U]=({v.shape[0]},), got {r.shape}"
      )
    return r & v
  if not c.any():
    return np.zeros(v.shape, bool)
  return g[c].all(axis=0) & v


def ut_outcomes(
  gt_pass_per_task: Sequence,
  gen_pass_per_task: Sequence,
  valid_per_task: Sequence,
  reference_pass_per_task: Sequence | None = None,
) -> list[int]:
  """Per-run UT outcomes: o[n * U + u] = 1 iff generated test u of task n
  is correct (`correct_tests`, by task n's reference when
  reference_pass_per_task[n] is not None, else by its correct programs:
  0 for every test of a task with no correct program).
  gt_pass_per_task[n]: bool [P, T_n]; gen_pass_per_task[n]: bool [P, U];
  valid_per_task[n]: bool [U]; reference_pass_per_task[n]: bool [U] or
  None -> [N * U] of 0/1."""
  refs = reference_pass_per_task or [None] * len(gt_pass_per_task)
  return [
    int(ok)
    for gt, gen, valid, ref in zip(
      gt_pass_per_task, gen_pass_per_task, valid_per_task, refs, strict=True
    )
    for ok in correct_tests(gt, gen, valid, ref)
  ]
