"""MiniWoB++ backend: N headless-Chromium environments in one process.

Each slot is one Chromium driven by Selenium (chromedriver) on the task
pages the ``miniwob`` pip package ships (``miniwob/html/miniwob/*.html``,
opened as ``file://``; the FlightWoB ``flight.*`` tasks need an HTTP server
and are not supported). The page's own JavaScript (``core.js``) generates
the instance and the reward; this module only:

- fixes the viewport to the 160x210 CSS-pixel task area (Chrome DevTools
  ``Emulation.setDeviceMetricsOverride``) at ``screenshot_scale`` device
  pixels per CSS pixel, so every screenshot is uint8
  [210 * scale, 160 * scale, 3];
- seeds an instance with ``Math.seedrandom(seed)`` before
  ``core.startEpisodeReal()`` (same task + seed -> same instance);
- lengthens the page's episode timer (``core.EPISODE_MAX_TIME``, 10 s by
  default, too short for an LLM policy) to ``episode_max_seconds``;
- keeps the final frame visible after the episode ends (the page would
  cover it with its "START" screen);
- executes a ``GuiAction`` by coordinates with W3C pointer / key / wheel
  actions (screenshot pixel p -> CSS pixel p // scale).

Rewards: ``reward`` is the page's raw reward once the episode ends (+1
success, -1 failure, partial values on the "soft" tasks; 0.0 before the
end), without the page's time discount (LLM latency is not the agent's
speed); ``success`` is raw reward >= 1. ``terminate`` ends the episode as a
failure (-1) unless the page already ended it. ``max_steps`` (0 = no limit)
ends an episode after that many steps as a failure with
``info["truncated"] = True``.

Chromium and chromedriver come from ``MINIWOB_CHROME_BINARY`` /
``MINIWOB_CHROMEDRIVER`` (default: the Debian packages' ``/usr/bin/chromium``
and ``/usr/bin/chromedriver``, else ``PATH``); Selenium is always given both
paths, so it never tries to download a driver. If either is missing,
``ChromiumNotFoundError`` is raised before any browser starts.
"""

from __future__ import annotations

import base64
import concurrent.futures
import dataclasses
import io
import pathlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from PIL import Image

from rla_jax.envs.gui.actions import GuiAction, InvalidAction
from rla_jax.envs.gui.chromium import (
  find_browser,
  start_driver,
)
from rla_jax.envs.gui.interface import GuiObservation, StepAction, check_batch
from rla_jax.envs.gui.miniwob_tasks import miniwob_pages_dir, task_page

TASK_WIDTH_CSS = 160
TASK_HEIGHT_CSS = 210
# The page's episode state and instruction, read in one round trip.
_STATE_SCRIPT = (
  "return {done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL,"
  " discounted: WOB_REWARD_GLOBAL, reason: WOB_REWARD_REASON,"
  " utterance: core.getUtterance()};"
)
_READY_POLL_SECONDS = 0.02
_READY_MAX_POLLS = 250


@dataclasses.dataclass(frozen=True)
class MiniWobConfig:
  """Settings of a MiniWoB++ environment batch.

  Attributes:
    num_envs: N, the number of browsers (slots).
    screenshot_scale: Device pixels per CSS pixel; screenshots are
      [210 * scale, 160 * scale, 3].
    episode_max_seconds: The page's episode timer (it ends the episode with
      reward -1, "timed out").
    max_steps: Steps per episode before it is ended as a failure (0 = none).
    settle_seconds: Pause after an action before the screenshot.
    max_wait_seconds: Cap on the real sleep of a ``wait`` action.
    data_mode: The page's data mode (``core.setDataMode``).
  """

  num_envs: int = 1
  screenshot_scale: int = 2
  episode_max_seconds: float = 600.0
  max_steps: int = 0
  settle_seconds: float = 0.0
  max_wait_seconds: float = 1.0
  data_mode: str = "train"

  def __post_init__(self):
    bounds = {
      "num_envs": (1, 64),
      "screenshot_scale": (1, 8),
      "episode_max_seconds": (1e-3, 86_400.0),
      "max_steps": (0, 10_000),
      "settle_seconds": (0.0, 60.0),
      "max_wait_seconds": (0.0, 60.0),
    }
    for name, (low, high) in bounds.items():
      value = getattr(self, name)
      if not low <= value <= high:
        raise ValueError(
          f"MiniWobConfig.{name} = {value} not in [{low}, {high}]"
        )
    if self.data_mode not in ("train", "test", "default"):
      raise ValueError(f"MiniWobConfig.data_mode {self.data_mode!r} unknown")

  @property
  def screenshot_shape(self) -> tuple[int, int, int]:
    """(H, W, 3) of every screenshot."""
    scale = self.screenshot_scale
    return (TASK_HEIGHT_CSS * scale, TASK_WIDTH_CSS * scale, 3)


