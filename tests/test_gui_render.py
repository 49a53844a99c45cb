"""Rendering actions onto screenshots (synthetic frames, no browser)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from rla_jax.envs.gui.actions import GuiAction, InvalidAction
from rla_jax.envs.gui.render import (
  MARK_COLOUR,
  MOVE_COLOUR,
  draw_action,
  save_episode_frames,
)

WHITE = np.full((420, 320, 3), 255, dtype=np.uint8)


def changed(before, after):
  return np.any(before != after, axis=-1)


def test_a_click_is_marked_at_its_pixel_and_captioned():
  frame = draw_action(WHITE, GuiAction("left_click", x=100, y=60))
  assert frame.shape == WHITE.shape and frame.dtype == np.uint8
  assert tuple(frame[60, 100]) == MARK_COLOUR  # the crosshair's centre
  assert tuple(WHITE[60, 100]) == (255, 255, 255)  # input untouched
  marked = changed(WHITE, frame)
  rows, cols = np.nonzero(marked[:300])
  assert abs(rows.mean() - 60) < 3 and abs(cols.mean() - 100) < 3
  assert marked[-5:].any()  # the caption band at the bottom


def test_drags_scrolls_moves_and_invalid_actions_draw_differently():
  drag = draw_action(
    WHITE, GuiAction("left_click_drag", x=250, y=200, start_x=50, start_y=200)
  )
  assert changed(WHITE, drag)[200, 60:240].all()  # the arrow's shaft
  scroll = draw_action(
    WHITE, GuiAction("scroll", x=160, y=200, scroll_pixels=5)
  )
  assert changed(WHITE, scroll)[180:200, 160].all()  # points up
  assert not changed(WHITE, scroll)[201:230, 160].any()
  move = draw_action(WHITE, GuiAction("mouse_move", x=160, y=100))
  assert (move[:300] == MOVE_COLOUR).all(axis=-1).any()
  invalid = draw_action(WHITE, InvalidAction("no <tool_call> block"))
  assert (
    not changed(WHITE, invalid)[:300].any() and changed(WHITE, invalid).any()
  )
  typed = draw_action(WHITE, GuiAction("type", text="abc"))
  assert not np.array_equal(typed, invalid)


def test_episode_frames_are_written_in_order(tmp_path):
  actions = [GuiAction("left_click", x=10, y=10), GuiAction("double_click")]
  paths = save_episode_frames([WHITE] * 3, actions, tmp_path / "frames")
  assert [path.name for path in paths] == [
    "step_000.png",
    "step_001.png",
    "step_002.png",
  ]
  # The double click at the cursor is drawn where the first click was.
  second = np.asarray(Image.open(paths[1]))
  assert tuple(second[10, 10]) == MARK_COLOUR
  with pytest.raises(ValueError, match="3 screenshots for 1 actions"):
    save_episode_frames([WHITE] * 3, actions[:1], tmp_path)
