"""The computer-use reply parser: every action kind by hand, the rejection
rules, and a seeded fuzz of malformed and hostile replies that must never
raise nor execute anything."""

from __future__ import annotations

import builtins
import json
import os
import random
import subprocess

import pytest

from rla_jax.envs.gui.action_parser import MAX_TEXT_CHARS, parse_action
from rla_jax.envs.gui.actions import (
  ACTION_KINDS,
  GuiAction,
  InvalidAction,
  grid_to_pixel,
  pixel_to_grid,
  tool_call_reply,
)

WIDTH, HEIGHT = 320, 420


def reply(arguments, description="Do the thing."):
  return tool_call_reply(description, arguments)


def parse(arguments, **kwargs):
  return parse_action(reply(arguments, **kwargs), WIDTH, HEIGHT)


def test_grid_scaling_matches_the_reference_and_clamps_the_far_edge():
  # The reference's int(g * S / 999), clamped to the last pixel.
  assert grid_to_pixel(0, WIDTH) == 0
  assert grid_to_pixel(500, WIDTH) == int(500 * WIDTH / 999) == 160
  assert grid_to_pixel(500, HEIGHT) == 210
  assert grid_to_pixel(999, WIDTH) == WIDTH - 1
  assert grid_to_pixel(1000, HEIGHT) == HEIGHT - 1
  for side in (WIDTH, HEIGHT, 999):
    for pixel in range(side):
      grid = pixel_to_grid(pixel, side)
      assert 0 <= grid <= 999
      assert grid_to_pixel(grid, side) == pixel


@pytest.mark.parametrize(
  "kind", ["left_click", "right_click", "middle_click", "double_click"]
)
def test_clicks_scale_coordinates_and_may_omit_them(kind):
  action = parse(
    {"action": kind, "coordinate": [250, 750]}, description="Click OK."
  )
  assert action == GuiAction(
    kind=kind,
    x=int(250 * WIDTH / 999),
    y=int(750 * HEIGHT / 999),
    description="Click OK.",
  )
  at_cursor = parse({"action": kind})
  assert isinstance(at_cursor, GuiAction)
  assert (at_cursor.kind, at_cursor.x, at_cursor.y) == (kind, None, None)


def test_mouse_move_and_drag():
  move = parse({"action": "mouse_move", "coordinate": [100.5, 200]})
  assert (move.kind, move.x, move.y) == ("mouse_move", 32, 84)
  drag = parse(
    {
      "action": "left_click_drag",
      "start_coordinate": [0, 0],
      "coordinate": [999, 999],
      "duration": 0.5,
    }
  )
  assert (drag.start_x, drag.start_y, drag.x, drag.y) == (
    0,
    0,
    WIDTH - 1,
    HEIGHT - 1,
  )
  from_cursor = parse({"action": "left_click_drag", "coordinate": [10, 10]})
  assert from_cursor.start_x is None and from_cursor.x == 3
  assert isinstance(parse({"action": "mouse_move"}), InvalidAction)
  assert isinstance(parse({"action": "left_click_drag"}), InvalidAction)


def test_type_key_scroll_wait_terminate():
  typed = parse({"action": "type", "text": "hello\tworld\n"})
  assert (typed.kind, typed.text) == ("type", "hello\tworld\n")
  hotkey = parse({"action": "key", "keys": ["Ctrl", "a"]})
  assert hotkey.keys == ("ctrl", "a")
  single = parse({"action": "key", "keys": "Enter"})
  assert single.keys == ("enter",)
  scroll = parse({"action": "scroll", "pixels": -300, "coordinate": [500, 500]})
  assert (scroll.scroll_pixels, scroll.x, scroll.y) == (-300, 160, 210)
  assert parse({"action": "scroll", "pixels": 2.9}).scroll_pixels == 2
  assert parse({"action": "wait", "time": 2}).wait_seconds == 2.0
  assert parse({"action": "wait"}).wait_seconds == 1.0
  assert parse({"action": "terminate", "status": "failure"}).status == "failure"
  assert parse({"action": "terminate"}).status == "success"


