"""Command-line plumbing shared by the launchers (no flags defined here)."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
from typing import NoReturn

from absl import flags

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(_REPO, "configs")


def resolve_config_arg(argv: list[str]) -> list[str]:
  """Rewrites --config=NAME[:PRESET] to the config file path.

  Raises SystemExit with a clear message for an unknown config name.
  """
  out = []
  for arg in argv:
    if arg.startswith("--config="):
      value = arg[len("--config=") :]
      name, _, preset = value.partition(":")
      if not name.endswith(".py"):
        path = os.path.join(CONFIG_DIR, f"{name}.py")
        if not os.path.isfile(path):
          known = sorted(
            f[:-3]
            for f in os.listdir(CONFIG_DIR)
            if f.endswith(".py") and f not in ("__init__.py", "common.py")
          )
          raise SystemExit(
            f"error: unknown config {name!r}; known configs: "
            f"{', '.join(known)} (or a path to a .py file)"
          )
        value = path + (f":{preset}" if preset else "")
      arg = "--config=" + value
    out.append(arg)
  return out


def enable_compilation_cache() -> None:
  """Persistent XLA cache: restarts and resumed runs skip recompiling.

  Every program is cached, however quick its compile: the sampling
  programs (one per batch x prompt bucket) compile in ~0.45 s each, and
  the default's first three RL steps of 48 episodes compiled 351
  programs, 180 s of their 521 s (session 26, BENCHMARKS.md "ALFWorld RL
  step"). JAX's own threshold (1 s; 0.5 s here before) left the sampling
  programs out."""
  import jax

  path = os.environ.get(
    "RLA_JAX_XLA_CACHE",
    os.path.join(os.path.expanduser("~"), ".cache", "rla_jax", "xla"),
  )
  if path:
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    max_mb = int(os.environ.get("RLA_JAX_XLA_CACHE_MAX_MB", "2048"))
    max_bytes = -1 if max_mb < 0 else max_mb * 2**20
    jax.config.update("jax_compilation_cache_max_size", max_bytes)


def exit_on_sigterm() -> None:
  """SIGTERM (`kill`, a scheduler, a preempted TPU VM) raises
  SystemExit(128 + SIGTERM) in the main thread, so the run unwinds like a
  Ctrl-C: the loop's finally blocks close the GUI browsers and the coding
  sandbox, and the process exits with the shell's 143. Python's default
  action ended the process at once, leaving a GUI run's chromedriver and
  Chromium processes (48 for gui:smoke) running. The run resumes from its
  last checkpoint either way."""

  def handler(signum, frame):
    del frame
    log("rla_jax: SIGTERM: stopping (a rerun resumes from the last checkpoint)")
    raise SystemExit(128 + signum)

  signal.signal(signal.SIGTERM, handler)


def log(msg: str) -> None:
  print(msg, file=sys.stderr, flush=True)


# What parsing the flags raises for a bad config file, preset or
# --config.* override (ml_collections evaluates the config file and applies
# the overrides then). Only flag parsing catches these; once the flags are
# parsed, the launchers catch only rla_jax.errors.ConfigError (bad input),
# so any other error keeps its traceback.
FLAG_ERRORS = (ValueError, KeyError, FileNotFoundError, AttributeError)


def parse_flags_or_fail(argv: list[str], config_flag) -> list[str]:
  """Parses the absl flags and evaluates `config_flag` (a config_flags
  holder: its file, preset and overrides); a bad one is one message."""
  try:
    rest = flags.FLAGS(argv)
    _ = config_flag.value
    return rest
  except flags.Error as e:
    fail(e.__cause__ or e, key_error_prefix="unknown config key ")
  except FLAG_ERRORS as e:
    fail(e, key_error_prefix="unknown config key ")


def fail(e: BaseException, key_error_prefix: str = "") -> NoReturn:
  """Prints one "error: ..." line and exits 2. A KeyError's message (also
  one wrapped in an AttributeError, as ml_collections raises for an unknown
  nested key) gets `key_error_prefix`."""
  while (
    isinstance(e, (KeyError, AttributeError))
    and e.args
    and isinstance(e.args[0], BaseException)
  ):
    e = e.args[0]
  msg = (
    str(e.args[0])
    if isinstance(e, (KeyError, AttributeError)) and e.args
    else str(e)
  )
  lines = [line.strip() for line in msg.splitlines() if line.strip()]
  if "Traceback" in msg:  # ml_collections embeds the config's traceback
    lines = lines[-1:]
  msg = "; ".join(lines)
  if isinstance(e, KeyError):
    msg = key_error_prefix + msg
  print(f"error: {msg}", file=sys.stderr, flush=True)
  sys.exit(2)


def _git(*args: str) -> str | None:
  try:
    out = subprocess.run(
      ["git", *args], cwd=_REPO, capture_output=True, text=True, timeout=30
    )
  except (OSError, subprocess.SubprocessError):
    return None
  return out.stdout if out.returncode == 0 else None


def provenance(argv: list[str]) -> dict:
  """How this build was made: the command, the repository's commit
  ("unknown" outside a git checkout), whether its tree had uncommitted
  changes (None when unknown) and the UTC date."""
  commit = (_git("rev-parse", "HEAD") or "").strip() or "unknown"
  status = _git("status", "--porcelain")
  return {
    "command": " ".join(["python", *argv]),
    "commit": commit,
    "dirty": None if status is None else bool(status.strip()),
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
      timespec="seconds"
    ),
  }
