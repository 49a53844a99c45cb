"""Frozen dataclasses built from config sections by field name.

`from_section` fills every field of a dataclass from the key of the same
name in an `ml_collections.ConfigDict` (or dict), so a setting is never
copied by hand and a field cannot be out of the config's reach: a field
missing from the section, a section key no field (and no other reader)
takes, and a value of the wrong type each raise one ConfigError naming the
config key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from rla_jax.errors import ConfigError

# Annotation (a string under postponed evaluation) -> accepted value types.
_SCALAR_TYPES = {
  "float": (int, float),
  "int": (int,),
  "bool": (bool,),
  "str": (str,),
}


def _check_type(annotation: str, value: Any, key: str) -> Any:
  """`value` for a field annotated `annotation` (lists become tuples)."""
  if annotation.startswith("tuple"):
    if not isinstance(value, list | tuple):
      raise ConfigError(f"{key}: expected a tuple, got {value!r}")
    return tuple(value)
  accepted = _SCALAR_TYPES.get(annotation)
  if accepted is not None and (
    not isinstance(value, accepted)
    or (annotation != "bool" and isinstance(value, bool))
  ):
    raise ConfigError(f"{key}: expected {annotation}, got {value!r}")
  return value


def from_section(
  cls: type,
  section: Mapping[str, Any],
  *,
  where: str,
  given: Mapping[str, Any] | None = None,
  other_keys: Iterable[str] = (),
):
  """`cls(**fields)` with each field read from `section[field name]`.

  Args:
    cls: a dataclass.
    section: the config section (ConfigDict or dict).
    where: the section's config path, e.g. "config.optim.policy", used in
      error messages ("config.optim.policy.b1").
    given: fields the caller supplies (not config keys; a section key of
      the same name is refused as ambiguous).
    other_keys: section keys read by other code (accepted, not passed).

  Raises:
    ConfigError: naming the key of a missing field, of a key no field or
      other reader takes, of a given field also set in the section, or of
      a value of the wrong type.
  """
  given = dict(given or {})
  fields = {f.name: f for f in dataclasses.fields(cls)}
  keys = set(section.keys())
  clash = sorted(keys & set(given))
  if clash:
    raise ConfigError(
      f"{where}.{clash[0]}: not a config key (the program sets it)"
    )
  unknown = sorted(keys - set(fields) - set(other_keys))
  if unknown:
    raise ConfigError(
      f"{where}.{unknown[0]}: unknown key; {cls.__name__} fields are "
      f"{sorted(set(fields) - set(given))}, other readers take "
      f"{sorted(other_keys)}"
    )
  missing = sorted(set(fields) - keys - set(given))
  if missing:
    raise ConfigError(
      f"{where}.{missing[0]}: missing key (every {cls.__name__} field "
      f"must be set; missing {missing})"
    )
  values = {
    name: _check_type(str(fields[name].type), section[name], f"{where}.{name}")
    for name in fields
    if name not in given
  }
  return cls(**values, **given)
