"""The ALFWorld start evaluation, measured once and shipped beside the warm
start (`launch/build_start_eval.py`), then checked, not repeated, by every
run.

Every seed of the default evaluates the same warm start on the same games
with the same sampling seeds before training, so its start evaluation is
one computation: session 17 measured it bit-identical on an Intel and an
AMD CPU. At the 256 runs per split a 5-point change needs, it costs about
17 minutes on 2 cores, more than half the default's budget. A
`StartEvaluation` record keeps what the loop keeps of it (the per-run
outcomes later evaluations are paired against, the judge's reference
trajectories, the metrics row) under a key of every setting that defines
it (`start_key`). A run with the same key replays only the first
`eval.start_check_runs` runs of each split and uses the record only if
they reproduce it exactly (`disagreements`); otherwise it logs the
disagreement and evaluates in full. A record is never used silently for
other settings or another warm start.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence

from rla_jax.checkpoint import fingerprint
from rla_jax.errors import ConfigError

_REPO = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)

# config.eval fields that name or check the record rather than define runs.
_CACHE_FIELDS = ("start_cache", "start_check_runs", "every", "at_start")
# config.env fields that define the evaluation games and prompts.
_ENV_FIELDS = ("backend", "room_size", "levels", "task_types", "history_steps")
# config.reward fields that define the judge's evaluation votes.
_JUDGE_FIELDS = ("m", "judge_sampling", "max_new_tokens")
# config.model fields that change the numbers the models compute.
_MODEL_FIELDS = ("dtype", "param_dtype", "attention")
# config.rollout fields that change the policy's prompts or replies.
_ROLLOUT_FIELDS = ("max_prompt_len", "max_new_tokens")


def start_settings(config, warm_start_hash: str) -> dict:
  """Every setting that defines the start evaluation (JSON-able): the warm
  start's config hash and the config's eval, env, judge, model and rollout
  fields above."""

  def pick(section, names):
    return {k: section.to_dict().get(k) for k in names}

  return {
    "warm_start": warm_start_hash,
    "eval": {
      k: v for k, v in config.eval.to_dict().items() if k not in _CACHE_FIELDS
    },
    "env": pick(config.env, _ENV_FIELDS),
    "judge": pick(config.reward, _JUDGE_FIELDS),
    "model": pick(config.model, _MODEL_FIELDS),
    "rollout": pick(config.rollout, _ROLLOUT_FIELDS),
  }


def check_start_record_settings(eval_cfg) -> None:
  """ConfigError naming the key unless eval.start_cache is a string and
  eval.start_check_runs an int between 1 and the runs of a split."""
  value = eval_cfg.get("start_cache", "")
  if not isinstance(value, str):
    raise ConfigError(f"config eval.start_cache={value!r} must be a path or ''")
  k = eval_cfg.get("start_check_runs", 1)
  runs = eval_cfg.num_games * eval_cfg.rollouts_per_game
  if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= runs:
    raise ConfigError(
      f"config eval.start_check_runs={k!r} must be an int in [1, {runs}] "
      f"(eval.num_games x eval.rollouts_per_game)"
    )


def record_path(value: str) -> str:
  """config.eval.start_cache as an absolute path (relative ones are
  relative to the directory holding the rla_jax package)."""
  return os.path.normpath(os.path.join(_REPO, value))


def start_key(settings: Mapping) -> str:
  """The record's key: a stable hash of `start_settings`."""
  return fingerprint(dict(settings))


@dataclasses.dataclass(frozen=True)
class StartEvaluation:
  """One start evaluation, as the loop keeps it.

  key: `start_key` of settings; metrics: its metrics row (eval/ keys);
  outcomes: evaluation.StartOutcomes.record() ([N] 0/1 per split);
  rm_reference: the judge's reference episodes (Episode.reference_record);
  provenance: how it was made (command, commit, CPU, seconds).
  """

  key: str
  settings: dict
  metrics: dict
  outcomes: dict
  rm_reference: list
  provenance: dict

  def save(self, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
      json.dump(dataclasses.asdict(self), f, separators=(",", ":"))
      f.write("\n")
    os.replace(tmp, path)

  @classmethod
  def load(cls, path: str) -> StartEvaluation:
    """The record at `path`; ConfigError naming the file if it is
    unreadable or lacks a field."""
    try:
      with open(path) as f:
        d = json.load(f)
      return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)})
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ConfigError(
        f"config.eval.start_cache={path!r}: unreadable start evaluation "
        f"({type(e).__name__}: {e}); rebuild it with "
        f"python launch/build_start_eval.py --config=alfworld"
      ) from None


def disagreements(
  cached: Mapping[str, Sequence[int]], replayed: Mapping[str, Sequence[int]]
) -> dict[str, int]:
  """Per split, how many of the replayed runs' outcomes differ from the
  record's first runs (replayed[split] is [k] outcomes of runs 0..k-1);
  ValueError if a split is missing or the record holds fewer runs."""
  out = {}
  for split, runs in replayed.items():
    if split not in cached or len(cached[split]) < len(runs):
      raise ValueError(
        f"start evaluation record has no {len(runs)} runs of split {split!r}"
      )
    out[split] = sum(
      int(a) != int(b) for a, b in zip(cached[split], runs, strict=False)
    )
  return out