def test_every_kind_is_covered_and_summarised():
  examples = {
    "key": {"keys": ["tab"]},
    "type": {"text": "x"},
    "mouse_move": {"coordinate": [1, 2]},
    "left_click": {"coordinate": [1, 2]},
    "left_click_drag": {"coordinate": [1, 2]},
    "right_click": {},
    "middle_click": {},
    "double_click": {},
    "scroll": {"pixels": 5},
    "wait": {"time": 0},
    "terminate": {"status": "success"},
  }
  assert set(examples) == set(ACTION_KINDS)
  for kind, arguments in examples.items():
    action = parse({"action": kind, **arguments})
    assert isinstance(action, GuiAction), (kind, action)
    assert action.kind == kind and action.summary().startswith(kind)


def test_the_reply_shape_around_the_tool_call():
  call = json.dumps(
    {
      "name": "computer_use",
      "arguments": {"action": "left_click", "coordinate": [5, 5]},
    }
  )
  thinking = (
    f"<think>hmm</think>\nAction: Press it.\n<tool_call>{call}</tool_call>"
  )
  assert parse_action(thinking, WIDTH, HEIGHT).description == "Press it."
  bare = parse_action(f"<tool_call>\n{call}\n</tool_call>", WIDTH, HEIGHT)
  assert isinstance(bare, GuiAction) and bare.description == ""
  long_line = "Action: " + "z" * 1000 + f"\n<tool_call>{call}</tool_call>"
  assert len(parse_action(long_line, WIDTH, HEIGHT).description) == 300


@pytest.mark.parametrize(
  ("text", "reason_part"),
  [
    ("Action: click", "no <tool_call>"),
    ("<tool_call>{}</tool_call><tool_call>{}</tool_call>", "exactly one"),
    ("<tool_call><tool_call>{}</tool_call></tool_call>", "exactly one"),
    ('<tool_call>{"name": "computer_use"', "exactly one"),
    ("</tool_call>{}<tool_call>", "before"),
    ("<tool_call>{'name': 'computer_use'}</tool_call>", "not valid JSON"),
    ("<tool_call>[1, 2]</tool_call>", "JSON object"),
    (
      '<tool_call>{"name": "computer_use", "arguments": {"action": "wait"},'
      ' "extra": 1}</tool_call>',
      "name and arguments",
    ),
    (
      '<tool_call>{"name": "shell", "arguments": {"action": "wait"}}'
      "</tool_call>",
      "tool name",
    ),
    (
      '<tool_call>{"name": "computer_use", "arguments": "wait"}</tool_call>',
      "arguments must be a JSON object",
    ),
    (
      '<tool_call>{"name": "computer_use", "arguments": {"action": "scroll",'
      ' "pixels": NaN}}</tool_call>',
      "non-finite",
    ),
    (
      '<tool_call>{"name": "computer_use", "arguments": {"action": "wait",'
      ' "action": "terminate"}}</tool_call>',
      "duplicate keys",
    ),
    (
      '<tool_call>{"name": "computer_use", "arguments": {"action":'
      ' "left_click", "coordinate": [1e400, 5]}}</tool_call>',
      "not finite",
    ),
  ],
)
def test_malformed_replies_name_the_reason(text, reason_part):
  result = parse_action(text, WIDTH, HEIGHT)
  assert isinstance(result, InvalidAction)
  assert reason_part in result.reason, result.reason


