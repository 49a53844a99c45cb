"""OSWorld adapter: the ``GuiEnvironment`` protocol over OSWorld's
``DesktopEnv``, plus a replayer for recorded OSWorld trajectories.

Live use (needs the ``desktop-env`` package and a VM provider; see
docs/GUI.md)::

  env = OSWorldEnvironment(
    task_configs,  # {example id: OSWorld example json}
    desktop_kwargs={"provider_name": "docker", "os_type": "Ubuntu",
                    "action_space": "pyautogui", "headless": True},
  )
  observations = env.reset(["<example id>"], [0])
  observations = env.step([parse_action(reply, *size)])

Each slot holds one ``desktop_env.desktop_env.DesktopEnv`` (imported lazily;
``DesktopEnvMissingError`` if absent). A ``GuiAction`` (pixels on the
observed screenshot) becomes the pyautogui command string OSWorld executes,
the way the reference agent (Open-AgentRL ``qwen3vl_agent_local.py``)
writes it, with coordinates scaled from the screenshot to the VM screen;
``wait`` / ``terminate`` become OSWorld's ``WAIT`` / ``DONE`` / ``FAIL``.
Unlike the reference, strings are written with ``repr`` (a Python literal),
so typed text cannot break out of the call. When the episode ends (DONE,
FAIL or ``max_steps``) the slot calls ``DesktopEnv.evaluate()``: that score
is the reward and success is score >= 1. An ``InvalidAction`` or None
executes nothing (the screenshot is re-read), as in the MiniWoB++ backend.

Recorded trajectories: ``RecordedDesktop`` stands in for ``DesktopEnv`` and
serves a directory in the layout OSWorld's ``lib_run_single.py`` writes
(plus the example's config): ``task.json`` (the OSWorld example: ``id``,
``instruction``, ...), ``step_0.png`` ... ``step_N.png``, ``traj.jsonl`` (one
line per step: ``step_num``, ``action`` = the executed command, ``response``
= the policy reply, ``screenshot_file``) and ``result.txt`` (the evaluator's
score). ``replay_trajectory`` drives ``OSWorldEnvironment`` over it with the
recorded replies and reports whether each translated command equals the
recorded one.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
import json
import pathlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from rla_jax.envs.gui.action_parser import parse_action
from rla_jax.envs.gui.actions import GuiAction, InvalidAction
from rla_jax.envs.gui.interface import GuiObservation, StepAction, check_batch

# KEY_NAMES (rla_jax.envs.gui.actions) that pyautogui spells differently.
PYAUTOGUI_KEY_NAMES = {
  "control": "ctrl",
  "cmd": "command",
  "meta": "win",
  "super": "win",
}
DEFAULT_DRAG_SECONDS = 0.5


class DesktopEnvMissingError(ImportError):
  """The ``desktop-env`` package (OSWorld's DesktopEnv) is not installed."""


def pyautogui_command(
  action: GuiAction, scale_x: float = 1.0, scale_y: float = 1.0
) -> str:
  """Translates an action into the command string OSWorld executes.

  Pixel (x, y) on the screenshot becomes (int(x * scale_x), int(y *
  scale_y)) on the VM screen.

  Args:
    action: The parsed action (screenshot pixels).
    scale_x: VM screen width / screenshot width.
    scale_y: VM screen height / screenshot height.

  Returns:
    A pyautogui call such as ``pyautogui.click(960, 540)``, or ``WAIT`` /
    ``DONE`` / ``FAIL``.
  """

  def point(x: int | None, y: int | None) -> str:
    return "" if x is None else f"{int(x * scale_x)}, {int(y * scale_y)}"

  kind = action.kind
  target = point(action.x, action.y)
  if kind in ("left_click", "right_click", "middle_click", "double_click"):
    name = {
      "left_click": "click",
      "right_click": "rightClick",
      "middle_click": "middleClick",
      "double_click": "doubleClick",
    }[kind]
    return f"pyautogui.{name}({target})"
  if kind == "mouse_move":
    return f"pyautogui.moveTo({target})"
  if kind == "left_click_drag":
    drag = f"pyautogui.dragTo({target}, duration={DEFAULT_DRAG_SECONDS})"
    if action.start_x is None:
      return drag
    return f"pyautogui.moveTo({point(action.start_x, action.start_y)}); {drag}"
  if kind == "type":
    return f"pyautogui.typewrite({action.text!r})"
  if kind == "key":
    keys = ", ".join(repr(PYAUTOGUI_KEY_NAMES.get(k, k)) for k in action.keys)
    return f"pyautogui.{'hotkey' if len(action.keys) > 1 else 'press'}({keys})"
  if kind == "scroll":
    where = "" if action.x is None else f", x={int(action.x * scale_x)}"
    where += "" if action.y is None else f", y={int(action.y * scale_y)}"
    return f"pyautogui.scroll({action.scroll_pixels}{where})"
  if kind == "wait":
    return "WAIT"
  if kind == "terminate":
    return "DONE" if action.status == "success" else "FAIL"
  raise ValueError(f"no pyautogui command for action kind {kind!r}")


def decode_screenshot(png: bytes) -> np.ndarray:
  """PNG bytes -> uint8 [H, W, 3] RGB."""
  return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.uint8)


