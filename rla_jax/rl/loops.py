"""Config name -> closed-loop implementation."""

from __future__ import annotations

from rla_jax.errors import ConfigError

MESH_KEYS = ("data", "fsdp", "tensor")


def check_common_config(config) -> None:
  """Checks the sections every loop shares (model, mesh) before any work.

  Raises ConfigError naming the key and value: model.dtype and
  model.param_dtype must be dtypes the loops know, model.remat a remat
  policy of the model, model.attention an attention implementation, and
  mesh.data/fsdp/tensor ints >= 1, at most one of them -1 (the remaining
  devices). Whether the devices divide into the mesh
  is checked when the mesh is built (the device count is known only after
  jax.distributed is initialised).
  """
  from rla_jax.models.attention import IMPLEMENTATIONS
  from rla_jax.models.qwen import REMAT_POLICIES
  from rla_jax.rl.loop_common import DTYPES

  for key in ("dtype", "param_dtype"):
    value = config.model[key]
    if value not in DTYPES:
      raise ConfigError(
        f"config model.{key}={value!r} must be one of {sorted(DTYPES)}"
      )
  if config.model.remat not in REMAT_POLICIES:
    raise ConfigError(
      f"config model.remat={config.model.remat!r} must be one of "
      f"{sorted(REMAT_POLICIES)}"
    )
  if config.model.attention not in IMPLEMENTATIONS:
    raise ConfigError(
      f"config.model.attention={config.model.attention!r} must be one of "
      f"{list(IMPLEMENTATIONS)}"
    )
  sizes = {key: config.mesh[key] for key in MESH_KEYS}
  for key, size in sizes.items():
    is_int = isinstance(size, int) and not isinstance(size, bool)
    if not is_int or not (size >= 1 or size == -1):
      raise ConfigError(
        f"config mesh.{key}={size!r} must be an int >= 1 or -1 (the "
        f"remaining devices)"
      )
  if list(sizes.values()).count(-1) > 1:
    raise ConfigError(
      f"config mesh: at most one of mesh.data/fsdp/tensor may be -1, got "
      f"{sizes}"
    )


def make_loop(config, workdir: str, **kw):
  """Builds the loop named by config.name ("alfworld", "coding" or
  "gui").

  Bad configuration or input raises ConfigError (before any model is loaded
  or compiled); anything else is a bug and propagates as it is.
  """
  if config.name not in ("alfworld", "coding", "gui"):
    raise ConfigError(
      f"config.name {config.name!r}: no loop of that name "
      f"(known: alfworld, coding, gui)"
    )
  check_common_config(config)
  if config.name == "alfworld":
    from rla_jax.rl.alfworld_loop import AlfworldLoop

    return AlfworldLoop(config, workdir, **kw)
  if config.name == "gui":
    from rla_jax.rl.gui_loop import GuiLoop

    return GuiLoop(config, workdir, **kw)
  from rla_jax.rl.coding_loop import CodingLoop

  return CodingLoop(config, workdir, **kw)
