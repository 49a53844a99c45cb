"""Builds the embedded warm start (tokenizer, policy, judge) of a preset.

    python launch/build_warmstart.py --config=alfworld [--out=DIR]
        [--work_dir=DIR] [--config.warmstart.settings.<field>=...]

Writes Hugging Face directories and `warmstart.json` (config hash, resolved
settings, training curves, final metrics and provenance: command, commit,
date) into --out (default: the preset's warmstart.dir). --work_dir keeps
finished stages and SFT checkpoints, so an interrupted build continues
where it stopped when run again with the same flags.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags
from ml_collections import config_flags

from launch.cli import log, parse_flags_or_fail, resolve_config_arg

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file[:preset], e.g. --config=alfworld."
)
_OUT = flags.DEFINE_string("out", "", "Output dir (default: warmstart.dir).")
_WORK_DIR = flags.DEFINE_string(
  "work_dir", "", "Resumable stages (default: <out>.work)."
)


def _git(*args: str) -> str:
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  try:
    return subprocess.run(
      ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"


def provenance(argv: list[str]) -> dict:
  """What built the warm start: the command, the commit, its state, when."""
  return {
    "command": " ".join(["python", *argv]),
    "commit": _git("rev-parse", "HEAD"),
    "dirty": bool(_git("status", "--porcelain")),
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
  }


def main(argv):
  del argv
  from rla_jax.warmstart.build import build_warm_start
  from rla_jax.warmstart.settings import warmstart_dir, warmstart_settings

  config = _CONFIG.value
  out = _OUT.value or warmstart_dir(config)
  build_warm_start(
    warmstart_settings(config),
    out,
    work_dir=_WORK_DIR.value or None,
    provenance=provenance(sys.argv),
    log=log,
  )


def _parse_flags(argv):
  return parse_flags_or_fail(resolve_config_arg(argv), _CONFIG)


if __name__ == "__main__":
  app.run(main, flags_parser=_parse_flags)
