"""The coding loop's evaluation: Code / UT / Detect and the tests' program
selection on the eval tasks, paired against the start evaluation.

`CodingEvaluation` is a mixin of `CodingLoop` (rla_jax/rl/coding_loop.py):
it reads the loop's config, eval tasks, sandbox executor, reference
programs and `_play`, and keeps `eval_start` and `eval_rule_logged` on it.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from rla_jax.envs.coding import coding_metrics
from rla_jax.envs.coding.evaluation import (
  code_outcomes,
  selection_metrics,
  ut_outcomes,
)
from rla_jax.metrics import keys
from rla_jax.rl import evaluation

# The config.eval settings that define the coding eval's runs (with env.*,
# reward.* and seed, which the checkpoint fingerprint fixes): a later
# evaluation is paired with the start one only if these are unchanged.
CODING_PAIRING_FIELDS = (
  "num_tasks",
  "seed",
  "temperature",
  "top_p",
  "greedy",
  "programs_per_task",
  "tests_per_task",
)


@dataclasses.dataclass(frozen=True)
class EvalOutcomes:
  """The eval runs' results, per eval task: gt_pass [P] (programs passing
  the task's tests), gen_pass [P, U] (program p passing generated test u),
  valid_tests [U] and reference_pass (`_reference_pass`); runs: the
  per-run "code" and "ut" outcomes (`code_outcomes`, `ut_outcomes`)."""

  gt_pass: list[np.ndarray]
  gen_pass: list[np.ndarray]
  valid_tests: list[np.ndarray]
  reference_pass: list[np.ndarray | None]
  runs: dict[str, list]

  @property
  def by_reference(self) -> bool:
    """Whether every eval task has a reference program to judge tests."""
    return all(r is not None for r in self.reference_pass)


class CodingEvaluation:
  """Evaluation methods of the coding loop."""

  def _references(self) -> list[str | None]:
    """Every eval task's reference program (None: none, or no
    reference_program callable)."""
    ref = self.reference_program
    return [None if ref is None else ref(t) for t in self.eval_tasks]

  def eval_pairing_settings(self) -> dict:
    """What defines the eval's runs beyond the fingerprinted env.*,
    reward.* (the tests' sampling) and seed: config.eval's
    CODING_PAIRING_FIELDS and which eval tasks have a reference program
    (their tests are judged by it)."""
    e = self.config.eval
    return {
      **{k: e[k] for k in CODING_PAIRING_FIELDS},
      "reference_tasks": [r is not None for r in self._references()],
    }

  def _reference_pass(self, played) -> list[np.ndarray | None]:
    """Per eval task, bool [U]: generated test u parsed and the task's
    reference program, run in the sandbox on its input, prints its
    expected output (`outputs_match`); None for a task without one."""
    out = []
    for task, ref, play in zip(
      self.eval_tasks, self._references(), played, strict=True
    ):
      if ref is None:
        out.append(None)
        continue
      valid = play.execution.valid_tests
      tests = [t if t is not None else ("", "") for t in play.tests]
      passed = (
        self.executor.run([ref], tests, task.time_limit_s).passed[0]
        if tests
        else np.zeros(0, bool)
      )
      out.append(passed & valid)
    return out

  def evaluate(self, step: int) -> dict:
    """Code / UT / Detect, selection and paired changes on the eval tasks.

    Every eval task gets eval.programs_per_task programs (sampled under
    config.eval) and eval.tests_per_task generated tests (under
    reward.test_sampling), from seeds derived from eval.seed alone: every
    evaluation samples program p (test u) of task n with the same seed
    (common random numbers), so runs pair across evaluations.

    eval/code: the pass-all rate over every (task, program);
    eval/selected_code, eval/random_code, eval/selection_gain (and its
    s.e. over the tasks, eval/selection_gain_stderr): the program
    the generated tests select, a uniform pick, their difference
    (`selection_metrics`); eval/detect: `coding_metrics`. eval/ut: with a
    reference program for every eval task, the share of generated tests
    the reference judges correct (`correct_tests`); otherwise
    `coding_metrics`' (tests passing every correct program, over tasks
    with one). Which rule is logged once. The evaluation before training
    (step -1) keeps its per-run code and UT outcomes (`code_outcomes`,
    `ut_outcomes`; in the checkpoint); every later one logs
    eval/{code,ut}_change and _change_stderr paired against them
    (`evaluation.paired_metrics`; eval/ut_change_start too where eval/ut
    is not the mean of the UT outcomes), eval/{code,ut}_runs always.
    eval/seconds is its wall time.
    """
    t0 = time.perf_counter()
    outcomes = self._eval_outcomes(self._play_eval_tasks())
    out = {f"eval/{k}": v for k, v in self._eval_scores(outcomes).items()}
    self._log_eval_rules(outcomes.reference_pass)
    out.update(self._paired_changes(step, outcomes))
    out[keys.EVAL_SECONDS] = time.perf_counter() - t0
    return out

  def _play_eval_tasks(self) -> list:
    """Every eval task's programs and tests, sampled from eval.seed's
    seeds (not the step's: the same at every evaluation)."""
    c = self.config
    return self._play(
      self.eval_tasks,
      c.eval.seed,
      c.eval,
      {},
      c.eval.programs_per_task,
      c.eval.tests_per_task,
    )

  def _eval_outcomes(self, played) -> EvalOutcomes:
    """The played runs' execution results, the tests judged by the
    reference programs, and the per-run code and UT outcomes."""
    gt = [r.execution.gt_pass for r in played]
    gen = [r.execution.gen_pass for r in played]
    valid = [r.execution.valid_tests for r in played]
    reference_pass = self._reference_pass(played)
    runs = {
      "code": code_outcomes(gt),
      "ut": ut_outcomes(gt, gen, valid, reference_pass),
    }
    return EvalOutcomes(gt, gen, valid, reference_pass, runs)

  def _eval_scores(self, outcomes: EvalOutcomes) -> dict:
    """Code / UT / Detect (`coding_metrics`; UT by the reference programs
    where every task has one) and the tests' selection metrics."""
    o = outcomes
    m = coding_metrics(o.gt_pass, o.gen_pass, o.valid_tests)
    if o.by_reference:
      ut = o.runs["ut"]
      m["ut"] = float(np.mean(ut)) if ut else 0.0
    m.update(selection_metrics(o.gt_pass, o.gen_pass, o.valid_tests))
    return m

  def _paired_changes(self, step: int, outcomes: EvalOutcomes) -> dict:
    """eval/{code,ut}_runs and, after the start evaluation (which keeps its
    outcomes in eval_start), the changes paired against it."""
    first = self.eval_start is None and step < 0  # the start evaluation
    if first:
      self.eval_start = evaluation.StartOutcomes.of(
        outcomes.runs, self.eval_pairing_settings()
      )
    start = None if first or self.eval_start is None else self.eval_start.won
    out = {}
    for name, runs in outcomes.runs.items():
      paired = start is not None and len(runs) > 0
      out.update(
        evaluation.paired_metrics(
          keys.paired_keys(name),
          runs,
          start[name] if paired else None,
          with_change_start=name == "ut" and not outcomes.by_reference,
        )
      )
    return out

  def _log_eval_rules(self, reference_pass) -> None:
    """Once per run: which rule eval/ut follows (not a float metric), and
    that greedy eval samples P identical programs."""
    if self.eval_rule_logged:
      return
    self.eval_rule_logged = True
    n_ref = sum(r is not None for r in reference_pass)
    rule = (
      "correct by the task's reference program"
      if n_ref == len(reference_pass)
      else "correct when passing every correct sampled program, over "
      "tasks with one"
    )
    self.log(
      f"eval/ut: a generated test counts {rule} ({n_ref} of "
      f"{len(reference_pass)} eval tasks have a reference program)"
    )
    e = self.config.eval
    if e.greedy and e.programs_per_task > 1:
      self.log(
        f"config eval.greedy with eval.programs_per_task="
        f"{e.programs_per_task}: the programs of a task are all the same"
      )