def _make_desktop_env(**kwargs: Any) -> Any:
  try:
    from desktop_env.desktop_env import DesktopEnv
  except ImportError as error:
    raise DesktopEnvMissingError(
      "OSWorldEnvironment needs OSWorld's DesktopEnv: pip install desktop-env "
      "and a VM provider (docker, vmware, virtualbox, aws...); see docs/GUI.md"
      f" ({error})"
    ) from error
  return DesktopEnv(**kwargs)


@dataclasses.dataclass
class _Slot:
  desktop: Any
  task_id: str = ""
  steps: int = 0
  instruction: str = ""
  screenshot: np.ndarray | None = None
  final: GuiObservation | None = None
  step_limit: int = 0  # this episode's budget (0: the environment's)


class OSWorldEnvironment:
  """N OSWorld desktops behind the ``GuiEnvironment`` protocol."""

  def __init__(
    self,
    task_configs: Mapping[str, Mapping[str, Any]],
    *,
    num_envs: int = 1,
    desktop_kwargs: Mapping[str, Any] | None = None,
    desktop_factory: Callable[[], Any] | None = None,
    pause_seconds: float = 2.0,
    reset_wait_seconds: float = 60.0,
    max_steps: int = 15,
  ):
    """Creates ``num_envs`` desktops.

    Args:
      task_configs: OSWorld example configs by id (``reset``'s task ids).
      num_envs: N, the number of desktops.
      desktop_kwargs: ``DesktopEnv(**desktop_kwargs)`` arguments.
      desktop_factory: Builds one desktop instead of ``DesktopEnv`` (e.g. a
        ``RecordedDesktop``); ``desktop_kwargs`` is then unused.
      pause_seconds: ``DesktopEnv.step``'s pause after a command.
      reset_wait_seconds: Wait after a reset before the first screenshot
        (the reference waits 60 s for the VM to settle).
      max_steps: Steps before the episode is ended and evaluated.

    Raises:
      DesktopEnvMissingError: No factory and ``desktop-env`` is absent.
    """
    self._configs = dict(task_configs)
    self.pause_seconds = pause_seconds
    self.reset_wait_seconds = reset_wait_seconds
    self.max_steps = max_steps
    kwargs = dict(desktop_kwargs or {})
    factory = desktop_factory or (lambda: _make_desktop_env(**kwargs))
    self._slots = [_Slot(factory()) for _ in range(num_envs)]
    self._pool = concurrent.futures.ThreadPoolExecutor(num_envs)

  @property
  def num_envs(self) -> int:
    return len(self._slots)

  def set_step_limits(self, limits: Sequence[int]) -> None:
    """Per-slot step budgets of the episodes the next `reset` starts (a
    task's budget): at its limit an episode ends and is evaluated, as at
    max_steps. 0 = max_steps."""
    check_batch("limits", limits, self.num_envs)
    for slot, limit in zip(self._slots, limits, strict=True):
      slot.step_limit = int(limit)

  def reset(
    self, task_ids: Sequence[str], seeds: Sequence[int]
  ) -> list[GuiObservation]:
    """Starts example ``task_ids[i]`` in slot i (OSWorld ignores seeds)."""
    check_batch("task_ids", task_ids, self.num_envs)
    check_batch("seeds", seeds, self.num_envs)
    for task_id in task_ids:
      if task_id not in self._configs:
        raise ValueError(f"unknown OSWorld example id {task_id!r}")
    jobs = list(zip(self._slots, task_ids, seeds, strict=True))
    return list(self._pool.map(lambda job: self._reset_slot(*job), jobs))

  def _reset_slot(self, slot: _Slot, task_id: str, seed: int) -> GuiObservation:
    config = self._configs[task_id]
    slot.desktop.reset(task_config=dict(config))
    if self.reset_wait_seconds:
      time.sleep(self.reset_wait_seconds)
    observed = slot.desktop._get_obs()
    slot.task_id, slot.steps, slot.final = task_id, 0, None
    slot.instruction = str(
      config.get("instruction", observed.get("instruction"))
    )
    slot.screenshot = decode_screenshot(observed["screenshot"])
    return self._observation(slot, 0.0, False, {"seed": seed})

  def step(self, actions: Sequence[StepAction]) -> list[GuiObservation]:
    """Executes ``actions[i]`` in slot i (see the module docstring)."""
    check_batch("actions", actions, self.num_envs)
    if any(slot.screenshot is None for slot in self._slots):
      raise RuntimeError("step() before reset()")
    jobs = list(zip(self._slots, actions, strict=True))
    return list(self._pool.map(lambda job: self._step_slot(*job), jobs))

  def _step_slot(self, slot: _Slot, action: StepAction) -> GuiObservation:
    if slot.final is not None:
      return dataclasses.replace(
        slot.final, reward=0.0, info={**slot.final.info, "already_done": True}
      )
    slot.steps += 1
    info: dict[str, Any] = {}
    done = False
    if isinstance(action, GuiAction):
      height, width, _ = slot.screenshot.shape
      screen_width = getattr(slot.desktop, "screen_width", width)
      screen_height = getattr(slot.desktop, "screen_height", height)
      command = pyautogui_command(
        action, screen_width / width, screen_height / height
      )
      info["command"] = command
      observed, _, done, step_info = slot.desktop.step(
        command, self.pause_seconds
      )
      info["desktop_info"] = step_info
    else:
      if isinstance(action, InvalidAction):
        info["invalid_reason"] = action.reason
      observed = slot.desktop._get_obs()
    slot.screenshot = decode_screenshot(observed["screenshot"])
    limit = slot.step_limit or self.max_steps
    if not done and slot.steps >= limit:
      info["truncated"] = done = True
    if not done:
      return self._observation(slot, 0.0, False, info)
    score = float(slot.desktop.evaluate())
    info["score"] = score
    slot.final = self._observation(slot, score, True, info)
    return slot.final

  def _observation(
    self, slot: _Slot, reward: float, done: bool, info: dict[str, Any]
  ) -> GuiObservation:
    return GuiObservation(
      screenshot=slot.screenshot,
      instruction=slot.instruction,
      done=done,
      success=done and reward >= 1.0,
      reward=reward,
      info={"task_id": slot.task_id, "step": slot.steps} | info,
    )

  def close(self) -> None:
    """Closes every desktop; idempotent."""
    slots, self._slots = self._slots, []
    for slot in slots:
      slot.desktop.close()
    self._pool.shutdown()


