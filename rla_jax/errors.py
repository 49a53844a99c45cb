"""The project's exception for bad configuration and user input."""

from __future__ import annotations


class ConfigError(ValueError):
  """A configuration value, key, file or directory given by the user is bad.

  Raised by the checks that validate a run's configuration and inputs before
  expensive work (config presets, `check_config`, warm-start settings, model
  directories and their config.json, the workdir's checkpoint
  compatibility). The message names the file, key or value. The launchers
  print a ConfigError as one `error: ...` line and exit 2; every other
  exception propagates with its traceback. A ValueError, so callers that
  catch ValueError keep working.
  """
