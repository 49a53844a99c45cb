"""Runs the RLAnything closed loop. The same command runs on every host.

  python launch/tpu_run.py --config=alfworld [--workdir=DIR]
  python launch/tpu_run.py --config=alfworld:smoke --config.total_steps=2
  python launch/tpu_run.py --config=coding --config.seed=3

`--config=NAME[:PRESET]` resolves NAME to configs/NAME.py (a path to any
config file also works); `--config.a.b=value` overrides any field. A run
resumes from the latest Orbax checkpoint in --workdir. On a multi-host TPU
VM slice or GPU cluster, run this same command on every worker (see
docs/SCALING.md); jax.distributed is initialised from the environment.
"""

from __future__ import annotations

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from absl import app, flags, logging
from ml_collections import config_flags

from launch.cli import (
  enable_compilation_cache,
  exit_on_sigterm,
  fail,
  log,
  parse_flags_or_fail,
  resolve_config_arg,
)
from rla_jax.errors import ConfigError

_CONFIG = config_flags.DEFINE_config_file(
  "config",
  None,
  "Config: NAME[:PRESET] (configs/NAME.py) or a path.",
  lock_config=True,
)
_WORKDIR = flags.DEFINE_string(
  "workdir",
  None,
  "Run directory (checkpoints, metrics, TensorBoard); "
  "default runs/<config name>-<preset>.",
)


def main(argv):
  del argv
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config is required (e.g. --config=alfworld)")
  workdir = _WORKDIR.value or os.path.join(
    _REPO, "runs", f"{config.name}-{config.preset}"
  )
  enable_compilation_cache()
  exit_on_sigterm()
  from rla_jax.cluster import maybe_initialize_distributed
  from rla_jax.rl.loops import make_loop

  try:
    # Before any JAX computation: one of several hosts joins the others.
    maybe_initialize_distributed()
  except ConfigError as e:
    fail(e)

  log(f"rla_jax: config {config.name}:{config.preset}, workdir {workdir}")
  try:
    loop = make_loop(config, workdir, log=log)
  except ConfigError as e:  # bad input: one message, no traceback
    fail(e)  # any other error is a bug: it keeps its traceback
  loop.run()


def run():
  sys.argv = resolve_config_arg(sys.argv)
  # Library INFO logs (Orbax writes several lines per checkpoint) are
  # hidden; --verbosity=0 brings them back. Progress goes to stderr.
  logging.set_verbosity(logging.WARNING)
  app.run(main, flags_parser=_parse_flags)


def _parse_flags(argv: list[str]) -> list[str]:
  """Parses flags; a bad config file, preset or override is one message."""
  return parse_flags_or_fail(argv, _CONFIG)


if __name__ == "__main__":
  run()