class RecordedDesktop:
  """A ``DesktopEnv`` stand-in that serves a recorded trajectory directory.

  Screenshot k is ``step_k.png`` after k executed commands; ``evaluate``
  returns ``result.txt``'s score; ``executed`` lists the commands received.
  Layout: see the module docstring.
  """

  def __init__(self, directory: str | pathlib.Path):
    self.directory = pathlib.Path(directory)
    for name in ("task.json", "traj.jsonl", "result.txt", "step_0.png"):
      if not (self.directory / name).is_file():
        raise FileNotFoundError(
          f"recorded trajectory lacks {self.directory / name}"
        )
    self.task = json.loads((self.directory / "task.json").read_text())
    self.steps = [
      json.loads(line)
      for line in (self.directory / "traj.jsonl").read_text().splitlines()
      if line.strip()
    ]
    first = Image.open(self.directory / "step_0.png")
    self.screen_width, self.screen_height = first.size
    self.executed: list[str] = []

  def reset(self, task_config: Mapping[str, Any] | None = None) -> dict:
    self.executed = []
    return self._get_obs()

  def _get_obs(self) -> dict[str, Any]:
    path = self.directory / f"step_{len(self.executed)}.png"
    return {
      "screenshot": path.read_bytes(),
      "instruction": self.task["instruction"],
    }

  def step(self, command: str, pause: float = 0.0) -> tuple:
    if len(self.executed) >= len(self.steps):
      raise RuntimeError(f"{self.directory}: more steps than recorded")
    self.executed.append(command)
    done = command in ("DONE", "FAIL")
    return self._get_obs(), 0, done, {"done": done}

  def evaluate(self) -> float:
    return float((self.directory / "result.txt").read_text().strip())

  def close(self) -> None:
    pass