@dataclasses.dataclass(frozen=True)
class ElementBox:
  """A page element's box in screenshot pixels (an oracle for scripts/tests).

  Attributes:
    text: The element's text content, whitespace-collapsed.
    left: Left edge (pixels).
    top: Top edge (pixels).
    width: Width (pixels).
    height: Height (pixels).
  """

  text: str
  left: float
  top: float
  width: float
  height: float

  @property
  def center(self) -> tuple[int, int]:
    """The box centre as integer pixels (x, y)."""
    return int(self.left + self.width / 2), int(self.top + self.height / 2)


@dataclasses.dataclass
class _Slot:
  """One browser and the state of its current episode."""

  driver: Any
  page: pathlib.Path | None = None
  task_id: str = ""
  seed: int = 0
  steps: int = 0
  cursor: tuple[int, int] = (0, 0)
  final: GuiObservation | None = None


class MiniWobEnvironment:
  """N MiniWoB++ task pages in N headless Chromiums (``GuiEnvironment``)."""

  def __init__(self, config: MiniWobConfig = MiniWobConfig()):
    """Starts ``config.num_envs`` browsers.

    Raises:
      ChromiumNotFoundError: Chromium, chromedriver, selenium or miniwob is
        missing (checked before any browser starts).
      ValueError: A bad config value.
    """
    self._browser = find_browser()
    miniwob_pages_dir()
    self.config = config
    self._pool = concurrent.futures.ThreadPoolExecutor(config.num_envs)
    self._slots: list[_Slot] = []
    futures = [
      self._pool.submit(
        start_driver,
        self._browser,
        TASK_WIDTH_CSS,
        TASK_HEIGHT_CSS,
        config.screenshot_scale,
      )
      for _ in range(config.num_envs)
    ]
    concurrent.futures.wait(futures)
    failures = [future.exception() for future in futures if future.exception()]
    self._slots = [
      _Slot(future.result()) for future in futures if not future.exception()
    ]
    if failures:
      self.close()
      raise failures[0]

  @property
  def num_envs(self) -> int:
    return self.config.num_envs

  def _map(self, function: Callable[[Any], Any], items: Sequence[Any]) -> list:
    return list(self._pool.map(function, items))

  def reset(
    self, task_ids: Sequence[str], seeds: Sequence[int]
  ) -> list[GuiObservation]:
    """Starts task ``task_ids[i]`` seeded ``seeds[i]`` in slot i."""
    check_batch("task_ids", task_ids, self.num_envs)
    check_batch("seeds", seeds, self.num_envs)
    pages = [task_page(task_id) for task_id in task_ids]
    for seed in seeds:
      if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seeds must be ints, got {seed!r}")
    jobs = list(zip(self._slots, pages, task_ids, seeds, strict=True))
    return self._map(lambda job: self._reset_slot(*job), jobs)

  def _reset_slot(
    self, slot: _Slot, page: pathlib.Path, task_id: str, seed: int
  ) -> GuiObservation:
    driver = slot.driver
    if slot.page != page:
      driver.get(page.as_uri())
      self._wait_for(driver, "return !!(window.core && core.cover_div);")
      # Keep the last frame on screen when an episode ends.
      driver.execute_script("core.startEpisode = function () {};")
      slot.page = page
    driver.execute_script(
      "core.EPISODE_MAX_TIME = arguments[0];"
      "Math.seedrandom(arguments[1]);"
      "core.setDataMode(arguments[2]);"
      "core.startEpisodeReal();",
      int(self.config.episode_max_seconds * 1000),
      str(int(seed)),
      self.config.data_mode,
    )
    self._wait_for(driver, "return WOB_TASK_READY === true;")
    slot.task_id, slot.seed, slot.steps = task_id, int(seed), 0
    slot.cursor, slot.final = (0, 0), None
    state = driver.execute_script(_STATE_SCRIPT)
    return self._observe(
      slot, state["utterance"], reward=0.0, done=False, success=False, info={}
    )

  def _wait_for(self, driver: Any, script: str) -> None:
    for _ in range(_READY_MAX_POLLS):
      if driver.execute_script(script):
        return
      time.sleep(_READY_POLL_SECONDS)
    raise RuntimeError(f"MiniWoB++ page not ready: {script!r} stayed false")

  def step(self, actions: Sequence[StepAction]) -> list[GuiObservation]:
    """Applies ``actions[i]`` in slot i (see the module docstring)."""
    check_batch("actions", actions, self.num_envs)
    height, width, _ = self.config.screenshot_shape
    for index, action in enumerate(actions):
      if not isinstance(action, GuiAction | InvalidAction | type(None)):
        raise ValueError(
          f"actions must be GuiAction/InvalidAction/None: {action!r}"
        )
      if isinstance(action, GuiAction):
        for x, y in ((action.x, action.y), (action.start_x, action.start_y)):
          if x is not None and not (0 <= x < width and 0 <= y < height):
            raise ValueError(
              f"actions[{index}] point ({x}, {y}) is off the {width}x{height}"
              " screenshot"
            )
    if any(not slot.task_id for slot in self._slots):
      raise RuntimeError("step() before reset()")
    jobs = list(zip(self._slots, actions, strict=True))
    return self._map(lambda job: self._step_slot(*job), jobs)

  def _step_slot(self, slot: _Slot, action: StepAction) -> GuiObservation:
    if slot.final is not None:
      return dataclasses.replace(
        slot.final, reward=0.0, info={**slot.final.info, "already_done": True}
      )
    slot.steps += 1
    info: dict[str, Any] = {}
    if isinstance(action, InvalidAction):
      info["invalid_reason"] = action.reason
    elif isinstance(action, GuiAction):
      info["executed"] = action.summary()
      self._execute(slot, action)
      if self.config.settle_seconds:
        time.sleep(self.config.settle_seconds)
    state = self._read_state(slot)
    if not state["done"] and isinstance(action, GuiAction):
      if action.kind == "terminate":
        state = self._end_episode(slot, "terminated by the agent")
    if not state["done"] and 0 < self.config.max_steps <= slot.steps:
      info["truncated"] = True
      state = self._end_episode(slot, "step limit")
    done = bool(state["done"])
    raw = float(state["raw"]) if done else 0.0
    info.update(
      raw_reward=raw,
      discounted_reward=float(state["discounted"]) if done else 0.0,
      reason=state["reason"],
    )
    observation = self._observe(
      slot,
      state["utterance"],
      reward=raw,
      done=done,
      success=done and raw >= 1.0,
      info=info,
    )
    if done:
      slot.final = observation
    return observation

  def _read_state(self, slot: _Slot) -> dict[str, Any]:
    """The page's episode state; a failed episode if the page is gone."""
    from selenium.common.exceptions import JavascriptException

    try:
      return slot.driver.execute_script(_STATE_SCRIPT)
    except JavascriptException as error:
      # The action navigated away from the task page (core.js is gone): the
      # episode fails and the next reset reloads the page.
      slot.page = None
      reason = f"the task page is gone: {error.msg}"[:200]
      return {
        "done": True,
        "raw": -1.0,
        "discounted": -1.0,
        "reason": reason,
        "utterance": "",
      }

  def _end_episode(self, slot: _Slot, reason: str) -> dict[str, Any]:
    return slot.driver.execute_script(
      "core.endEpisode(-1.0, false, arguments[0]);" + _STATE_SCRIPT, reason
    )

  def _execute(self, slot: _Slot, action: GuiAction) -> None:
    from rla_jax.envs.gui import selenium_input

    scale = self.config.screenshot_scale
    if action.kind == "wait":
      time.sleep(min(action.wait_seconds, self.config.max_wait_seconds))
      return
    if action.kind == "terminate":
      return
    slot.cursor = selenium_input.execute(
      slot.driver, action, slot.cursor, scale
    )

  def _observe(
    self,
    slot: _Slot,
    instruction: Any,
    *,
    reward: float,
    done: bool,
    success: bool,
    info: dict[str, Any],
  ) -> GuiObservation:
    # DevTools capture with fast (still lossless) PNG compression.
    capture = slot.driver.execute_cdp_cmd(
      "Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}
    )
    png = base64.b64decode(capture["data"])
    image = Image.open(io.BytesIO(png)).convert("RGB")
    height, width, _ = self.config.screenshot_shape
    if image.size != (width, height):
      image = image.crop((0, 0, width, height))
    if isinstance(instruction, dict):
      instruction = instruction.get("utterance", "")
    return GuiObservation(
      screenshot=np.asarray(image, dtype=np.uint8),
      instruction=str(instruction),
      done=done,
      success=success,
      reward=reward,
      info={"task_id": slot.task_id, "seed": slot.seed, "step": slot.steps}
      | info,
    )

  def element_boxes(
    self, slot_index: int, css_selector: str
  ) -> list[ElementBox]:
    """Boxes of the elements matching ``css_selector`` in slot i's page.

    An oracle for scripted agents, tests and benchmarks (the policy only
    sees screenshots).
    """
    rows = self._slots[slot_index].driver.execute_script(
      "return Array.from(document.querySelectorAll(arguments[0])).map("
      "e => {const r = e.getBoundingClientRect();"
      " return [e.textContent.replace(/\\s+/g, ' ').trim(),"
      " r.left, r.top, r.width, r.height];});",
      css_selector,
    )
    scale = self.config.screenshot_scale
    return [
      ElementBox(text, *(float(v) * scale for v in box)) for text, *box in rows
    ]

  def close(self) -> None:
    """Quits every browser; idempotent."""
    slots, self._slots = self._slots, []
    for slot in slots:
      try:
        slot.driver.quit()
      except Exception:  # best effort on shutdown
        pass
    self._pool.shutdown()

  def __enter__(self) -> MiniWobEnvironment:
    return self

  def __exit__(self, *exc_info: object) -> None:
    self.close()
