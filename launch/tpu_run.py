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

from absl import app, flags, logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

CONFIG_DIR = os.path.join(_REPO, "configs")


def resolve_config_arg(argv: list[str]) -> list[str]:
  """Rewrites --config=NAME[:PRESET] to the config file path.

  Raises SystemExit with a clear message for an unknown config name.
  """
  out = []
  for arg in argv:
    if arg.startswith("--config="):
      value = arg[len("--config="):]
      name, _, preset = value.partition(":")
      if not name.endswith(".py"):
        path = os.path.join(CONFIG_DIR, f"{name}.py")
        if not os.path.isfile(path):
          known = sorted(f[:-3] for f in os.listdir(CONFIG_DIR)
                         if f.endswith(".py") and f not in ("__init__.py",
                                                            "common.py"))
          raise SystemExit(f"error: unknown config {name!r}; known configs: "
                           f"{', '.join(known)} (or a path to a .py file)")
        value = path + (f":{preset}" if preset else "")
      arg = "--config=" + value
    out.append(arg)
  return out


_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Config: NAME[:PRESET] (configs/NAME.py) or a path.",
    lock_config=True)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Run directory (checkpoints, metrics, TensorBoard); "
    "default runs/<config name>-<preset>.")


def _enable_compilation_cache() -> None:
  """Persistent XLA cache: restarts and resumed runs skip recompiling."""
  import jax  # pylint: disable=import-outside-toplevel
  path = os.environ.get("RLA_JAX_XLA_CACHE", os.path.join(
      os.path.expanduser("~"), ".cache", "rla_jax", "xla"))
  if path:
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def _log(msg: str) -> None:
  print(msg, file=sys.stderr, flush=True)


def main(argv):
  del argv
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config is required (e.g. --config=alfworld)")
  workdir = _WORKDIR.value or os.path.join(
      _REPO, "runs", f"{config.name}-{config.preset}")
  _enable_compilation_cache()
  from rla_jax.rl.loops import make_loop  # pylint: disable=import-outside-toplevel
  _log(f"rla_jax: config {config.name}:{config.preset}, workdir {workdir}")
  try:
    loop = make_loop(config, workdir, log=_log)
  except _SETUP_ERRORS as e:  # bad input: one message, no traceback
    _fail(e)
  loop.run()


_SETUP_ERRORS = (ValueError, KeyError, FileNotFoundError, AttributeError)


def _fail(e: BaseException) -> None:
  msg = e.args[0] if isinstance(e, (KeyError, AttributeError)) and e.args \
      else str(e)
  if "Traceback" in msg:  # ml_collections embeds the config's traceback
    msg = [line for line in msg.splitlines() if line.strip()][-1]
  print(f"error: {msg}", file=sys.stderr, flush=True)
  sys.exit(2)


def run():
  sys.argv = resolve_config_arg(sys.argv)
  # Library INFO logs (Orbax writes several lines per checkpoint) are
  # hidden; --verbosity=0 brings them back. Progress goes to stderr.
  logging.set_verbosity(logging.WARNING)
  app.run(main, flags_parser=_parse_flags)


def _parse_flags(argv: list[str]) -> list[str]:
  """Parses flags; a bad config file, preset or override is one message."""
  try:
    rest = flags.FLAGS(argv)
    _CONFIG.value  # pylint: disable=pointless-statement
    return rest
  except flags.Error as e:
    _fail(e.__cause__ or e)
  except _SETUP_ERRORS as e:
    _fail(e)


if __name__ == "__main__":
  run()
