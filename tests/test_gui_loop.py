"""The GUI loop's pieces: task rewrites, prompts with image placeholders,
critic summaries, config errors before any model work, and one RL step of
the loop over OSWorld-format recorded desktops (the MiniWoB++ loop runs
end to end, with an exact resume, in tests/test_loop_resume.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_gui_osworld import write_trajectory

from configs import gui as gui_config
from rla_jax.envs.gui.actions import GuiAction, InvalidAction
from rla_jax.envs.gui.tasks import (
  FAMILIES,
  GuiTask,
  OSWorldTask,
  gui_task_set,
  load_osworld_examples,
  propose_gui_variant,
  propose_osworld_variant,
)
from rla_jax.errors import ConfigError
from rla_jax.rl import gui_prompts
from rla_jax.rl.gui_adaptation import critic_summary
from rla_jax.rl.gui_rollout import GuiEpisode
from rla_jax.rl.loops import make_loop


def test_rewrites_move_along_the_family_then_the_step_budget():
  task = GuiTask("click", 0, seed=3, max_steps=4)
  harder = propose_gui_variant(task, "harder")
  assert (harder.page, harder.seed, harder.max_steps) == ("click-test-2", 3, 4)
  top = GuiTask("click", len(FAMILIES["click"]) - 1, seed=3, max_steps=4)
  assert propose_gui_variant(top, "harder").max_steps == 3
  assert propose_gui_variant(task, "easier").max_steps == 6  # bottom level
  assert propose_gui_variant(harder, "easier") == task
  assert propose_gui_variant(GuiTask("click", 3, 0, 1), "harder") is None
  assert GuiTask.from_dict(harder.to_dict()) == harder
  with pytest.raises(ValueError, match="level 9 outside 0..3"):
    GuiTask("click", 9, 0, 4)


def test_osworld_rewrites_and_examples(tmp_path):
  task = OSWorldTask("abc", max_steps=5)
  assert propose_osworld_variant(task, "harder").task_id == "abc/4"
  assert propose_osworld_variant(task, "easier").task_id == "abc/7"
  (tmp_path / "d").mkdir()
  (tmp_path / "d" / "x.json").write_text(
    json.dumps({"id": "x", "instruction": "Do it."})
  )
  (tmp_path / "notes.json").write_text(json.dumps({"other": 1}))
  assert list(load_osworld_examples(str(tmp_path))) == ["x"]
  (tmp_path / "empty").mkdir()
  with pytest.raises(ValueError, match="no OSWorld example JSONs"):
    load_osworld_examples(str(tmp_path / "empty"))
  with pytest.raises(ValueError, match="not found"):
    load_osworld_examples(str(tmp_path / "missing"))


def test_task_set_cycles_pairs_with_distinct_seeds():
  tasks = gui_task_set(("click", "text"), (0, 1), 6, 100, 4)
  assert [t.page for t in tasks[:4]] == [
    "click-test",
    "click-test-2",
    "focus-text",
    "focus-text-2",
  ]
  assert len({t.task_id for t in tasks}) == 6


def test_prompts_hold_one_placeholder_per_image():
  text = gui_prompts.policy_prompt("Click OK.", ["left_click (1, 2)"], 2)
  assert text.count(gui_prompts.IMAGE) == 2
  assert "1. left_click (1, 2)" in text
  judge = gui_prompts.judge_prompt("Click OK.", [], True, "type 'a'", "reply")
  assert judge.count(gui_prompts.IMAGE) == 3
  first = gui_prompts.judge_prompt("Click OK.", [], False, "", "reply")
  assert first.count(gui_prompts.IMAGE) == 2
  assert "\\boxed{}" in judge


def test_critic_summary_reports_what_the_judge_saw():
  task = GuiTask("click", 0, 0, 4)
  good = GuiEpisode(task, actions=[GuiAction("left_click", x=3, y=4)] * 2)
  good.won = True
  bad = GuiEpisode(task, actions=[InvalidAction("no <tool_call> block")])
  scores = np.zeros((2, 2, 2))
  scores[0] = [[1, 1], [1, -1]]
  scores[1, 0] = [-1, -1]
  text = critic_summary([good, bad], scores)
  assert "success 0.50 over 2 rollouts" in text
  assert "valid actions 0.67" in text
  assert "steps judged as progress 0.33" in text
  assert "rollout 1 step 1 (invalid: no <tool_call> block): -1.00" in text


@pytest.mark.parametrize(
  "overrides, message",
  [
    ({"env.backend": "vnc"}, "env.backend='vnc' must be one of"),
    ({"env.backend": "osworld"}, "env.osworld.examples_dir=''"),
    ({"env.history_images": 0}, "env.history_images=0"),
    ({"env.num_tasks": 5}, "env.num_slots=4 must be >= env.num_tasks=5"),
  ],
)
def test_bad_settings_fail_before_any_model_work(tmp_path, overrides, message):
  c = gui_config.get_config("smoke")
  c.embedded.cache_dir = str(tmp_path / "never-built")
  for key, value in overrides.items():
    section, name = key.split(".")
    c[section][name] = value
  with pytest.raises(ConfigError, match=message):
    make_loop(c, str(tmp_path / "w"))
  assert not (tmp_path / "never-built").exists()


def test_paper_preset_needs_model_directories(tmp_path):
  c = gui_config.get_config("paper")
  with pytest.raises(ConfigError, match="needs config.model.policy_dir"):
    make_loop(c, str(tmp_path / "w"))


@pytest.mark.slow
def test_one_rl_step_over_recorded_osworld_desktops(tmp_path):
  """The OSWorld path of the loop: tasks from example JSONs, screenshots
  from a recorded desktop (no VM), the policy's replies translated to
  pyautogui commands, the evaluator's score as the outcome, judge votes,
  training and a checkpoint."""
  steps = [({"action": "left_click", "coordinate": [1, 1]}, "x")] * 4
  recorded = write_trajectory(tmp_path / "rec", steps, 1.0, size=(320, 240))
  examples = tmp_path / "examples"
  examples.mkdir()
  (examples / "demo.json").write_text((recorded / "task.json").read_text())
  c = gui_config.get_config("smoke")
  c.total_steps = 1
  c.env.update(backend="osworld", num_slots=1, num_tasks=1, num_browsers=2)
  c.env.osworld.update(
    examples_dir=str(examples),
    recorded_dir=str(recorded),
    screen_width=320,
    screen_height=240,
    pause_seconds=0.0,
    reset_wait_seconds=0.0,
  )
  c.rollout.max_prompt_len = 640  # 3 screenshots of 70 tokens in the judge
  c.eval.num_tasks = 1
  # Every rollout succeeds (the recorded score is 1): advantages come from
  # the judge's votes only, and zero ones are kept so the step trains.
  c.reward.drop_zero_advantage = False
  history = make_loop(c, str(tmp_path / "w"), log=lambda _: None).run()
  step = history[1]
  assert step["train/mean_episode_steps"] == 2.0  # the smoke step budget
  # evaluated when the task's budget ended the episode: the recorded 1.0
  assert step["train/rollout_accuracy"] == 1.0
  assert step["policy/updates"] + step["reward/updates"] >= 1
  assert (tmp_path / "w" / "checkpoints" / "0").is_dir()
  assert "eval/success" in history[-1]