@pytest.mark.parametrize(
  ("arguments", "reason_part"),
  [
    ({"action": "left_click", "coordinate": [1001, 5]}, "off the"),
    ({"action": "left_click", "coordinate": [5, -0.5]}, "off the"),
    ({"action": "left_click", "coordinate": [10**12, 5]}, "out of range"),
    ({"action": "left_click", "coordinate": [True, 5]}, "must be a number"),
    ({"action": "left_click", "coordinate": ["5", 5]}, "must be a number"),
    ({"action": "left_click", "coordinate": [5]}, "two numbers"),
    ({"action": "left_click", "coordinate": {"x": 5}}, "two numbers"),
    ({"action": "left_click", "text": "x"}, "does not take"),
    ({"action": "exec"}, "unknown action"),
    ({"coordinate": [5, 5]}, "unknown action"),
    ({"action": "type"}, "needs text"),
    ({"action": "type", "text": "x" * (MAX_TEXT_CHARS + 1)}, "chars >"),
    ({"action": "type", "text": "a\x00b"}, "control character"),
    ({"action": "type", "text": "a\ue006"}, "reserved code point"),
    ({"action": "type", "text": 12}, "must be a string"),
    ({"action": "key", "keys": ["ctrl+alt+delete"]}, "unknown key"),
    ({"action": "key", "keys": []}, "1..4"),
    ({"action": "key", "keys": ["a"] * 5}, "1..4"),
    ({"action": "key", "keys": [None]}, "not a string"),
    ({"action": "scroll", "pixels": 10**5}, "beyond"),
    ({"action": "wait", "time": 3600}, "not in"),
    ({"action": "wait", "time": -1}, "not in"),
    ({"action": "terminate", "status": "maybe"}, "status"),
  ],
)
def test_schema_violations_are_invalid(arguments, reason_part):
  result = parse(arguments)
  assert isinstance(result, InvalidAction)
  assert reason_part in result.reason, result.reason


def test_huge_numbers_and_oversized_calls_are_invalid():
  def call(coordinate_text):
    return (
      '<tool_call>{"name": "computer_use", "arguments": {"action":'
      f' "left_click", "coordinate": [{coordinate_text}, 5]}}}}</tool_call>'
    )

  huge = parse_action(call("9" * 3000), WIDTH, HEIGHT)
  assert "out of range" in huge.reason
  oversized = parse_action(call("9" * 5000), WIDTH, HEIGHT)
  assert "chars >" in oversized.reason
  deep = parse_action("<tool_call>" + "[" * 4000 + "</tool_call>", 9, 9)
  assert "not valid JSON" in deep.reason


def test_bad_screen_sizes_raise_but_bad_replies_do_not():
  with pytest.raises(ValueError, match="screen_width"):
    parse_action("x", 0, 10)
  with pytest.raises(ValueError, match="screen_height"):
    parse_action("x", 10, 10.5)
  for not_text in (None, b"<tool_call>", 7, ["a"]):
    assert isinstance(parse_action(not_text, WIDTH, HEIGHT), InvalidAction)


