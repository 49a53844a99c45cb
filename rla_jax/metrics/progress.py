"""Where a run is, for the person watching it: the RL step, the phase within
it and its rows done of rows to do, the run's elapsed time and an estimate
of the time left.

The loop owns one `RunProgress`; phases report through `RunProgress.phase`
(a `ProgressFn`: phase name, done, total, detail), which the rollout, judge
and training code accept as an optional callback. Lines are throttled (at
most one per `every_s` seconds, plus each phase's last one), so a long phase
prints a few lines and a short one prints one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

ProgressFn = Callable[[str, int, int, str], None]


def format_duration(seconds: float) -> str:
  """Seconds as h:mm:ss."""
  s = max(0, int(round(seconds)))
  return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclasses.dataclass
class RunProgress:
  """Progress lines of a run of `total_steps` RL steps.

  Time left = (mean wall time of the finished RL steps) x (steps to go)
  + (the start evaluation's time, if there was one, once more for the
  final evaluation, less what the final evaluation has already run);
  unknown ("?") before the first RL step ends, and during a final
  evaluation whose length is unknown (a resumed run had no start
  evaluation).
  """

  total_steps: int
  log: Callable[[str], None]
  every_s: float = 15.0
  clock: Callable[[], float] = time.monotonic

  def __post_init__(self):
    self._start = self.clock()
    self._last_line = -float("inf")
    self._where = "start evaluation"
    self._step_seconds: list[float] = []
    self._eval_seconds: float | None = None
    self._eval_began: float | None = None  # clock() of a running evaluation
    self._steps_done = 0

  def begin_step(self, step: int) -> None:
    """RL step `step` (0-based) starts."""
    self._where = f"step {step + 1}/{self.total_steps}"

  def end_step(self, step: int, seconds: float) -> None:
    """RL step `step` ended after `seconds` (its own work, evaluation
    excluded)."""
    self._step_seconds.append(seconds)
    self._steps_done = step + 1

  def begin_eval(self, step: int) -> None:
    self._where = (
      "start evaluation" if step < 0 else f"evaluation after step {step + 1}"
    )
    self._eval_began = self.clock()

  def end_eval(
    self, step: int, seconds: float, full_seconds: float | None = None
  ) -> None:
    """An evaluation ended after `seconds`. The start evaluation's time is
    the final one's estimate, unless it gave `full_seconds`: a start that
    was recorded and only partly replayed estimates a full evaluation."""
    self._eval_began = None
    if step < 0:
      self._eval_seconds = seconds if full_seconds is None else full_seconds

  def time_left(self) -> float | None:
    """Estimated seconds to the end of the run (None: not known yet)."""
    if not self._step_seconds:
      return None
    mean = sum(self._step_seconds) / len(self._step_seconds)
    to_go = self.total_steps - self._steps_done
    final_eval_running = to_go == 0 and self._eval_began is not None
    if self._eval_seconds is None:
      return None if final_eval_running else mean * to_go
    eval_left = self._eval_seconds
    if final_eval_running:
      eval_left = max(0.0, eval_left - (self.clock() - self._eval_began))
    return mean * to_go + eval_left

  def line(self, phase: str, done: int, total: int, detail: str = "") -> str:
    """The progress line (not throttled)."""
    left = self.time_left()
    parts = [
      f"[{self._where}] {phase} {done}/{total}"
      + (f" {detail}" if detail else ""),
      f"elapsed {format_duration(self.clock() - self._start)}",
      f"left ~{format_duration(left)}" if left is not None else "left ?",
    ]
    return " | ".join(parts)

  def phase(self, phase: str, done: int, total: int, detail: str = "") -> None:
    """A `ProgressFn`: logs the line if `every_s` passed since the last one
    or the phase is complete (done >= total)."""
    now = self.clock()
    if done < total and now - self._last_line < self.every_s:
      return
    self._last_line = now
    self.log(self.line(phase, done, total, detail))
