"""The judge's change over a finished ALFWorld run, measured with low noise.

  python launch/judge_eval.py --workdir=runs/alfworld [--episodes=64]

The loop scores its judge on config.eval.num_rm_episodes reference
episodes (the start policy's first out-of-distribution evaluation runs).
This tool takes the run's config from its run_record.json, loads the
warm start (the start judge) and the run's last checkpoint (the final
judge) and judges the first --episodes of those runs (the same
episodes the loop's reference starts with, and more) with both, with
the same vote seeds, then reports balanced process accuracy at both ends
and its change with a paired cluster-bootstrap standard error
(rla_jax/rl/judge_change.py). Two tables: "all" (every episode) and
"loop_reference" (the loop's own reference episodes, judged exactly as
the loop judges them: its rows 0 and last must agree, which
"loop_rows" reports). It also reports where consistency feedback pushes
each judge on those steps (`judge_change.consistency_target`): the
balanced accuracy of that push against the expert's labels, beside the
judge's own; and each judge's +1 share beside the labels' by the verb of
the step's action and the episode's outcome (`judge_change.votes_by_verb`:
where the judge's step signal and the expert's labels differ). Writes
--out (default WORKDIR/judge_eval.json).

The episodes depend only on the start policy and the eval settings, so
--episodes_cache=PATH keeps them for runs of other stages or seeds.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from absl import app, flags, logging

from launch.cli import enable_compilation_cache, fail, log, provenance
from rla_jax.errors import ConfigError
from rla_jax.metrics.keys import (
  EVAL_RM_POSITIVE_RATE,
  EVAL_RM_PROCESS_BALANCED_ACCURACY,
)

_WORKDIR = flags.DEFINE_string(
  "workdir", None, "A finished ALFWorld run (run_record.json, checkpoints)."
)
_EPISODES = flags.DEFINE_integer(
  "episodes", 64, "Reference episodes to judge (>= eval.num_rm_episodes)."
)
_EPISODES_CACHE = flags.DEFINE_string(
  "episodes_cache", "", "JSON file keeping the rolled-out episodes."
)
_OUT = flags.DEFINE_string("out", "", "Default: WORKDIR/judge_eval.json.")
_DRAWS = flags.DEFINE_integer("draws", 2000, "Bootstrap resamples.")

_ARGV: list[str] = []


def run_config(workdir: str):
  """The config a finished run ran (its run_record.json); ConfigError
  naming what is missing (the record, or the checkpoints)."""
  import ml_collections

  from rla_jax.metrics.run_record import RECORD_FILE

  path = os.path.join(workdir, RECORD_FILE)
  if not os.path.exists(path):
    raise ConfigError(f"--workdir={workdir}: no {RECORD_FILE} (not finished)")
  with open(path) as f:
    config = ml_collections.ConfigDict(json.load(f)["config"])
  if config.name != "alfworld":
    raise ConfigError(f"{path}: config.name {config.name!r} is not alfworld")
  if not os.path.isdir(os.path.join(workdir, "checkpoints")):
    raise ConfigError(f"--workdir={workdir}: no checkpoints/ (final judge)")
  return config


def check_episodes(config, episodes: int) -> None:
  """--episodes must cover the loop's reference episodes and fit in the
  out-of-distribution runs they are the first of."""
  lo = config.eval.num_rm_episodes
  hi = config.eval.num_games * config.eval.rollouts_per_game
  if not lo <= episodes <= hi:
    raise ConfigError(
      f"--episodes={episodes} must be in [eval.num_rm_episodes={lo}, "
      f"the out-of-distribution runs {hi}]"
    )


def reference_episodes(loop, n: int, cache: str) -> list:
  """The first n out-of-distribution eval runs of the start policy (the
  loop's reference episodes are the first eval.num_rm_episodes of them),
  from `cache` when it holds them for these settings, else rolled out
  (and kept there)."""
  from rla_jax.rl.evaluation import pairing_settings

  key = {
    "warm_start": loop.warm_start.config_hash,
    "eval": pairing_settings(loop.config.eval),
    "env": loop.config.env.to_dict(),
    "episodes": n,
  }
  key = json.loads(json.dumps(key, default=str))
  if cache and os.path.exists(cache):
    with open(cache) as f:
      kept = json.load(f)
    if kept["key"] == key:
      log(f"judge_eval: {n} reference episodes from {cache}")
      return loop.reference_episodes(kept["episodes"])
    log(f"judge_eval: {cache} holds other episodes; rolling out")
  episodes = loop.reference_rollouts(n)
  if cache:
    with open(cache, "w") as f:
      json.dump(
        {"key": key, "episodes": [e.reference_record() for e in episodes]}, f
      )
  return episodes


def loop_rows_agree(history, table: dict) -> str:
  """ "agree" when the run's first and last logged judge balanced accuracy
  and +1 vote rate equal the loop-reference table's start and end (nan,
  a class without a step, equals nan), else "DISAGREE"."""
  pairs = []
  for key, name in (
    (EVAL_RM_PROCESS_BALANCED_ACCURACY, "balanced"),
    (EVAL_RM_POSITIVE_RATE, "positive_rate"),
  ):
    for row, end in ((history[0], "start"), (history[-1], "end")):
      logged = row.get(key)
      pairs.append(
        (math.nan if logged is None else logged, table[f"{name}_{end}"])
      )
  ok = all(same_value(a, b) for a, b in pairs)
  return "agree" if ok else "DISAGREE"


def same_value(a: float, b: float) -> bool:
  """a == b to 1e-9, or both nan."""
  return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, abs_tol=1e-9)


def score_run(workdir: str, episodes: int, cache: str, draws: int) -> dict:
  """Judges the reference episodes with the start and the final judge of
  the run in workdir; returns the record judge_eval.json holds."""
  from rla_jax.metrics.writer import MetricsWriter
  from rla_jax.rl.evaluation import process_labels
  from rla_jax.rl.judge_accuracy import step_votes
  from rla_jax.rl.judge_change import (
    StepVotes,
    consistency_target,
    judge_change,
    outcome_shares,
    votes_by_verb,
  )
  from rla_jax.rl.loops import make_loop

  config = run_config(workdir)
  check_episodes(config, episodes)
  t0 = time.perf_counter()
  loop = make_loop(config, workdir, log=log)
  refs = reference_episodes(loop, episodes, cache)
  labels = process_labels(refs)
  won = [e.won for e in refs]
  lam = config.reward.lam
  actions = [e.actions for e in refs]
  targets, by_verb = {}, {}
  start_scores = loop.judge_reference_scores(refs)
  targets["start"] = consistency_target(*start_scores, won, labels, lam)
  by_verb["start"] = votes_by_verb(actions, won, *start_scores, labels)
  step = loop.restore() - 1  # the final judge
  end_scores = loop.judge_reference_scores(refs)
  targets["end"] = consistency_target(*end_scores, won, labels, lam)
  by_verb["end"] = votes_by_verb(actions, won, *end_scores, labels)
  start = step_votes(*start_scores, labels)
  end = step_votes(*end_scores, labels)
  n = config.eval.num_rm_episodes
  in_ref = start.episode < n

  def subset(v):
    return StepVotes(v.votes[in_ref], v.labels[in_ref], v.episode[in_ref])

  tables = {
    "all": judge_change(start, end, draws=draws).record(),
    "loop_reference": judge_change(
      subset(start), subset(end), draws=draws
    ).record(),
  }
  history = MetricsWriter.read_history(workdir)
  loop.checkpointer.close()
  return {
    "checkpoint_step": step,
    **tables,
    "episodes": outcome_shares(refs, labels),
    "consistency_target": {k: t.record() for k, t in targets.items()},
    "votes_by_verb": by_verb,
    "loop_rows": loop_rows_agree(history, tables["loop_reference"]),
    "seconds": round(time.perf_counter() - t0, 1),
    "provenance": provenance(_ARGV),
  }


def main(argv):
  del argv
  workdir = _WORKDIR.value
  if not workdir:
    raise app.UsageError("--workdir is required")
  enable_compilation_cache()
  try:
    result = score_run(
      workdir, _EPISODES.value, _EPISODES_CACHE.value, _DRAWS.value
    )
  except ConfigError as e:
    fail(e)
  out = _OUT.value or os.path.join(workdir, "judge_eval.json")
  with open(out, "w") as f:
    json.dump(result, f, indent=1)
  for name in ("all", "loop_reference"):
    t = result[name]
    log(
      f"judge_eval {name}: balanced {t['balanced_start']:.3f} -> "
      f"{t['balanced_end']:.3f} ({t['change']:+.3f} +- {t['stderr']:.3f} "
      f"paired s.e., {t['num_steps']} steps of {t['num_episodes']} "
      f"episodes); +1 rate {t['positive_rate_start']:.3f} -> "
      f"{t['positive_rate_end']:.3f} (labels {t['label_positive_rate']:.3f})"
    )
  for end, t in result["consistency_target"].items():
    log(
      f"judge_eval consistency target ({end} judge): pushes "
      f"{t['pushed_steps']} of {t['num_steps']} steps, balanced "
      f"{t['balanced']:.3f} (toward +1 labels {t['toward_plus']:.3f}, "
      f"toward -1 labels {t['toward_minus']:.3f}) vs the judge's own "
      f"{t['judge_balanced']:.3f} on them"
    )
  for verb, cells in result["votes_by_verb"]["start"].items():
    log(
      f"judge_eval start judge, {verb!r} steps: "
      + "; ".join(
        f"{outcome} {c['steps']}: labels +1 {c['label_plus']:.2f}, "
        f"judge +1 {c['judge_plus']:.2f}"
        for outcome, c in cells.items()
      )
    )
  log(f"judge_eval: loop rows {result['loop_rows']}; wrote {out}")


if __name__ == "__main__":
  _ARGV[:] = sys.argv
  logging.set_verbosity(logging.WARNING)
  app.run(main)