def _hostile_replies(sentinel: str, count: int, seed: int) -> list:
  """``count`` seeded malformed / hostile replies around the real format."""
  rng = random.Random(seed)
  payloads = [
    f"__import__('os').system('touch {sentinel}')",
    f"open('{sentinel}', 'w').write('x')",
    f"$(touch {sentinel})",
    f"`touch {sentinel}`",
    f'\'; import os; os.system("touch {sentinel}") #',
    f"exec(\"open('{sentinel}','w')\")",
    f"eval(compile('open(\"{sentinel}\",\"w\")', 'x', 'exec'))",
    f"{{{{ __import__('subprocess').run(['touch', '{sentinel}']) }}}}",
  ]
  numbers = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e309",
    "-1e309",
    "-5",
    "1001",
    "1000",
    "999.9999",
    "0",
    "1" + "0" * 40,
    "9" * 5000,
    "true",
    "null",
    '"500"',
    "[]",
    "{}",
    "0.5",
    "-0.0",
    "1e-320",
  ]
  kinds = list(ACTION_KINDS) + ["exec", "shell", "__import__", "", "LEFT_CLICK"]
  keys = ["coordinate", "start_coordinate", "text", "keys", "pixels", "time"]
  keys += ["status", "duration", "__class__", "action", "cmd"]

  def value() -> str:
    choice = rng.random()
    if choice < 0.35:
      return f"[{rng.choice(numbers)}, {rng.choice(numbers)}]"
    if choice < 0.55:
      return json.dumps(rng.choice(payloads))
    if choice < 0.65:
      return json.dumps([rng.choice(payloads), "enter"])
    if choice < 0.8:
      return rng.choice(numbers)
    if choice < 0.9:
      return json.dumps("x" * rng.choice([0, 256, 257, 5000]))
    return json.dumps(chr(rng.choice([0, 7, 0x7F, 0xE006, 0xF8FF, 0x263A])))

  def arguments_json() -> str:
    fields = [f'"action": {json.dumps(rng.choice(kinds))}']
    for _ in range(rng.randint(0, 3)):
      fields.append(f"{json.dumps(rng.choice(keys))}: {value()}")
    rng.shuffle(fields)
    return "{" + ", ".join(fields) + "}"

  def call_json() -> str:
    name = rng.choice(['"computer_use"', '"computer_use"', '"os.system"'])
    arguments = rng.choice(
      [arguments_json()] * 6
      + ['"left_click"', "[1, 2]", "42", "null", json.dumps(payloads[0])]
    )
    call = f'{{"name": {name}, "arguments": {arguments}}}'
    if rng.random() < 0.1:
      call = call[:-1] + f', "name": {name}}}'
    return call

  replies: list = []
  while len(replies) < count:
    body = call_json()
    block = f"<tool_call>\n{body}\n</tool_call>"
    shape = rng.randrange(12)
    if shape == 0:
      text = f"Action: x\n{block}\n{block}"
    elif shape == 1:
      text = f"<tool_call>{block}</tool_call>"
    elif shape == 2:
      text = f"Action: x\n{block}"[: rng.randrange(1, len(block) + 10)]
    elif shape == 3:
      text = "<tool_call>" + "[" * rng.choice([10, 999, 5000]) + "</tool_call>"
    elif shape == 4:
      text = f"Action: {rng.choice(payloads)}\n{block}"
    elif shape == 5:
      text = f"<tool_call>{rng.choice(payloads)}</tool_call>"
    elif shape == 6:
      text = "".join(chr(rng.randrange(0, 0x3000)) for _ in range(60)) + block
    elif shape == 7:
      text = rng.choice(
        [None, 3.5, b"<tool_call>", {"name": "computer_use"}, "", "x" * 40000]
      )
    elif shape == 8:
      position = rng.randrange(len(body))
      mutated = body[:position] + rng.choice('{}[]",:\\') + body[position:]
      text = f"<tool_call>{mutated}</tool_call>"
    else:
      text = f"Action: try\n{block}"
    replies.append(text)
  return replies


def test_fuzzed_hostile_replies_never_raise_nor_execute(tmp_path, monkeypatch):
  sentinel = str(tmp_path / "SENTINEL")
  calls = []

  def forbidden(name):
    def record(*args, **kwargs):
      calls.append(name)
      raise AssertionError(f"parser called {name}")

    return record

  replies = _hostile_replies(sentinel, count=3000, seed=23)
  monkeypatch.setattr(builtins, "eval", forbidden("eval"))
  monkeypatch.setattr(builtins, "exec", forbidden("exec"))
  monkeypatch.setattr(builtins, "compile", forbidden("compile"))
  monkeypatch.setattr(os, "system", forbidden("os.system"))
  monkeypatch.setattr(os, "popen", forbidden("os.popen"))
  monkeypatch.setattr(subprocess, "Popen", forbidden("subprocess.Popen"))
  results = [parse_action(text, WIDTH, HEIGHT) for text in replies]
  monkeypatch.undo()
  assert calls == []
  assert not os.path.exists(sentinel)
  valid = [r for r in results if isinstance(r, GuiAction)]
  invalid = [r for r in results if isinstance(r, InvalidAction)]
  assert len(valid) + len(invalid) == len(replies) == 3000
  # The fuzz reaches both outcomes, and every accepted action is in bounds.
  assert len(valid) > 25 and len(invalid) > 2500
  assert all(r.reason for r in invalid)
  for action in valid:
    assert action.kind in ACTION_KINDS
    for x, y in ((action.x, action.y), (action.start_x, action.start_y)):
      assert (x is None) == (y is None)
      assert x is None or (0 <= x < WIDTH and 0 <= y < HEIGHT)
    assert action.text is None or len(action.text) <= MAX_TEXT_CHARS
    assert action.text is None or all(
      not 0xE000 <= ord(c) <= 0xF8FF for c in action.text
    )
