"""The restricted parser of the computer-use reply format
(`rla_jax.envs.gui.actions` describes the format and its grid).

The parser is restricted: it finds the one ``<tool_call>`` block with string
operations, reads it with ``json.loads`` (NaN/Infinity and duplicate keys
rejected) and checks every field against an explicit per-action schema. It
never evaluates anything. Anything outside the schema is an
``InvalidAction`` with the reason, never an exception:

- exactly one ``<tool_call>...</tool_call>`` block (none, two, nested or
  unterminated blocks are invalid);
- the JSON is an object with exactly ``name == "computer_use"`` and an
  ``arguments`` object whose keys are the ones its action allows;
- coordinates are two finite numbers in ``[0, 1000]``: off-grid (hence
  off-screen) coordinates are REJECTED, not clamped; on-grid ones clamp only
  at the far edge (grid 999-1000 -> the last pixel);
- ``text`` is at most ``MAX_TEXT_CHARS`` characters, with no control
  characters other than newline and tab and none of the private-use code
  points WebDriver reads as special keys;
- ``keys`` is 1..``MAX_KEYS`` names from ``KEY_NAMES`` or single printable
  ASCII characters;
- ``pixels`` (scroll) is finite with ``|pixels| <= MAX_SCROLL_PIXELS``;
  ``time`` (wait) is finite in ``[0, MAX_WAIT_SECONDS]``.

Lenient where the reference is: the ``Action:`` line is optional (its text,
truncated to ``MAX_DESCRIPTION_CHARS``, is kept as the description), text
outside the two parts (e.g. a ``<think>`` block) is ignored, click actions
may omit the coordinate (click at the cursor), and ``terminate`` without a
status means success.
"""

from __future__ import annotations

import json
import math
import string
from typing import Any

from rla_jax.envs.gui.actions import (
  ACTION_KINDS,
  GRID_SIZE,
  KEY_NAMES,
  TOOL_NAME,
  GuiAction,
  InvalidAction,
  grid_to_pixel,
)

MAX_REPLY_CHARS = 32_768
MAX_TOOL_CALL_CHARS = 4096
MAX_TEXT_CHARS = 256
MAX_DESCRIPTION_CHARS = 300
MAX_KEYS = 4
MAX_SCROLL_PIXELS = 10_000
MAX_WAIT_SECONDS = 60.0
DEFAULT_WAIT_SECONDS = 1.0
MAX_SCREEN_SIDE = 16_384
_PRINTABLE_KEYS = frozenset(
  string.ascii_letters + string.digits + string.punctuation
)

# Argument keys each action accepts besides "action" (anything else is
# rejected).
_ALLOWED_ARGUMENTS = {
  "key": {"keys"},
  "type": {"text"},
  "mouse_move": {"coordinate"},
  "left_click": {"coordinate"},
  "right_click": {"coordinate"},
  "middle_click": {"coordinate"},
  "double_click": {"coordinate"},
  "left_click_drag": {"coordinate", "start_coordinate", "duration"},
  "scroll": {"pixels", "coordinate"},
  "wait": {"time"},
  "terminate": {"status"},
}


class _Reject(Exception):
  """Internal: a schema violation, turned into ``InvalidAction``."""


def _reject_constant(name: str) -> Any:
  raise _Reject(f"non-finite number {name} in the tool call")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
  keys = [key for key, _ in pairs]
  if len(set(keys)) != len(keys):
    raise _Reject(f"duplicate keys in a tool-call object: {keys}")
  return dict(pairs)


def _extract_tool_call(reply: str) -> str:
  """The text between the only ``<tool_call>`` and its ``</tool_call>``."""
  opens = reply.count("<tool_call>")
  closes = reply.count("</tool_call>")
  if opens == 0:
    raise _Reject("no <tool_call> block")
  if opens != 1 or closes != 1:
    raise _Reject(
      f"{opens} <tool_call> and {closes} </tool_call> tags; exactly one "
      "block is allowed"
    )
  start = reply.index("<tool_call>") + len("<tool_call>")
  end = reply.index("</tool_call>")
  if end < start:
    raise _Reject("</tool_call> comes before <tool_call>")
  body = reply[start:end].strip()
  if len(body) > MAX_TOOL_CALL_CHARS:
    raise _Reject(f"tool call of {len(body)} chars > {MAX_TOOL_CALL_CHARS}")
  return body


