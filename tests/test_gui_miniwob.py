"""The MiniWoB++ backend in real headless Chromium: a correct click succeeds,
a wrong one does not, seeds reproduce instances, screenshots have the fixed
shape, typing and the episode bookkeeping work.

Needs Chromium + chromedriver (`.ci/run` installs the Debian packages
`chromium chromium-driver`) and the selenium / miniwob packages; without
them the browser tests skip with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_browser

from rla_jax.envs.gui.action_parser import parse_action
from rla_jax.envs.gui.actions import (
  GuiAction,
  InvalidAction,
  pixel_to_grid,
  tool_call_reply,
)
from rla_jax.envs.gui.chromium import ChromiumNotFoundError
from rla_jax.envs.gui.miniwob import MiniWobConfig, MiniWobEnvironment
from rla_jax.envs.gui.miniwob_tasks import task_ids, task_page

CONFIG = MiniWobConfig(num_envs=2, screenshot_scale=2)
SHAPE = (420, 320, 3)


@pytest.fixture(scope="module")
def env():
  environment = MiniWobEnvironment(CONFIG)
  yield environment
  environment.close()


def click_reply(x: int, y: int) -> GuiAction:
  """The policy reply that clicks screenshot pixel (x, y), parsed."""
  width, height = SHAPE[1], SHAPE[0]
  text = tool_call_reply(
    "Click the target.",
    {
      "action": "left_click",
      "coordinate": [pixel_to_grid(x, width), pixel_to_grid(y, height)],
    },
  )
  action = parse_action(text, width, height)
  assert isinstance(action, GuiAction) and (action.x, action.y) == (x, y)
  return action


def target_and_others(env, slot, instruction):
  target = instruction.split('"')[1]
  boxes = env.element_boxes(slot, "#area button")
  right = [box for box in boxes if box.text == target]
  wrong = [box for box in boxes if box.text != target]
  return right[0], wrong


def test_missing_chromium_is_one_clear_error_before_any_work(monkeypatch):
  monkeypatch.setenv("MINIWOB_CHROME_BINARY", "/nonexistent/chromium")
  with pytest.raises(ChromiumNotFoundError, match="chromium chromium-driver"):
    MiniWobEnvironment(MiniWobConfig(num_envs=1))


def test_bad_config_values_name_the_field():
  with pytest.raises(ValueError, match="num_envs = 0"):
    MiniWobConfig(num_envs=0)
  with pytest.raises(ValueError, match="screenshot_scale"):
    MiniWobConfig(screenshot_scale=0)
  with pytest.raises(ValueError, match="data_mode"):
    MiniWobConfig(data_mode="eval")


@needs_browser
def test_correct_click_succeeds_and_a_wrong_click_does_not(env):
  # Seeds whose click-button instance has a button with another label.
  for seed in range(20, 60):
    first = env.reset(["click-button", "click-button"], [seed, seed])
    right, wrong = target_and_others(env, 0, first[0].instruction)
    if wrong:
      break
  else:
    pytest.fail("no click-button seed in 20..59 with a wrong button")
  for observation in first:
    assert observation.screenshot.shape == SHAPE
    assert observation.screenshot.dtype == np.uint8
    assert not observation.done and observation.reward == 0.0
  assert first[0].instruction == first[1].instruction
  after = env.step([click_reply(*right.center), click_reply(*wrong[0].center)])
  assert after[0].done and after[0].success and after[0].reward > 0
  assert after[1].done and not after[1].success and after[1].reward < 0
  assert after[0].screenshot.shape == after[1].screenshot.shape == SHAPE
  assert after[0].info["executed"].startswith("left_click")
  # A finished slot ignores further actions.
  again = env.step([click_reply(*right.center), None])
  assert (
    again[0].done and again[0].reward == 0.0 and again[0].info["already_done"]
  )


@needs_browser
def test_a_click_on_empty_space_does_nothing(env):
  env.reset(["click-button", "click-button"], [5, 5])
  after = env.step([click_reply(300, 400), InvalidAction("no tool_call")])
  assert not after[0].done and not after[0].success
  assert after[1].info["invalid_reason"] == "no tool_call"
  assert not after[1].done and after[1].info["step"] == 1


@needs_browser
def test_seeds_reproduce_the_same_instance(env):
  first = env.reset(["click-button", "click-button"], [11, 12])
  again = env.reset(["click-button", "click-button"], [11, 12])
  for before, now in zip(first, again, strict=True):
    assert before.instruction == now.instruction
    np.testing.assert_array_equal(before.screenshot, now.screenshot)
  differ = [
    first[0].instruction != first[1].instruction
    or not np.array_equal(first[0].screenshot, first[1].screenshot)
  ]
  assert differ == [True]


@needs_browser
def test_typing_into_a_field_and_submitting(env):
  observations = env.reset(["enter-text", "enter-text"], [3, 3])
  word = observations[0].instruction.split('"')[1]
  field = env.element_boxes(0, "#tt")[0]
  submit = env.element_boxes(0, "#subbtn")[0]
  height, width, _ = SHAPE

  def parsed(arguments):
    return parse_action(tool_call_reply("step", arguments), width, height)

  env.step([click_reply(*field.center), click_reply(*field.center)])
  typed = parsed({"action": "type", "text": word})
  wrong = parsed({"action": "type", "text": word + "x"})
  env.step([typed, wrong])
  after = env.step([click_reply(*submit.center), click_reply(*submit.center)])
  assert after[0].success and after[0].reward == 1.0
  assert after[1].done and not after[1].success


@needs_browser
def test_every_pointer_and_key_kind_executes(env):
  observations = env.reset(["enter-text", "enter-text"], [4, 4])
  word = observations[0].instruction.split('"')[1]
  field = env.element_boxes(0, "#tt")[0]
  submit = env.element_boxes(0, "#subbtn")[0]
  height, width, _ = SHAPE
  empty = (300, 400)
  pointer_steps = [
    GuiAction("mouse_move", x=empty[0], y=empty[1]),
    GuiAction("right_click", x=empty[0], y=empty[1]),
    GuiAction("middle_click"),
    GuiAction("scroll", x=empty[0], y=empty[1], scroll_pixels=-50),
    GuiAction("left_click_drag", x=250, y=380, start_x=300, start_y=410),
    GuiAction("double_click", x=field.center[0], y=field.center[1]),
    GuiAction("type", text=word + "xy"),
    GuiAction("key", keys=("backspace",)),
    GuiAction("key", keys=("shift", "left")),
    GuiAction("key", keys=("delete",)),
  ]
  for action in pointer_steps:
    after = env.step([action, None])
    assert not after[0].done, (action, after[0].info)
    assert after[0].info["executed"] == action.summary()
  (done, _) = env.step([click_reply(*submit.center), None])
  assert done.success, done.info


@needs_browser
def test_terminate_and_step_limit_end_the_episode_as_failures():
  config = MiniWobConfig(num_envs=1, max_steps=2, screenshot_scale=1)
  with MiniWobEnvironment(config) as single:
    (first,) = single.reset(["click-test"], [0])
    assert first.screenshot.shape == (210, 160, 3)
    (ended,) = single.step([GuiAction("terminate", status="success")])
    assert ended.done and not ended.success and ended.reward == -1.0
    single.reset(["click-test"], [0])
    single.step([GuiAction("wait", wait_seconds=0.0)])
    (limited,) = single.step([None])
    assert limited.done and limited.info["truncated"] and not limited.success


@needs_browser
def test_a_page_that_navigated_away_fails_and_reset_recovers(env):
  env.reset(["click-button", "click-button"], [1, 1])
  # Stands in for an action that followed a real link off the task page.
  env._slots[0].driver.get("about:blank")
  gone, alive = env.step([None, None])
  assert gone.done and not gone.success and gone.reward == -1.0
  assert "page is gone" in gone.info["reason"] and not alive.done
  again = env.reset(["click-button", "click-button"], [1, 1])
  assert again[0].instruction == again[1].instruction != ""


@needs_browser
def test_the_demo_episode_renders_a_successful_click(tmp_path, capsys):
  from launch.gui_episode import main

  assert main(["--seed=6", f"--out={tmp_path}"]) == 0
  printed = capsys.readouterr().out
  assert "done=True success=True reward=1.0" in printed
  frames = sorted(tmp_path.glob("click-button-seed6_*.png"))
  assert [frame.name[-7:] for frame in frames] == ["000.png", "001.png"]


@needs_browser
def test_the_shipped_task_pages_are_listed():
  ids = task_ids()
  assert {"click-button", "click-test", "enter-text"} <= set(ids)
  assert len(ids) > 100 and ids == sorted(ids)
  assert task_page("click-button").name == "click-button.html"
  with pytest.raises(ValueError, match="unknown"):
    task_page("../core/core")


@needs_browser
def test_bad_batches_and_task_ids_raise(env):
  with pytest.raises(ValueError, match="task_ids has 1 entries; expected 2"):
    env.reset(["click-button"], [0])
  with pytest.raises(ValueError, match="unknown MiniWoB\\+\\+ task id"):
    env.reset(["click-button", "no-such-task"], [0, 0])
  with pytest.raises(ValueError, match="unsupported"):
    env.reset(["click-button", "flight.AA"], [0, 0])
  env.reset(["click-button", "click-button"], [0, 0])
  with pytest.raises(ValueError, match=r"actions\[1\] point \(320, 5\)"):
    env.step([None, GuiAction("left_click", x=320, y=5)])
