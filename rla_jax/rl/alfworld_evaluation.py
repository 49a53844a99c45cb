"""The ALFWorld loop's evaluation: policy success on the in- and
out-of-distribution games (paired against the start evaluation) and the
judge's accuracy on fixed reference trajectories.

`AlfWorldEvaluation` is a mixin of `AlfworldLoop`
(rla_jax/rl/alfworld_loop.py): it reads the loop's config, eval games,
samplers (`_rollouts`, `_judge`, `_sampling`) and keeps `rm_reference` and
`eval_start` on it.
"""

from __future__ import annotations

import os
import time

import numpy as np

from rla_jax.metrics import keys
from rla_jax.rl import evaluation
from rla_jax.rl.alfworld_rollout import Episode
from rla_jax.rl.judge_accuracy import StepVotes, step_votes
from rla_jax.rl.loop_common import uses_given_models
from rla_jax.rl.seeds import derive_seed
from rla_jax.rl.start_evaluation import (
  StartEvaluation,
  disagreements,
  record_path,
  start_key,
  start_settings,
)

BUILD_START = "python launch/build_start_eval.py --config=alfworld"


class AlfWorldEvaluation:
  """Evaluation methods of the ALFWorld loop."""

  def _eval_rollouts(
    self, name: str, timings: dict, limit: int | None = None
  ) -> list:
    """eval.rollouts_per_game rollouts of every game of eval split `name`,
    with that split's fixed seed (the same episodes for the same policy);
    with `limit`, only its first `limit` runs (the same row seeds, so the
    same episodes as in the full evaluation).

    Episode r * G + g is rollout r of game g (G games), so the first G
    episodes are one rollout of each game whatever the count. Run r * G + g
    draws its sampling noise at turn t from its own stream, named by (split
    seed, t, r * G + g) (`rollout_episodes`' row seeds), at every
    evaluation: its draws at the start and at the end of training are the
    same whichever other runs have ended. Success is the
    mean over all (game, rollout) runs, as the reference reports it (its
    periodic AlfWorld evaluation plays 3 rollouts per game).
    """
    c = self.config
    games = list(self.eval_games[name]) * c.eval.rollouts_per_game
    games = games[:limit] if limit is not None else games
    i = list(self.eval_games).index(name)
    return self._rollouts(
      games,
      [g.game_id for g in games],
      derive_seed(c.eval.seed, 10 + i),
      self._sampling(c.eval),
      timings,
      max_steps=c.eval.max_steps,
      phase=f"eval {name}",
    )

  def reference_episodes(self, records: list[dict]) -> list:
    """The judge's reference episodes from their records
    (Episode.reference_record), on this run's OOD games."""
    ood = {g.game_id: g for g in self.eval_games["out_of_distribution"]}
    return [
      Episode.from_reference_record(r, ood[r["task_id"]]) for r in records
    ]

  def start_record(self) -> StartEvaluation | None:
    """The recorded start evaluation named by config.eval.start_cache if it
    was made for this run's settings (`start_key`); None, with a log line
    saying why, if none is named or found, or it is for other settings."""
    c = self.config
    value = c.eval.get("start_cache", "")
    if not value or uses_given_models(c):
      return None
    path = record_path(value)
    if not os.path.exists(path):
      self.log(
        f"config.eval.start_cache: no start evaluation at {path} (build it "
        f"with: {BUILD_START}): evaluating in full"
      )
      return None
    record = StartEvaluation.load(path)
    want = start_key(start_settings(c, self.warm_start.config_hash))
    if record.key != want:
      self.log(
        f"config.eval.start_cache: {path} was made for other settings (key "
        f"{record.key}, this run's {want}; rebuild it with: {BUILD_START} "
        f"plus this run's overrides): evaluating in full"
      )
      return None
    return record

  def _recorded_start(self, record: StartEvaluation) -> dict | None:
    """The record's metrics row if this run reproduces it: the first
    eval.start_check_runs runs of each split are replayed and must end
    exactly as recorded. On success the loop keeps the record's per-run
    outcomes and reference episodes, as after a full start evaluation;
    otherwise None, with a log line (the caller evaluates in full)."""
    c = self.config
    k = c.eval.start_check_runs
    t0 = time.perf_counter()
    replayed = {
      name: [int(e.won) for e in self._eval_rollouts(name, {}, limit=k)]
      for name in self.eval_games
    }
    off = disagreements(record.outcomes["won"], replayed)
    seconds = time.perf_counter() - t0
    if any(off.values()):
      self.log(
        f"eval (start): the recorded start evaluation disagrees with this "
        f"machine on {off} of its first {k} runs per split: evaluating in "
        f"full"
      )
      return None
    self.eval_start = evaluation.StartOutcomes.restore(
      record.outcomes, evaluation.pairing_settings(c.eval), self.log
    )
    self.rm_reference = self.reference_episodes(record.rm_reference)
    runs = {name: len(w) for name, w in record.outcomes["won"].items()}
    self.log(
      f"eval (start): recorded ({record.provenance.get('command', '?')}, "
      f"commit {record.provenance.get('commit', '?')}), {runs} runs; its "
      f"first {k} runs of each split replayed identically in {seconds:.0f}s"
    )
    self._keep_outcomes(0, record.outcomes["won"])
    return {
      **record.metrics,
      # The record's own full evaluation time (on the machine that made
      # it): the replay's time scaled up is mostly its compilations.
      keys.EVAL_FULL_SECONDS_ESTIMATE: float(
        record.provenance.get("seconds", seconds)
      ),
      keys.EVAL_START_RECORDED: 1.0,
      keys.EVAL_START_CHECK_RUNS: float(k),
      keys.EVAL_SECONDS: seconds,
    }

  def _keep_outcomes(self, row: int, won) -> None:
    """Evaluation `row`'s per-run outcomes into the workdir (primary)."""
    if self.is_primary:
      evaluation.write_run_outcomes(self.workdir, row, won)

  def reference_rollouts(self, n: int) -> list:
    """The current policy's first n out-of-distribution evaluation runs:
    at the start, the judge's reference episodes (its first
    eval.num_rm_episodes) and, for a larger n, more of the same kind."""
    return self._eval_rollouts("out_of_distribution", {}, limit=n)

  def judge_reference_scores(self, episodes) -> tuple[np.ndarray, np.ndarray]:
    """The current judge's m votes on every step of the episodes: (scores
    [N, K, m], mask [N, K]). The first eval.num_rm_episodes are judged
    alone with the evaluation's judge seed, exactly as `evaluate` judges
    its reference (a judge batch's layout can flip a vote), the rest with
    a seed of their own."""
    n = self.config.eval.num_rm_episodes
    seed = derive_seed(self.config.eval.seed, 20)  # evaluate's
    parts = [(0, n, seed), (n, len(episodes), derive_seed(seed, 1))]
    judged = [self._judge(episodes[lo:hi], s) for lo, hi, s in parts if hi > lo]
    K = max(j.mask.shape[1] for j in judged)
    scores = np.concatenate(
      [
        np.pad(j.scores, ((0, 0), (0, K - j.scores.shape[1]), (0, 0)))
        for j in judged
      ]
    )
    mask = np.concatenate(
      [np.pad(j.mask, ((0, 0), (0, K - j.mask.shape[1]))) for j in judged]
    )
    return scores, mask

  def judge_step_votes(self, episodes, labels) -> StepVotes:
    """The current judge's majority votes on every step of the episodes
    (labels: the expert's, `evaluation.process_labels`), judged as
    `judge_reference_scores` judges them."""
    return step_votes(*self.judge_reference_scores(episodes), labels)

  def _ensure_rm_reference(self, timings: dict) -> None:
    """Without an evaluation before training (eval.at_start off, e.g. the
    ablation's later stages), the reference trajectories are rolled out
    before the first update: the same episodes that evaluation would
    keep (only those runs are played: each run's noise is its own).
    Their wall time goes to timings["judge_reference"]."""
    if self.rm_reference is None:
      t0 = time.perf_counter()
      n = self.config.eval.num_rm_episodes
      self.rm_reference = self.reference_rollouts(n)
      timings["judge_reference"] = time.perf_counter() - t0

  def evaluate(self, step: int) -> dict:
    """Policy success on the ID and OOD games, and the judge's accuracy on
    the reference trajectories; eval/seconds is its wall time.

    Every evaluation uses the same seeds (common random numbers), so the
    change between two evaluations is not blurred by fresh sampling noise:
    the evaluation before training (step -1) keeps its per-run outcomes
    (in the checkpoint) and every later one logs, per split, its success
    change paired against them, with the paired standard error
    (`evaluation.success_metrics`). The judge is scored on fixed
    trajectories, as in the paper (Qwen3-32B labels of the base policy's
    OOD trajectories): the OOD episodes of the first evaluation, kept in
    the checkpoint. Scoring it on the current policy's trajectories would
    mix its change with the policy's.
    """
    c = self.config
    if step < 0 and self.eval_start is None:
      record = self.start_record()
      recorded = record and self._recorded_start(record)
      if recorded:
        return recorded
    t0, t, won, parsed = time.perf_counter(), {}, {}, {}
    for name in self.eval_games:  # the same seeds at every evaluation
      t_split = time.perf_counter()
      eps = self._eval_rollouts(name, t)
      won[name] = [int(e.won) for e in eps]
      parsed[f"eval/{name}/policy_parsed_rate"] = evaluation.policy_parsed_rate(
        eps
      )
      when = "start" if step < 0 else f"after step {step + 1}"
      self.log(
        f"eval ({when}) {name}: {len(eps)} runs, success "
        f"{np.mean(won[name]):.3f}, {time.perf_counter() - t_split:.0f}s"
      )
      if name == "out_of_distribution" and self.rm_reference is None:
        self.rm_reference = eps[: c.eval.num_rm_episodes]
    self._keep_outcomes(step + 1, won)
    first = self.eval_start is None and step < 0  # the start evaluation
    if first:
      self.eval_start = evaluation.StartOutcomes.of(
        won, evaluation.pairing_settings(c.eval)
      )
    start = None if first or self.eval_start is None else self.eval_start.won
    out = evaluation.success_metrics(won, start)
    refs = self.rm_reference
    judged = self._judge(refs, derive_seed(c.eval.seed, 20))
    out.update(
      evaluation.judge_metrics(
        judged.scores,
        judged.mask,
        evaluation.process_labels(refs),
        np.array([e.won for e in refs]),
      )
    )
    out.update(parsed)
    if first:
      out[keys.EVAL_START_RECORDED] = 0.0
    out[keys.EVAL_SECONDS] = time.perf_counter() - t0
    return out
