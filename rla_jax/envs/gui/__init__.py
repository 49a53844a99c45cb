"""GUI environments of RLAnything: the Qwen3-VL computer-use action format
and batched screenshot environments (MiniWoB++ in headless Chromium; an
OSWorld adapter). No JAX here.

- ``parse_action`` (reply -> ``GuiAction`` | ``InvalidAction``;
  ``rla_jax.envs.gui.action_parser``), ``tool_call_reply``,
  ``grid_to_pixel`` / ``pixel_to_grid`` (``rla_jax.envs.gui.actions``)
- ``GuiObservation``, ``GuiEnvironment`` (``rla_jax.envs.gui.interface``)
- ``MiniWobEnvironment``, ``MiniWobConfig`` (``rla_jax.envs.gui.miniwob``;
  task ids: ``rla_jax.envs.gui.miniwob_tasks.task_ids``;
  needs Chromium, chromedriver, selenium and miniwob)
- ``OSWorldEnvironment``, ``replay_trajectory``, ``pyautogui_command``
  (``rla_jax.envs.gui.osworld``; a live VM needs the desktop-env package)
- ``draw_action``, ``save_episode_frames`` (``rla_jax.envs.gui.render``)
"""

from rla_jax.envs.gui.action_parser import parse_action
from rla_jax.envs.gui.actions import (
  ACTION_KINDS,
  GuiAction,
  InvalidAction,
  grid_to_pixel,
  pixel_to_grid,
  tool_call_reply,
)
from rla_jax.envs.gui.interface import GuiEnvironment, GuiObservation

__all__ = [
  "ACTION_KINDS",
  "GuiAction",
  "GuiEnvironment",
  "GuiObservation",
  "InvalidAction",
  "grid_to_pixel",
  "parse_action",
  "pixel_to_grid",
  "tool_call_reply",
]
