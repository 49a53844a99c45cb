"""The OSWorld adapter without a VM: a recorded OSWorld-format trajectory
(written here) replays through OSWorldEnvironment, each reply translates to
the recorded pyautogui command, and success comes from result.txt."""

from __future__ import annotations

import ast
import json
import sys

import numpy as np
import pytest
from PIL import Image

from rla_jax.envs.gui.actions import GuiAction, tool_call_reply
from rla_jax.envs.gui.osworld import (
  DesktopEnvMissingError,
  OSWorldEnvironment,
  RecordedDesktop,
  pyautogui_command,
  replay_trajectory,
)

VM_SIZE = (1920, 1080)

# (reply arguments, the command OSWorld executed), written by hand: grid g
# on S pixels is int(g * S / 999).
RECORDED_STEPS = [
  (
    {"action": "left_click", "coordinate": [500, 500]},
    "pyautogui.click(960, 540)",
  ),
  (
    {"action": "type", "text": "hello 'world'\n"},
    r"""pyautogui.typewrite("hello 'world'\n")""",
  ),
  ({"action": "key", "keys": ["ctrl", "s"]}, "pyautogui.hotkey('ctrl', 's')"),
  ({"action": "key", "keys": ["Return"]}, "pyautogui.press('return')"),
  (
    {"action": "scroll", "pixels": -5, "coordinate": [250, 750]},
    "pyautogui.scroll(-5, x=480, y=810)",
  ),
  (
    {"action": "left_click_drag", "coordinate": [999, 0]},
    "pyautogui.dragTo(1919, 0, duration=0.5)",
  ),
  ({"action": "wait", "time": 1}, "WAIT"),
  ({"action": "terminate", "status": "success"}, "DONE"),
]


def write_trajectory(directory, steps, score, size=VM_SIZE):
  """An OSWorld result directory as lib_run_single.py writes it, + task.json."""
  directory.mkdir()
  task = {"id": "demo-0001", "instruction": "Save the document.", "config": []}
  (directory / "task.json").write_text(json.dumps(task))
  lines = []
  for index in range(len(steps) + 1):
    colour = (index * 30 % 256, 100, 200)
    Image.new("RGB", size, colour).save(directory / f"step_{index}.png")
  for index, (arguments, command) in enumerate(steps, start=1):
    lines.append(
      json.dumps(
        {
          "step_num": index,
          "action": command,
          "response": tool_call_reply(f"Step {index}.", arguments),
          "reward": 0,
          "done": command in ("DONE", "FAIL"),
          "screenshot_file": f"step_{index}.png",
        }
      )
    )
  (directory / "traj.jsonl").write_text("\n".join(lines) + "\n")
  (directory / "result.txt").write_text(f"{score}\n")
  return directory


def test_recorded_trajectory_replays_to_the_recorded_commands(tmp_path):
  directory = write_trajectory(tmp_path / "run", RECORDED_STEPS, 1.0)
  report = replay_trajectory(directory)
  assert [step.translated_command for step in report.steps] == [
    command for _, command in RECORDED_STEPS
  ]
  assert all(step.matches for step in report.steps)
  assert all(isinstance(step.parsed, GuiAction) for step in report.steps)
  final = report.final
  assert final.done and final.success and final.reward == 1.0
  assert final.info["score"] == 1.0 and final.info["command"] == "DONE"
  assert final.instruction == "Save the document."
  assert final.screenshot.shape == (1080, 1920, 3)
  # The last screenshot served is step_8.png (8 commands executed).
  np.testing.assert_array_equal(
    final.screenshot[0, 0], (8 * 30 % 256, 100, 200)
  )


def test_a_failed_trajectory_and_a_mismatch_are_reported(tmp_path):
  steps = [
    (
      {"action": "left_click", "coordinate": [0, 999]},
      "pyautogui.click(0, 1079)",
    ),
    ({"action": "double_click", "coordinate": [1, 1]}, "pyautogui.click(1, 1)"),
    ({"action": "terminate", "status": "failure"}, "FAIL"),
  ]
  report = replay_trajectory(write_trajectory(tmp_path / "run", steps, 0.0))
  assert [step.matches for step in report.steps] == [True, False, True]
  assert report.steps[1].translated_command == "pyautogui.doubleClick(1, 1)"
  assert report.final.done and not report.final.success
  assert report.final.reward == 0.0


