"""Loading a built ALFWorld warm start (the shipped default or one built by
`launch/build_warmstart.py`): checks, never builds.

A warm-start directory holds tokenizer/, policy/ and reward/ (Hugging Face
directories) and the marker warmstart.json: config_hash (of the resolved
warm-start config and the text formats, `config.config_hash`), config,
report and provenance (command, commit, dirty, date of the build).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from rla_jax.errors import ConfigError
from rla_jax.warmstart.config import config_hash
from rla_jax.warmstart.settings import override_flag

MARKER = "warmstart.json"
REQUIRED = (
  MARKER,
  "tokenizer/tokenizer.json",
  "policy/config.json",
  "policy/model.safetensors",
  "reward/config.json",
  "reward/model.safetensors",
)


@dataclasses.dataclass(frozen=True)
class WarmStart:
  """A warm start found on disk: its directory, the three model directories,
  the config hash it was built for, and its marker's provenance and report
  ({} when the marker has none)."""

  path: str
  tokenizer_dir: str
  policy_dir: str
  reward_dir: str
  config_hash: str
  provenance: dict[str, Any]
  report: dict[str, Any]

  def model_dirs(self) -> dict[str, str]:
    return {
      "tokenizer_dir": self.tokenizer_dir,
      "policy_dir": self.policy_dir,
      "reward_dir": self.reward_dir,
    }

  def describe(self) -> str:
    """One line: path, config hash, and the build's commit and date."""
    p = self.provenance
    commit = str(p.get("commit", "unknown"))[:12]
    if p.get("dirty"):
      commit += " (dirty tree)"
    return (
      f"{self.path} (config {self.config_hash[:12]}, commit {commit}, "
      f"built {p.get('date', 'unknown')})"
    )


def _missing(path: str) -> list[str]:
  return [f for f in REQUIRED if not os.path.isfile(os.path.join(path, f))]


def _flat(d: dict, prefix: str = "") -> dict[str, Any]:
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[prefix + k] = v
  return out


def _differences(built: dict, wanted: dict) -> dict[str, tuple]:
  """{key: (built value, wanted value)} for the keys where they differ."""
  a, b = _flat(built), _flat(json.loads(json.dumps(wanted)))
  return {
    k: (a.get(k), b.get(k))
    for k in sorted(set(a) | set(b))
    if a.get(k) != b.get(k)
  }


def _mismatch_error(path, have, want, built, wanted, build_command) -> str:
  diff = _differences(built, wanted)
  head = (
    f"config.warmstart.dir={path!r} holds the warm start of config "
    f"{have[:12]}, but this run's warm-start settings hash to {want[:12]}"
  )
  if not diff:
    return (
      f"{head}: the settings agree, so the prompt/answer text formats "
      f"changed since it was built; rebuild it with: {build_command} "
      f"--out={path} --overwrite (plus this run's --config.warmstart.* and "
      f"--config.env.* overrides, if any)"
    )
  changes = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items())
  flags = " ".join(override_flag(k, b) for k, (_, b) in diff.items())
  return (
    f"{head} (built -> this run: {changes}). Build one for this run with: "
    f"{build_command} {flags} --out=DIR (plus this run's other warm-start "
    f"overrides, if any), then run with --config.warmstart.dir=DIR"
  )


def load_warm_start_dir(
  path: str,
  settings: dict[str, Any],
  build_command: str,
  digest: str | None = None,
) -> WarmStart:
  """The warm start in `path`, checked against `settings` (the run's
  resolved warm-start config). ConfigError naming the path and the build
  command to run (`build_command`, e.g. "python launch/build_warmstart.py
  --config=alfworld") for a missing directory or file, an unreadable
  marker, or a marker built for other settings (both hashes, 12 chars)."""
  missing = _missing(path)
  if missing:
    what = (
      "the directory"
      if not os.path.isdir(path)
      else ", ".join(missing[:2]) + (" ..." if len(missing) > 2 else "")
    )
    raise ConfigError(
      f"config.warmstart.dir={path!r}: no warm start there (missing "
      f"{what}); build it with: {build_command} --out={path} (plus "
      f"this run's --config.warmstart.* and --config.env.* overrides, if "
      f"any)"
    )
  try:
    with open(os.path.join(path, MARKER)) as f:
      marker = json.load(f)
    have = str(marker["config_hash"])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ConfigError(
      f"config.warmstart.dir={path!r}: unreadable {MARKER} ({e}); rebuild "
      f"it with: {build_command} --out={path} --overwrite"
    ) from None
  want = digest or config_hash(settings)
  if have != want:
    raise ConfigError(
      _mismatch_error(
        path, have, want, marker.get("config", {}), settings, build_command
      )
    )
  return WarmStart(
    path=path,
    tokenizer_dir=os.path.join(path, "tokenizer"),
    policy_dir=os.path.join(path, "policy"),
    reward_dir=os.path.join(path, "reward"),
    config_hash=have,
    provenance=dict(marker.get("provenance") or {}),
    report=dict(marker.get("report") or {}),
  )