@dataclasses.dataclass(frozen=True)
class ReplayStep:
  """One recorded step, re-parsed and re-translated.

  Attributes:
    response: The recorded policy reply.
    parsed: What ``parse_action`` makes of it on the step's screenshot.
    recorded_command: The command OSWorld executed (``traj.jsonl`` action).
    translated_command: The command this adapter sends (None if invalid).
  """

  response: str
  parsed: GuiAction | InvalidAction
  recorded_command: str
  translated_command: str | None

  @property
  def matches(self) -> bool:
    return self.translated_command == self.recorded_command


@dataclasses.dataclass(frozen=True)
class ReplayReport:
  """A replayed trajectory: its steps and the final observation."""

  steps: tuple[ReplayStep, ...]
  final: GuiObservation


def replay_trajectory(directory: str | pathlib.Path) -> ReplayReport:
  """Replays a recorded OSWorld trajectory through ``OSWorldEnvironment``.

  Each recorded reply is parsed on the screenshot it answered and stepped
  through the adapter against a ``RecordedDesktop`` of ``directory``.

  Args:
    directory: A recorded trajectory (layout: the module docstring).

  Returns:
    The per-step comparison and the last observation (its ``success`` and
    ``reward`` come from ``result.txt``).
  """
  recorded = RecordedDesktop(directory)
  env = OSWorldEnvironment(
    {recorded.task["id"]: recorded.task},
    desktop_factory=lambda: recorded,
    pause_seconds=0.0,
    reset_wait_seconds=0.0,
    max_steps=max(len(recorded.steps), 1),
  )
  try:
    (observation,) = env.reset([recorded.task["id"]], [0])
    steps = []
    for entry in recorded.steps:
      height, width, _ = observation.screenshot.shape
      parsed = parse_action(entry["response"], width, height)
      (observation,) = env.step([parsed])
      steps.append(
        ReplayStep(
          response=entry["response"],
          parsed=parsed,
          recorded_command=entry["action"],
          translated_command=observation.info.get("command"),
        )
      )
      if observation.done:
        break
  finally:
    env.close()
  return ReplayReport(tuple(steps), observation)
