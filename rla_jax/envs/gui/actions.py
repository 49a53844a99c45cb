"""The Qwen3-VL computer-use reply format: its action kinds, the parsed
action records and the relative coordinate grid.

A policy reply for one GUI step is one short sentence and one tool call, as
the reference agent (Open-AgentRL, ``mm_agents/qwen3vl_agent_local.py``)
prompts for::

  Action: Click the "Submit" button.
  <tool_call>
  {"name": "computer_use", "arguments": {"action": "left_click",
   "coordinate": [512, 318]}}
  </tool_call>

Coordinates are on a 1000x1000 relative grid: a grid value g on an axis of
S screenshot pixels is pixel ``min(int(g * S / 999), S - 1)`` (the
reference's scaling, ``int(g * S / 999)``, clamped to the last pixel).

`tool_call_reply` writes a reply in this format; the restricted parser that
reads one back is `rla_jax.envs.gui.action_parser.parse_action`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

ACTION_KINDS = (
  "key",
  "type",
  "mouse_move",
  "left_click",
  "left_click_drag",
  "right_click",
  "middle_click",
  "double_click",
  "scroll",
  "wait",
  "terminate",
)
CLICK_KINDS = ("left_click", "right_click", "middle_click", "double_click")
TOOL_NAME = "computer_use"
GRID_SIZE = 1000
KEY_NAMES = frozenset(
  (
    "enter return tab space backspace delete insert escape esc up down left"
    " right home end pageup pagedown ctrl control shift alt meta cmd command"
    " win super"
  ).split()
  + [f"f{number}" for number in range(1, 13)]
)


@dataclasses.dataclass(frozen=True)
class GuiAction:
  """One parsed computer-use action, in screenshot pixels.

  Attributes:
    kind: One of ``ACTION_KINDS``.
    x: Target column in pixels (clicks, move, drag end, scroll position), or
      None for "at the cursor".
    y: Target row in pixels, or None with ``x``.
    start_x: Drag start column (``left_click_drag`` with a
      ``start_coordinate``), else None (the drag starts at the cursor).
    start_y: Drag start row, or None with ``start_x``.
    text: The text to type (``type``).
    keys: Key names to press together (``key``), lower-cased names from
      ``KEY_NAMES`` or single characters.
    scroll_pixels: Scroll amount, positive = up (pyautogui's sign).
    wait_seconds: Seconds to wait (``wait``).
    status: "success" or "failure" (``terminate``).
    description: The reply's ``Action:`` sentence ("" when absent).
  """

  kind: str
  x: int | None = None
  y: int | None = None
  start_x: int | None = None
  start_y: int | None = None
  text: str | None = None
  keys: tuple[str, ...] = ()
  scroll_pixels: int = 0
  wait_seconds: float = 0.0
  status: str | None = None
  description: str = ""

  def summary(self) -> str:
    """A one-line human-readable form (for logs and rendered frames)."""
    parts = [self.kind]
    if self.start_x is not None:
      parts.append(f"from ({self.start_x}, {self.start_y})")
    if self.x is not None:
      parts.append(f"({self.x}, {self.y})")
    if self.kind == "type":
      parts.append(repr(self.text))
    if self.keys:
      parts.append("+".join(self.keys))
    if self.kind == "scroll":
      parts.append(f"{self.scroll_pixels:+d}px")
    if self.kind == "wait":
      parts.append(f"{self.wait_seconds:g}s")
    if self.status is not None:
      parts.append(self.status)
    return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class InvalidAction:
  """A reply that does not parse into a ``GuiAction``.

  Attributes:
    reason: Why, naming the offending part of the reply.
  """

  reason: str


def grid_to_pixel(grid_value: float, side_pixels: int) -> int:
  """Maps a relative grid coordinate to a pixel on one axis.

  pixel = min(int(g * S / 999), S - 1) for g in [0, 1000] and S pixels.

  Args:
    grid_value: g, a coordinate on the 1000x1000 grid.
    side_pixels: S, the screenshot's width (x) or height (y).

  Returns:
    The pixel index in ``[0, S - 1]``.
  """
  return min(int(grid_value * side_pixels / (GRID_SIZE - 1)), side_pixels - 1)


def pixel_to_grid(pixel: int, side_pixels: int) -> int:
  """The smallest grid coordinate that maps back to ``pixel``.

  g = ceil(p * 999 / S), so ``grid_to_pixel(g, S) == p`` whenever S <= 999
  (for larger S the grid is coarser than the pixels).

  Args:
    pixel: p, a pixel index in ``[0, S - 1]``.
    side_pixels: S, the axis length in pixels.

  Returns:
    The grid coordinate, an int in ``[0, 999]``.
  """
  return min(math.ceil(pixel * (GRID_SIZE - 1) / side_pixels), GRID_SIZE - 1)


def tool_call_reply(description: str, arguments: dict[str, Any]) -> str:
  """Writes a reply in the policy's format (for scripted agents and tests).

  Args:
    description: The one-sentence ``Action:`` text.
    arguments: The tool call's arguments (``{"action": ..., ...}``).

  Returns:
    ``"Action: ...\\n<tool_call>\\n{json}\\n</tool_call>"``.
  """
  call = json.dumps({"name": TOOL_NAME, "arguments": arguments})
  return f"Action: {description}\n<tool_call>\n{call}\n</tool_call>"
