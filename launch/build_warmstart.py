"""Builds the warm start a run's config asks for (the RL loops only load
one): ALFWorld's policy and judge, or coding's coder and unit-test
generator.

  python launch/build_warmstart.py --config=alfworld          # the shipped
  python launch/build_warmstart.py --config=coding            # the shipped
  python launch/build_warmstart.py --config=alfworld:smoke    # for tests
  python launch/build_warmstart.py --config=alfworld \\
      --config.warmstart.settings.policy_sft.steps=400 --out=/tmp/ws
  python launch/build_warmstart.py --config=alfworld \\
      --config.warmstart.settings.rm_sft.steps=600 --out=/tmp/ws \\
      --reuse_from=rla_jax/warmstart/shipped/alfworld   # a new judge only

It takes the loop's config (the same --config=NAME[:PRESET] and
--config.* overrides as launch/tpu_run.py), derives the warm-start settings
exactly as the loop does (`rla_jax.warmstart.settings`), and builds into
--out (default: config.warmstart.dir). The marker out/warmstart.json records
the config hash, config, report and provenance (this command, the git
commit, whether the tree was dirty, the UTC date). A run then uses it with
--config.warmstart.dir=OUT. An --out holding a warm start for other settings
is refused unless --overwrite.
"""

from __future__ import annotations

import json
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from absl import app, flags, logging
from ml_collections import config_flags

from launch.cli import (
  enable_compilation_cache,
  fail,
  log,
  parse_flags_or_fail,
  provenance,
  resolve_config_arg,
)
from rla_jax.errors import ConfigError

_CONFIG = config_flags.DEFINE_config_file(
  "config",
  None,
  "The run's config: NAME[:PRESET] (configs/NAME.py) or a path.",
  lock_config=True,
)
_OUT = flags.DEFINE_string(
  "out", None, "Output directory; default config.warmstart.dir."
)
_WORK_DIR = flags.DEFINE_string(
  "work_dir", None, "Directory for the build's intermediate files."
)
_REUSE_FROM = flags.DEFINE_string(
  "reuse_from",
  None,
  "(alfworld) A finished warm start whose drill and policy settings equal "
  "this build's: its policy is reused and only the judge is trained.",
)
_OVERWRITE = flags.DEFINE_bool(
  "overwrite",
  False,
  "Replace a warm start for other settings already in --out.",
)

_ARGV: list[str] = []  # the command as typed (before --config is rewritten)


def check_out_dir(out_dir: str, digest: str, overwrite: bool) -> None:
  """ConfigError if out_dir holds a warm start for other settings (or an
  unreadable marker) and overwrite is off: never replace one silently."""
  from rla_jax.warmstart.directory import MARKER

  path = os.path.join(out_dir, MARKER)
  if overwrite or not os.path.exists(path):
    return
  try:
    with open(path) as f:
      have = str(json.load(f)["config_hash"])
  except (OSError, ValueError, KeyError, TypeError):
    have = "unreadable"
  if have != digest:
    raise ConfigError(
      f"--out={out_dir!r} holds a warm start for config {have[:12]}, not "
      f"this one ({digest[:12]}); choose another --out or pass --overwrite"
    )


def _coding_build(config):
  """(out_dir, digest, build) of the coding warm start."""
  from rla_jax.warmstart import coding_settings as cs

  settings = cs.warmstart_settings(config)
  out_dir = (
    os.path.abspath(_OUT.value)
    if _OUT.value
    else cs.coding_warm_start_dir(config.warmstart.dir)
  )
  if out_dir is None:
    raise ConfigError(
      "config warmstart.dir is '' (no warm start): pass --out=DIR"
    )
  if _REUSE_FROM.value:
    raise ConfigError(
      "--reuse_from is for --config=alfworld (the coding build has no "
      "policy stages to reuse)"
    )

  def build(**kw):
    from rla_jax.warmstart.coding_build import build_coding_warm_start

    return build_coding_warm_start(settings, out_dir, **kw)

  return out_dir, cs.coding_config_hash(settings), build


def _alfworld_build(config):
  """(out_dir, digest, build) of the ALFWorld warm start."""
  from rla_jax.warmstart import settings as ws
  from rla_jax.warmstart.config import config_hash

  settings = ws.resolved_settings(config)  # bad settings fail here
  out_dir = (
    os.path.abspath(_OUT.value)
    if _OUT.value
    else ws.warm_start_dir(config.warmstart.dir)
  )

  reuse_from = _REUSE_FROM.value and os.path.abspath(_REUSE_FROM.value)
  if reuse_from:  # refused here, before any work, if it cannot be reused
    from rla_jax.warmstart.build import reused_policy
    from rla_jax.warmstart.config import policy_stages_hash

    reused_policy(reuse_from, policy_stages_hash(settings))

  def build(**kw):
    from rla_jax.warmstart.build import build_warm_start

    return build_warm_start(settings, out_dir, reuse_from=reuse_from, **kw)

  return out_dir, config_hash(settings), build


_BUILDERS = {"alfworld": _alfworld_build, "coding": _coding_build}


def main(argv):
  del argv
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config is required (e.g. --config=alfworld)")
  try:
    if config.name not in _BUILDERS:
      raise ConfigError(
        f"config.name {config.name!r}: build_warmstart.py builds the "
        f"warm starts of {sorted(_BUILDERS)} (--config=NAME[:PRESET])"
      )
    out_dir, digest, build = _BUILDERS[config.name](config)
    check_out_dir(out_dir, digest, _OVERWRITE.value)
  except ConfigError as e:  # bad input: one message, no traceback
    fail(e)
  enable_compilation_cache()
  log(f"build_warmstart: {config.name}:{config.preset} -> {out_dir}")
  build(work_dir=_WORK_DIR.value, provenance=provenance(_ARGV), log=log)
  log(f"build_warmstart: done; run with --config.warmstart.dir={out_dir}")


def _parse_flags(argv: list[str]) -> list[str]:
  """Parses flags; a bad config file, preset or override is one message."""
  return parse_flags_or_fail(argv, _CONFIG)


if __name__ == "__main__":
  _ARGV[:] = sys.argv
  sys.argv = resolve_config_arg(sys.argv)
  logging.set_verbosity(logging.WARNING)
  app.run(main, flags_parser=_parse_flags)
