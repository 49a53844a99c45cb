"""A finished run's record: the exact config it ran.

An ablation is many 20-30 minute runs, more than one session or machine
can hold, and a run's Orbax checkpoints (about 150 MB for the ALFWorld
default) are too large to keep or carry. What the ablation's table needs
is small: the run's metrics (`metrics.jsonl`), its final per-run outcomes
(`eval_outcomes.json`) and this record. With the three in a workdir,
`launch/ablation.py` reads the run instead of running it again, and only
if the record's config is the one it would run: a run made with another
config is refused by name, never silently reused.
"""

from __future__ import annotations

import json
import os

import ml_collections

from rla_jax.checkpoint import fingerprint
from rla_jax.errors import ConfigError
from rla_jax.metrics.writer import MetricsWriter

RECORD_FILE = "run_record.json"


def config_hash(config: ml_collections.ConfigDict) -> str:
  """Hash of the whole resolved config (every key, optimiser included;
  the checkpoint fingerprint covers only what fixes shapes and meaning)."""
  return fingerprint(config.to_dict())


def write_run_record(
  workdir: str, config: ml_collections.ConfigDict, **labels
) -> str:
  """Writes workdir/run_record.json: the config, its hash and `labels`
  (e.g. stage and seed). Returns the file's path."""
  path = os.path.join(workdir, RECORD_FILE)
  record = {
    "config_hash": config_hash(config),
    "total_steps": int(config.total_steps),
    **labels,
    "config": json.loads(json.dumps(config.to_dict(), default=str)),
  }
  with open(path, "w") as f:
    json.dump(record, f, indent=1, sort_keys=True)
  return path


def finished_run(workdir: str, config: ml_collections.ConfigDict) -> bool:
  """Whether `workdir` holds a finished run of exactly `config`.

  True when its record's config hash equals config's and its metrics
  reach step config.total_steps with an evaluation there; False when it
  has no record (never run, or not finished). A record of another config,
  or one whose metrics stop short, raises ConfigError naming the file.
  """
  path = os.path.join(workdir, RECORD_FILE)
  if not os.path.exists(path):
    return False
  with open(path) as f:
    record = json.load(f)
  want = config_hash(config)
  if record.get("config_hash") != want:
    raise ConfigError(
      f"{path}: this run was made with config hash "
      f"{record.get('config_hash')}, but this run's config has {want}; "
      "use a new --out, or delete that workdir to run it again"
    )
  history = MetricsWriter.read_history(workdir)
  last = history[-1] if history else {}
  if last.get("step") != config.total_steps or not any(
    k.startswith("eval/") for k in last
  ):
    raise ConfigError(
      f"{path}: the record says finished, but {workdir}/metrics.jsonl "
      f"ends at step {last.get('step')} without the final evaluation of "
      f"step {config.total_steps}; delete that workdir to run it again"
    )
  return True
