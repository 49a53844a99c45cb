"""Draws GUI actions onto screenshots, to look at an episode's frames.

``draw_action`` marks a click (circle + crosshair, one ring per extra click
of a double click), a move (hollow circle), a drag (arrow from start to
end), a scroll (vertical arrow, up for positive pixels) and writes the
action's one-line summary in a band at the bottom; an ``InvalidAction``
gets its reason in red. ``save_episode_frames`` writes one annotated PNG
per step.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from rla_jax.envs.gui.actions import GuiAction, InvalidAction

MARK_COLOUR = (230, 20, 60)
MOVE_COLOUR = (20, 120, 230)
TEXT_COLOUR = (255, 255, 255)
INVALID_COLOUR = (255, 90, 90)
BAND_COLOUR = (0, 0, 0, 170)


def _font(size: int) -> ImageFont.ImageFont:
  return ImageFont.load_default(size=size)


def _arrow(
  draw: ImageDraw.ImageDraw,
  start: tuple[float, float],
  end: tuple[float, float],
  width: int,
) -> None:
  draw.line([start, end], fill=MARK_COLOUR, width=width)
  angle = math.atan2(end[1] - start[1], end[0] - start[0])
  head = 4 * width + 4
  for side in (-0.5, 0.5):
    tip = (
      end[0] - head * math.cos(angle + side),
      end[1] - head * math.sin(angle + side),
    )
    draw.line([end, tip], fill=MARK_COLOUR, width=width)


def _caption(action: GuiAction | InvalidAction | None) -> tuple[str, tuple]:
  if isinstance(action, InvalidAction):
    return f"invalid: {action.reason}", INVALID_COLOUR
  if action is None:
    return "no action", TEXT_COLOUR
  return action.summary(), TEXT_COLOUR


def _pointer_mark(
  draw: ImageDraw.ImageDraw, kind: str, target: tuple[int, int], unit: int
) -> None:
  """Draws a click or move at ``target``: a circle (one more ring for a
  double click; hollow and blue for a move) and, for clicks, a crosshair."""
  x, y = target
  radius = 5 * unit
  colour = MOVE_COLOUR if kind == "mouse_move" else MARK_COLOUR
  rings = 2 if kind == "double_click" else 1
  for ring in range(rings):
    r = radius + ring * 3 * unit
    draw.ellipse([x - r, y - r, x + r, y + r], outline=colour, width=unit)
  if kind != "mouse_move":
    span = radius + 3 * unit
    draw.line([(x - span, y), (x + span, y)], fill=colour, width=1)
    draw.line([(x, y - span), (x, y + span)], fill=colour, width=1)


def _draw_marks(
  draw: ImageDraw.ImageDraw,
  action: GuiAction,
  cursor: tuple[int, int] | None,
  unit: int,
) -> None:
  """Marks where ``action`` acts (its coordinate, else the cursor): an
  arrow for a drag or a scroll, ``_pointer_mark`` for clicks and moves,
  nothing for typing, keys, waits and terminates or without a target."""
  target = (action.x, action.y) if action.x is not None else cursor
  if target is None:
    return
  if action.kind == "left_click_drag":
    if action.start_x is not None:
      start = (action.start_x, action.start_y)
    else:
      start = cursor
    if start is not None:
      _arrow(draw, start, target, unit)
  elif action.kind == "scroll":
    length = 12 * unit * (1 if action.scroll_pixels >= 0 else -1)
    _arrow(draw, target, (target[0], target[1] - length), unit)
  elif action.kind not in ("type", "key"):
    _pointer_mark(draw, action.kind, target, unit)


def _with_caption_band(
  image: Image.Image, action: GuiAction | InvalidAction | None, unit: int
) -> Image.Image:
  """``image`` (RGBA) with the action's caption (``_caption``) written in a
  translucent band along its bottom edge."""
  width, height = image.size
  text, colour = _caption(action)
  font = _font(max(9, 6 * unit))
  band = Image.new("RGBA", image.size, (0, 0, 0, 0))
  band_draw = ImageDraw.Draw(band)
  box = band_draw.textbbox((0, 0), text, font=font)
  band_height = box[3] - box[1] + 4 * unit
  band_draw.rectangle(
    [0, height - band_height, width, height], fill=BAND_COLOUR
  )
  band_draw.text(
    (2 * unit, height - band_height + unit), text, font=font, fill=colour
  )
  return Image.alpha_composite(image, band)


def draw_action(
  screenshot: np.ndarray,
  action: GuiAction | InvalidAction | None,
  cursor: tuple[int, int] | None = None,
) -> np.ndarray:
  """Returns a copy of ``screenshot`` with ``action`` drawn on it.

  Args:
    screenshot: uint8 [H, W, 3] RGB, the frame the action was taken on.
    action: The action (pixel coordinates on this frame), an
      InvalidAction, or None.
    cursor: Where the pointer was, for actions without coordinates (a
      click at the cursor, a drag from the cursor).

  Returns:
    uint8 [H, W, 3] RGB with the marks and a caption.
  """
  image = Image.fromarray(np.asarray(screenshot, dtype=np.uint8)).convert(
    "RGBA"
  )
  width, height = image.size
  unit = max(1, round(min(width, height) / 160))
  draw = ImageDraw.Draw(image)
  if isinstance(action, GuiAction):
    _draw_marks(draw, action, cursor, unit)
  image = _with_caption_band(image, action, unit)
  return np.asarray(image.convert("RGB"), dtype=np.uint8)


def save_episode_frames(
  screenshots: Sequence[np.ndarray],
  actions: Sequence[GuiAction | InvalidAction | None],
  directory: str | pathlib.Path,
  prefix: str = "step",
) -> list[pathlib.Path]:
  """Writes frame k = ``draw_action(screenshots[k], actions[k])`` as PNGs.

  Args:
    screenshots: The T frames the actions were taken on (a final frame
      without an action may be passed as a (T+1)-th screenshot; it is saved
      with the caption "no action").
    actions: T actions.
    directory: Created if needed.
    prefix: File names are ``{prefix}_{k:03d}.png``.

  Returns:
    The written paths, in step order.
  """
  if not len(actions) <= len(screenshots) <= len(actions) + 1:
    raise ValueError(
      f"{len(screenshots)} screenshots for {len(actions)} actions; expected "
      "T or T + 1"
    )
  out = pathlib.Path(directory)
  out.mkdir(parents=True, exist_ok=True)
  paths = []
  cursor = None
  padded = list(actions) + [None] * (len(screenshots) - len(actions))
  for index, (screenshot, action) in enumerate(
    zip(screenshots, padded, strict=True)
  ):
    path = out / f"{prefix}_{index:03d}.png"
    Image.fromarray(draw_action(screenshot, action, cursor)).save(path)
    paths.append(path)
    if isinstance(action, GuiAction) and action.x is not None:
      cursor = (action.x, action.y)
  return paths
