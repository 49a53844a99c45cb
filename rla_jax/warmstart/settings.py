"""A run's ALFWorld warm-start settings and directory, as both the RL loop
(which loads the warm start) and `launch/build_warmstart.py` (which builds
it) derive them from the run's config. Imports no builder.

config.warmstart holds:
  dir       the built warm start's directory: absolute, or relative to the
            directory that holds the rla_jax package (the repository root
            in a checkout), so a config means the same directory from any
            working directory; "" = the shipped default, SHIPPED_DIR
            (rla_jax/warmstart/shipped/alfworld)
  seed      the warm start's own seed (RL runs with other seeds share it)
  settings  every field of rla_jax/warmstart/config.py except DERIVED
"""

from __future__ import annotations

import copy
import os
import shlex
from typing import Any

from rla_jax.errors import ConfigError
from rla_jax.warmstart.config import default_warmstart_config, resolve_config

# Warm-start fields the loop sets from other config keys (the warm start
# must see the prompts the loop renders): config.warmstart.settings does not
# list them, and one set there is refused as an unknown key rather than
# silently replaced.
DERIVED = {
  "seed": "warmstart.seed",
  "room_size": "env.room_size",
  "levels": "env.levels",
  "history_steps": "env.history_steps",
}

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED_DIR = os.path.join(_PACKAGE, "warmstart", "shipped", "alfworld")

BUILD_SCRIPT = "python launch/build_warmstart.py"


def listed_settings(overrides: dict) -> dict[str, Any]:
  """A preset's config.warmstart.settings: every default field (so any can
  be overridden with --config.warmstart.settings.<field>) except DERIVED,
  updated by the preset's `overrides` (nested dicts merge key by key). Pure
  data: nothing is validated here (the loop and the build command do)."""
  out = default_warmstart_config()
  for key in DERIVED:
    del out[key]
  for key, value in copy.deepcopy(overrides).items():
    if isinstance(out.get(key), dict) and isinstance(value, dict):
      out[key].update(value)
    else:
      out[key] = value
  return out


def history_steps(env) -> int | None:
  """env.history_steps as the prompts use it: None (the whole history)
  when it is None or negative."""
  h = env.history_steps
  return None if h is None or h < 0 else int(h)


def warmstart_settings(config) -> dict[str, Any]:
  """The warm start's settings for a run: config.warmstart.settings with
  DERIVED set from warmstart.seed (not the RL seed, so RL runs with
  different seeds share one warm start), env.room_size, env.levels and
  env.history_steps. ConfigError for a DERIVED key in the settings."""
  c = config
  settings = c.warmstart.settings.to_dict()
  for key, source in DERIVED.items():
    if key in settings:
      raise ConfigError(
        f"warm-start config: unknown key {key!r} in "
        f"config.warmstart.settings (it is set from config.{source})"
      )
  settings.update(
    seed=c.warmstart.seed,
    room_size=c.env.room_size,
    levels=list(c.env.levels),
    history_steps=history_steps(c.env),
  )
  return settings


def resolved_settings(config) -> dict[str, Any]:
  """warmstart_settings resolved against the defaults: ConfigError naming
  the key of an unknown field or a bad value (cheap: no model work)."""
  return resolve_config(warmstart_settings(config))


def warm_start_dir(value: str) -> str:
  """config.warmstart.dir as an absolute path (see the module docstring)."""
  if not isinstance(value, str):
    raise ConfigError(f"config warmstart.dir={value!r} must be a string")
  if not value:
    return SHIPPED_DIR
  return os.path.normpath(os.path.join(os.path.dirname(_PACKAGE), value))


def build_command(config) -> str:
  """The build command for this run's config and preset (without the
  run's --config.* overrides, which the caller adds)."""
  name, preset = config.name, config.get("preset", "default")
  spec = name if preset == "default" else f"{name}:{preset}"
  return f"{BUILD_SCRIPT} --config={spec}"


def override_flag(key: str, value) -> str:
  """The --config.* flag that sets resolved warm-start field `key` (dotted,
  e.g. "policy_sft.steps") to `value`; a DERIVED field is set through its
  source key."""
  top = key.split(".")[0]
  if top == "levels":
    value = "(" + "".join(f"{int(v)}," for v in value) + ")"
  elif top == "history_steps" and value is None:
    value = -1
  path = DERIVED.get(top, f"warmstart.settings.{key}")
  return shlex.quote(f"--config.{path}={value}")
