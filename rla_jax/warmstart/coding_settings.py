"""The coding warm start's settings, config hash and directory, as both the
coding loop (which loads the warm start) and `launch/build_warmstart.py`
(which builds it, `coding_build`) derive them from the run's config.
Imports no builder.

config.warmstart (configs/coding.py) holds:
  dir       the warm start's directory, absolute or relative to the
            repository root; "" = none: the loop builds tiny random-init
            models (`warmstart.coding.embedded_coding_models`), the
            mechanics-only path of the smoke preset and the tests
  seed      the warm start's own seed (RL runs with other seeds share it)
  settings  DEFAULTS' fields except DERIVED
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random

from rla_jax.envs.coding import select_family as sf
from rla_jax.errors import ConfigError
from rla_jax.warmstart.coding_data import program_example, test_example

# Fields the loop sets from other config keys.
DERIVED = {"seed": "warmstart.seed", "levels": "env.levels"}

DEFAULTS = {
  "seed": 0,
  "levels": [2, 3],  # the loop's task levels (probe and evaluation tasks)
  "sft_levels": [1, 2, 3],
  "train_tasks": 4000,
  "vocab_size": 1024,
  "model": {
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_layers": 4,
    "num_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 64,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
  },
  "coder_sft": {
    "steps": 2000,
    "batch_size": 16,
    "learning_rate": 2e-3,
    "length_multiple": 64,
    "eval_every": 50,
    "target": 0.3,
  },
  "tester_sft": {
    "steps": 2000,
    "batch_size": 16,
    "learning_rate": 2e-3,
    "length_multiple": 64,
    "eval_every": 50,
    "target": 0.45,
  },
  # Sampling of probes and evaluation: the loop's rollout temperature.
  "sampling": {
    "temperature": 1.0,
    "max_prompt_len": 512,
    "max_new_tokens": 160,
    "batch_size": 32,
  },
  "probe": {"tasks": 32, "samples": 4, "seed": 101},
  "eval": {"tasks": 64, "samples": 4, "seed": 202},
}


def _merge(base: dict, over: dict, path: str = "") -> dict:
  out = copy.deepcopy(base)
  for key, value in over.items():
    if key not in base:
      raise ConfigError(
        f"coding warm-start config: unknown key {path + key!r} (known: "
        f"{sorted(base)})"
      )
    if isinstance(base[key], dict):
      if not isinstance(value, dict):
        raise ConfigError(
          f"coding warm-start config: {path + key!r} must be a mapping"
        )
      out[key] = _merge(base[key], value, f"{path}{key}.")
    else:
      out[key] = list(value) if isinstance(value, (list, tuple)) else value
  return out


def resolve_coding_settings(settings: dict) -> dict:
  """DEFAULTS updated by `settings`: ConfigError naming an unknown key or a
  level outside the family's."""
  cfg = _merge(DEFAULTS, dict(settings))
  for key in ("levels", "sft_levels"):
    bad = [v for v in cfg[key] if v not in sf.LEVELS]
    if bad or not cfg[key]:
      raise ConfigError(
        f"coding warm-start config: {key}={cfg[key]!r} must be non-empty "
        f"levels of {sf.LEVELS}"
      )
  return cfg


def text_formats() -> dict[str, str]:
  """The prompts and answers the warm start trains on, for a fixed task:
  part of the config hash, so a format change is detected."""
  task = sf.build_select_task("sum", ["even"], 1, 0)
  return {
    "program": json.dumps(program_example(task, 0).__dict__),
    "test": json.dumps(test_example(task, random.Random(0)).__dict__),
  }


def coding_config_hash(cfg: dict) -> str:
  """sha256 of the resolved settings' canonical JSON and the text formats."""
  key = {"kind": "coding", "config": cfg, "formats": text_formats()}
  return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def warmstart_settings(config) -> dict:
  """The run's resolved warm-start settings: config.warmstart.settings with
  DERIVED set from warmstart.seed and env.levels; ConfigError for a
  DERIVED key in the settings, an unknown key or a bad level."""
  c = config
  settings = c.warmstart.settings.to_dict()
  for key, source in DERIVED.items():
    if key in settings:
      raise ConfigError(
        f"coding warm-start config: unknown key {key!r} in "
        f"config.warmstart.settings (it is set from config.{source})"
      )
  settings.update(seed=c.warmstart.seed, levels=list(c.env.levels))
  return resolve_coding_settings(settings)


def listed_settings() -> dict:
  """DEFAULTS without DERIVED: what configs/coding.py lists, so every
  field can be overridden with --config.warmstart.settings.<field>."""
  out = copy.deepcopy(DEFAULTS)
  for key in DERIVED:
    del out[key]
  return out


_REPO = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def coding_warm_start_dir(value: str) -> str | None:
  """config.warmstart.dir as an absolute path (relative values are taken
  from the directory that holds the rla_jax package); None for ""."""
  if not isinstance(value, str):
    raise ConfigError(f"config warmstart.dir={value!r} must be a string")
  if not value:
    return None
  return os.path.normpath(os.path.join(_REPO, value))
