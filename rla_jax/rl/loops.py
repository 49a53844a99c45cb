"""Config name -> closed-loop implementation."""

from __future__ import annotations


def make_loop(config, workdir: str, **kw):
  """Builds the loop named by config.name ("alfworld" or "coding")."""
  if config.name == "alfworld":
    from rla_jax.rl.alfworld_loop import AlfworldLoop

    return AlfworldLoop(config, workdir, **kw)
  if config.name == "coding":
    from rla_jax.rl.coding_loop import CodingLoop

    return CodingLoop(config, workdir, **kw)
  raise ValueError(
    f"config.name {config.name!r}: no loop of that name "
    f"(known: alfworld, coding)"
  )