def _description(reply: str) -> str:
  """The first ``Action:`` line before the tool call, truncated."""
  head = reply.split("<tool_call>", 1)[0]
  for line in head.splitlines():
    stripped = line.strip()
    if stripped.lower().startswith("action:"):
      return stripped[len("action:") :].strip()[:MAX_DESCRIPTION_CHARS]
  return ""


def _number(value: Any, what: str) -> float:
  if isinstance(value, bool) or not isinstance(value, int | float):
    raise _Reject(f"{what} must be a number, got {type(value).__name__}")
  if isinstance(value, int) and abs(value) > 10**9:
    raise _Reject(f"{what} = {value} is out of range")
  number = float(value)
  if not math.isfinite(number):
    raise _Reject(f"{what} = {value!r} is not finite")
  return number


def _point(value: Any, what: str, width: int, height: int) -> tuple[int, int]:
  if not isinstance(value, list) or len(value) != 2:
    raise _Reject(f"{what} must be a list of two numbers, got {value!r:.60}")
  grid_x, grid_y = (_number(v, what) for v in value)
  for grid_value in (grid_x, grid_y):
    if not 0.0 <= grid_value <= GRID_SIZE:
      raise _Reject(
        f"{what} {value!r} is off the [0, {GRID_SIZE}] grid (off-screen)"
      )
  return grid_to_pixel(grid_x, width), grid_to_pixel(grid_y, height)


def _checked_text(value: Any) -> str:
  if not isinstance(value, str):
    raise _Reject(f"text must be a string, got {type(value).__name__}")
  if len(value) > MAX_TEXT_CHARS:
    raise _Reject(f"text of {len(value)} chars > {MAX_TEXT_CHARS}")
  for char in value:
    code = ord(char)
    if (code < 32 and char not in "\n\t") or 0x7F <= code < 0xA0:
      raise _Reject(f"text contains control character {code:#x}")
    if 0xE000 <= code <= 0xF8FF or 0xD800 <= code <= 0xDFFF:
      raise _Reject(f"text contains reserved code point {code:#x}")
  return value


def _checked_keys(value: Any) -> tuple[str, ...]:
  keys = [value] if isinstance(value, str) else value
  if not isinstance(keys, list) or not 1 <= len(keys) <= MAX_KEYS:
    raise _Reject(f"keys must be 1..{MAX_KEYS} strings, got {value!r:.60}")
  checked = []
  for key in keys:
    if not isinstance(key, str):
      raise _Reject(f"key {key!r:.30} is not a string")
    name = key.strip()
    if name.lower() in KEY_NAMES:
      checked.append(name.lower())
    elif len(name) == 1 and name in _PRINTABLE_KEYS:
      checked.append(name)
    else:
      raise _Reject(f"unknown key {key!r:.30}")
  return tuple(checked)


def _action_from_arguments(
  arguments: dict[str, Any], width: int, height: int, description: str
) -> GuiAction:
  kind = arguments.get("action")
  if not isinstance(kind, str) or kind not in _ALLOWED_ARGUMENTS:
    raise _Reject(
      f"unknown action {kind!r:.40}; expected one of {ACTION_KINDS}"
    )
  extra = set(arguments) - _ALLOWED_ARGUMENTS[kind] - {"action"}
  if extra:
    raise _Reject(f"action {kind} does not take arguments {sorted(extra)}")
  fields: dict[str, Any] = {"kind": kind, "description": description}
  if "coordinate" in arguments:
    fields["x"], fields["y"] = _point(
      arguments["coordinate"], "coordinate", width, height
    )
  elif kind in ("mouse_move", "left_click_drag"):
    raise _Reject(f"action {kind} needs a coordinate")
  if kind == "left_click_drag":
    if "start_coordinate" in arguments:
      fields["start_x"], fields["start_y"] = _point(
        arguments["start_coordinate"], "start_coordinate", width, height
      )
    if "duration" in arguments:
      duration = _number(arguments["duration"], "duration")
      if not 0.0 <= duration <= MAX_WAIT_SECONDS:
        raise _Reject(f"duration {duration} not in [0, {MAX_WAIT_SECONDS}]")
  if kind == "type":
    if "text" not in arguments:
      raise _Reject("action type needs text")
    fields["text"] = _checked_text(arguments["text"])
  if kind == "key":
    if "keys" not in arguments:
      raise _Reject("action key needs keys")
    fields["keys"] = _checked_keys(arguments["keys"])
  if kind == "scroll":
    pixels = _number(arguments.get("pixels", 0), "pixels")
    if abs(pixels) > MAX_SCROLL_PIXELS:
      raise _Reject(f"pixels {pixels} beyond +-{MAX_SCROLL_PIXELS}")
    fields["scroll_pixels"] = int(pixels)
  if kind == "wait":
    seconds = _number(arguments.get("time", DEFAULT_WAIT_SECONDS), "time")
    if not 0.0 <= seconds <= MAX_WAIT_SECONDS:
      raise _Reject(f"time {seconds} not in [0, {MAX_WAIT_SECONDS}]")
    fields["wait_seconds"] = seconds
  if kind == "terminate":
    status = arguments.get("status", "success")
    if status not in ("success", "failure"):
      raise _Reject(f"status {status!r:.40} is not 'success' or 'failure'")
    fields["status"] = status
  return GuiAction(**fields)


