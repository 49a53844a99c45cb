"""Records the ALFWorld loop's start evaluation once, for every run to check
instead of repeating (rla_jax/rl/start_evaluation.py).

  python launch/build_start_eval.py --config=alfworld     # the shipped one

It takes the loop's config (the same --config=NAME[:PRESET] and --config.*
overrides as launch/tpu_run.py), loads the warm start the run would load,
plays the full start evaluation (every run of both splits and the judge on
its reference episodes) and writes the record to --out (default:
config.eval.start_cache) with its provenance: this command, the git commit,
the CPU and the seconds it took. Runs with the same settings then replay
only config.eval.start_check_runs runs of each split against it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

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
  "Config: NAME[:PRESET] (configs/NAME.py) or a path.",
  lock_config=True,
)
_OUT = flags.DEFINE_string(
  "out", None, "Where to write the record; default config.eval.start_cache."
)

_ARGV: list[str] = []  # the command as typed (before --config is rewritten)


def cpu_model() -> str:
  """The CPU's model name from /proc/cpuinfo ("unknown" without one)."""
  try:
    with open("/proc/cpuinfo") as f:
      lines = f.read().splitlines()
  except OSError:
    return "unknown"
  names = [
    ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")
  ]
  return f"{names[0]} x {len(names)}" if names else "unknown"


def main(argv):
  del argv
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config is required (e.g. --config=alfworld)")
  if config.name != "alfworld":
    fail(
      ConfigError(f"--config={config.name}: only alfworld records its start")
    )
  from rla_jax.rl.loops import make_loop
  from rla_jax.rl.start_evaluation import (
    StartEvaluation,
    record_path,
    start_key,
    start_settings,
  )

  out = _OUT.value or config.eval.start_cache
  if not out:
    fail(ConfigError("config.eval.start_cache is empty: pass --out=PATH"))
  out = record_path(out)
  enable_compilation_cache()
  with config.unlocked():
    config.eval.start_cache = ""  # evaluate in full (not part of the key)
  with tempfile.TemporaryDirectory() as workdir:
    try:
      loop = make_loop(config, workdir, log=log)
    except ConfigError as e:
      fail(e)
    if not hasattr(loop, "warm_start"):
      fail(ConfigError("a start evaluation is recorded for a warm start only"))
    t0 = time.perf_counter()
    metrics = loop.evaluate(-1)
    seconds = time.perf_counter() - t0
    settings = start_settings(config, loop.warm_start.config_hash)
    record = StartEvaluation(
      key=start_key(settings),
      settings=settings,
      metrics=metrics,
      outcomes=loop.eval_start.record(),
      rm_reference=[e.reference_record() for e in loop.rm_reference],
      provenance={
        **provenance(_ARGV),
        "cpu": cpu_model(),
        "seconds": round(seconds, 1),
      },
    )
    loop.metrics.close()
    loop.checkpointer.close()
  record.save(out)
  log(f"start evaluation ({seconds:.0f}s): {out}")
  for k, v in sorted(metrics.items()):
    log(f"  {k} = {v}")


def run():
  _ARGV[:] = sys.argv
  sys.argv = resolve_config_arg(sys.argv)
  logging.set_verbosity(logging.WARNING)
  app.run(main, flags_parser=lambda argv: parse_flags_or_fail(argv, _CONFIG))


if __name__ == "__main__":
  run()