def test_step_limit_evaluates_and_invalid_replies_execute_nothing(tmp_path):
  steps = [({"action": "wait"}, "WAIT")] * 3
  directory = write_trajectory(tmp_path / "run", steps, 0.5)
  desktop = RecordedDesktop(directory)
  env = OSWorldEnvironment(
    {"demo-0001": desktop.task},
    desktop_factory=lambda: desktop,
    reset_wait_seconds=0.0,
    pause_seconds=0.0,
    max_steps=2,
  )
  env.reset(["demo-0001"], [0])
  (skipped,) = env.step([None])
  assert desktop.executed == [] and not skipped.done
  (last,) = env.step([GuiAction("wait", wait_seconds=1.0)])
  assert desktop.executed == ["WAIT"]
  assert last.done and last.info["truncated"] and last.reward == 0.5
  assert not last.success
  with pytest.raises(ValueError, match="unknown OSWorld example id"):
    env.reset(["nope"], [0])
  env.close()


def test_coordinates_scale_from_the_screenshot_to_the_vm_screen():
  action = GuiAction("left_click", x=100, y=50)
  assert pyautogui_command(action, 2.0, 2.0) == "pyautogui.click(200, 100)"
  drag = GuiAction("left_click_drag", x=10, y=20, start_x=1, start_y=2)
  assert pyautogui_command(drag, 3.0, 1.5) == (
    "pyautogui.moveTo(3, 3); pyautogui.dragTo(30, 30, duration=0.5)"
  )
  assert pyautogui_command(GuiAction("right_click")) == "pyautogui.rightClick()"
  assert pyautogui_command(GuiAction("key", keys=("control", "cmd"))) == (
    "pyautogui.hotkey('ctrl', 'command')"
  )


@pytest.mark.parametrize(
  ("action", "command"),
  [
    (GuiAction("left_click", x=3, y=4), "pyautogui.click(3, 4)"),
    (GuiAction("right_click", x=3, y=4), "pyautogui.rightClick(3, 4)"),
    (GuiAction("middle_click", x=3, y=4), "pyautogui.middleClick(3, 4)"),
    (GuiAction("double_click"), "pyautogui.doubleClick()"),
    (GuiAction("mouse_move", x=0, y=9), "pyautogui.moveTo(0, 9)"),
    (
      GuiAction("left_click_drag", x=5, y=6),
      "pyautogui.dragTo(5, 6, duration=0.5)",
    ),
    (GuiAction("type", text="a'b"), 'pyautogui.typewrite("a\'b")'),
    (GuiAction("key", keys=("esc",)), "pyautogui.press('esc')"),
    (GuiAction("key", keys=("super", "l")), "pyautogui.hotkey('win', 'l')"),
    (GuiAction("scroll", scroll_pixels=3), "pyautogui.scroll(3)"),
    (GuiAction("wait", wait_seconds=2.0), "WAIT"),
    (GuiAction("terminate", status="success"), "DONE"),
    (GuiAction("terminate", status="failure"), "FAIL"),
  ],
)
def test_every_action_kind_has_its_pyautogui_command(action, command):
  assert pyautogui_command(action) == command


@pytest.mark.parametrize(
  "text",
  [
    "'); import os; os.system('touch /tmp/x') #",
    '"); __import__("os").system("id") #',
    "\\'); exec('1') #",
    "line one\nline two\t\\n",
  ],
)
def test_typed_text_cannot_escape_the_typewrite_call(text):
  command = pyautogui_command(GuiAction("type", text=text))
  (statement,) = ast.parse(command).body
  call = statement.value
  assert isinstance(call, ast.Call) and call.func.attr == "typewrite"
  (argument,) = call.args
  assert isinstance(argument, ast.Constant) and argument.value == text


def test_missing_desktop_env_is_one_clear_error(monkeypatch):
  monkeypatch.setitem(sys.modules, "desktop_env", None)
  with pytest.raises(DesktopEnvMissingError, match="pip install desktop-env"):
    OSWorldEnvironment({"x": {"id": "x"}}, desktop_kwargs={})


def test_recorded_directory_must_be_complete(tmp_path):
  with pytest.raises(FileNotFoundError, match="task.json"):
    RecordedDesktop(tmp_path)