def _check_screen_size(screen_width: int, screen_height: int) -> None:
  """Raises ValueError unless both sides are ints in [1, MAX_SCREEN_SIDE]."""
  for name, side in (
    ("screen_width", screen_width),
    ("screen_height", screen_height),
  ):
    if isinstance(side, bool) or not isinstance(side, int):
      raise ValueError(f"{name} must be an int, got {side!r}")
    if not 1 <= side <= MAX_SCREEN_SIDE:
      raise ValueError(f"{name} = {side} not in [1, {MAX_SCREEN_SIDE}]")


def _tool_call_arguments(body: str) -> dict[str, Any]:
  """The ``arguments`` object of a tool call's JSON ``body``.

  Reads ``body`` with ``json.loads`` (non-finite numbers and duplicate keys
  rejected) and checks the call's shape: an object with exactly ``name ==
  TOOL_NAME`` and an ``arguments`` object.

  Raises:
    _Reject: The body is not such a call.
  """
  try:
    call = json.loads(
      body,
      parse_constant=_reject_constant,
      object_pairs_hook=_unique_object,
    )
  except (ValueError, RecursionError) as error:
    raise _Reject(f"tool call is not valid JSON: {error}"[:200]) from None
  if not isinstance(call, dict):
    raise _Reject(f"tool call must be a JSON object, got {type(call).__name__}")
  if set(call) != {"name", "arguments"}:
    raise _Reject(
      f"tool call keys must be name and arguments, got {sorted(call)}"
    )
  if call["name"] != TOOL_NAME:
    raise _Reject(f"tool name {call['name']!r:.40} is not {TOOL_NAME!r}")
  if not isinstance(call["arguments"], dict):
    raise _Reject(
      f"arguments must be a JSON object, got {type(call['arguments']).__name__}"
    )
  return call["arguments"]


def parse_action(
  reply: Any, screen_width: int, screen_height: int
) -> GuiAction | InvalidAction:
  """Parses one policy reply into an action in screenshot pixels.

  Never raises for any ``reply`` and never evaluates it; see the module
  docstring for the accepted format.

  Args:
    reply: The policy's reply text (anything else is an InvalidAction).
    screen_width: W, the screenshot width in pixels the grid maps onto.
    screen_height: H, the screenshot height in pixels.

  Returns:
    A ``GuiAction`` with pixel coordinates in ``[0, W-1] x [0, H-1]``, or an
    ``InvalidAction`` saying why the reply was rejected.

  Raises:
    ValueError: The screen size (not the reply) is bad.
  """
  _check_screen_size(screen_width, screen_height)
  if not isinstance(reply, str):
    return InvalidAction(f"reply must be a string, got {type(reply).__name__}")
  if len(reply) > MAX_REPLY_CHARS:
    return InvalidAction(f"reply of {len(reply)} chars > {MAX_REPLY_CHARS}")
  try:
    arguments = _tool_call_arguments(_extract_tool_call(reply))
    return _action_from_arguments(
      arguments, screen_width, screen_height, _description(reply)
    )
  except _Reject as rejection:
    return InvalidAction(str(rejection))
