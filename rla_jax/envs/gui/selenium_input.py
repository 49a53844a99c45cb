"""Executes a ``GuiAction`` in a Selenium-driven browser by coordinates.

Pointer, key and wheel input go through W3C WebDriver actions (what a user
does), never through element handles or page scripts. A screenshot pixel p
maps to the CSS pixel ``p // scale`` of the viewport (the screenshot is the
viewport at ``scale`` device pixels per CSS pixel). Imported lazily by the
MiniWoB++ backend, so importing ``rla_jax.envs.gui`` needs no selenium.
"""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.mouse_button import MouseButton
from selenium.webdriver.common.keys import Keys

from rla_jax.envs.gui.actions import CLICK_KINDS, GuiAction

# KEY_NAMES (rla_jax.envs.gui.actions) -> WebDriver key code points.
WEBDRIVER_KEYS = {
  "enter": Keys.ENTER,
  "return": Keys.RETURN,
  "tab": Keys.TAB,
  "space": Keys.SPACE,
  "backspace": Keys.BACKSPACE,
  "delete": Keys.DELETE,
  "insert": Keys.INSERT,
  "escape": Keys.ESCAPE,
  "esc": Keys.ESCAPE,
  "up": Keys.ARROW_UP,
  "down": Keys.ARROW_DOWN,
  "left": Keys.ARROW_LEFT,
  "right": Keys.ARROW_RIGHT,
  "home": Keys.HOME,
  "end": Keys.END,
  "pageup": Keys.PAGE_UP,
  "pagedown": Keys.PAGE_DOWN,
  "ctrl": Keys.CONTROL,
  "control": Keys.CONTROL,
  "shift": Keys.SHIFT,
  "alt": Keys.ALT,
  "meta": Keys.META,
  "cmd": Keys.COMMAND,
  "command": Keys.COMMAND,
  "win": Keys.META,
  "super": Keys.META,
} | {f"f{number}": getattr(Keys, f"F{number}") for number in range(1, 13)}
_TYPED_CONTROL = {"\n": Keys.ENTER, "\t": Keys.TAB}
DRAG_SEGMENTS = 5


def _css(pixel: int, scale: int) -> int:
  return int(pixel) // scale


def _css_point(
  x: int | None, y: int | None, cursor: tuple[int, int], scale: int
) -> tuple[int, int]:
  """Screenshot pixel (x, y) in CSS pixels, or the cursor when x is None
  (an action without that coordinate)."""
  if x is None:
    return cursor
  return _css(x, scale), _css(y, scale)


def _queue_click(pointer: Any, kind: str, x: int, y: int) -> None:
  """Queues a move to (x, y) and the click of ``kind`` (``CLICK_KINDS``)."""
  pointer.move_to_location(x, y)
  if kind == "left_click":
    pointer.click()
  elif kind == "right_click":
    pointer.context_click()
  elif kind == "middle_click":
    pointer.pointer_down(MouseButton.MIDDLE)
    pointer.pointer_up(MouseButton.MIDDLE)
  else:
    pointer.double_click()


def _queue_drag(
  pointer: Any, start: tuple[int, int], end: tuple[int, int]
) -> None:
  """Queues a left-button drag from ``start`` to ``end`` in
  ``DRAG_SEGMENTS`` straight moves (CSS pixels, rounded)."""
  pointer.move_to_location(*start)
  pointer.pointer_down(MouseButton.LEFT)
  for segment in range(1, DRAG_SEGMENTS + 1):
    fraction = segment / DRAG_SEGMENTS
    pointer.move_to_location(
      round(start[0] + (end[0] - start[0]) * fraction),
      round(start[1] + (end[1] - start[1]) * fraction),
    )
  pointer.pointer_up(MouseButton.LEFT)


def _queue_typing(keyboard: Any, text: str) -> None:
  """Queues one key press per character (newline and tab as their keys)."""
  for char in text:
    code = _TYPED_CONTROL.get(char, char)
    keyboard.key_down(code)
    keyboard.key_up(code)


def _queue_key_chord(keyboard: Any, keys: tuple[str, ...]) -> None:
  """Queues ``keys`` pressed together: all down in order, up in reverse."""
  codes = [WEBDRIVER_KEYS.get(key, key) for key in keys]
  for code in codes:
    keyboard.key_down(code)
  for code in reversed(codes):
    keyboard.key_up(code)


def execute(
  driver: Any, action: GuiAction, cursor: tuple[int, int], scale: int
) -> tuple[int, int]:
  """Performs ``action`` (not wait/terminate) in ``driver``'s viewport.

  Args:
    driver: A Selenium WebDriver.
    action: The action, coordinates in screenshot pixels.
    cursor: The pointer's current CSS position (x, y).
    scale: Screenshot pixels per CSS pixel.

  Returns:
    The pointer's CSS position after the action.
  """
  chain = ActionChains(driver, duration=0)
  pointer = chain.w3c_actions.pointer_action
  keyboard = chain.w3c_actions.key_action
  kind = action.kind
  x, y = _css_point(action.x, action.y, cursor, scale)
  if kind in CLICK_KINDS:
    _queue_click(pointer, kind, x, y)
  elif kind == "mouse_move":
    pointer.move_to_location(x, y)
  elif kind == "left_click_drag":
    start = _css_point(action.start_x, action.start_y, cursor, scale)
    _queue_drag(pointer, start, (x, y))
  elif kind == "scroll":
    # pyautogui's sign: positive pixels scroll up; a wheel's delta_y > 0
    # scrolls down.
    chain.w3c_actions.wheel_action.scroll(
      x=x, y=y, delta_x=0, delta_y=-action.scroll_pixels, duration=0
    )
  elif kind == "type":
    _queue_typing(keyboard, action.text or "")
  elif kind == "key":
    _queue_key_chord(keyboard, action.keys)
  else:
    raise ValueError(f"cannot execute action kind {kind!r} in a browser")
  chain.w3c_actions.perform()
  return (x, y) if kind != "type" and kind != "key" else cursor
