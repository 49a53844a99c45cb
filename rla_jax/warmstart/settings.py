"""A preset's warm-start settings and directory, as the loop and the build
command both derive them (neither needs the other's code).
"""

from __future__ import annotations

import os

#: Where the project's shipped warm starts live (inside the package).
SHIPPED_ROOT = os.path.join(
  os.path.dirname(os.path.abspath(__file__)), "shipped"
)


def warmstart_settings(config) -> dict:
  """config.warmstart.settings with the fields the loop fixes: the warm
  start's own seed (warmstart.seed, not the RL seed, so RL runs of several
  seeds share one warm start), the room size, levels and history window of
  the prompts the loop renders."""
  settings = config.warmstart.settings.to_dict()
  h = config.env.history_steps
  settings.update(
    seed=config.warmstart.seed,
    room_size=config.env.room_size,
    levels=list(config.env.levels),
    history_steps=None if h is None or h < 0 else int(h),
  )
  return settings


def warmstart_dir(config) -> str:
  """config.warmstart.dir; a relative one is under SHIPPED_ROOT."""
  path = config.warmstart.get("dir", "") or config.warmstart.name
  return path if os.path.isabs(path) else os.path.join(SHIPPED_ROOT, path)
