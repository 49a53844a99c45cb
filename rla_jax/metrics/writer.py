"""Per-step scalar metrics: TensorBoard event
files, a JSONL log and a terminal line.

Layout under ``workdir``:
  metrics.jsonl   one JSON object per step:
                  {"step": int, "time": float, <key>: number|null}
  tensorboard/    TensorBoard event files (written with tensorboardX's
                  synchronous writer)

Only the primary process (``jax.process_index() == 0``, passed in by the caller)
writes; on other processes every method is a no-op. Every ``write`` is flushed
(and the event file fsync-ed) before it returns, so a SIGKILL loses at most the
step being written; a torn last JSONL line left by a kill is dropped (with a
warning) when the file is next opened.

Resuming: the loop restores a checkpoint at step s and calls
``truncate_after(s)``, which drops JSONL entries with step >= s and starts a new
event file whose first event is a SessionLog.START at step s (TensorBoard then
discards older events with step >= s). Given the same metrics (and clock), the
resumed JSONL equals the uninterrupted one byte for byte.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from rla_jax.metrics.keys import DEFAULT_DISPLAY_KEYS

JSONL_NAME = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
RESERVED_KEYS = ("step", "time")

_log = logging.getLogger(__name__)


def to_number(key: str, value: Any) -> int | float:
  """A metric value as a Python int or float
  (bool -> int; numpy/jax 0-d -> item)."""
  if isinstance(value, (bool, numbers.Integral)):
    return int(value)
  if isinstance(value, numbers.Real):
    return float(value)
  if getattr(value, "shape", None) == () and hasattr(value, "item"):
    return to_number(key, value.item())
  raise TypeError(
    f"metric {key!r} has value {value!r} of type {type(value).__name__}; "
    "expected a real number (int, float, bool or a 0-d array)"
  )


def _load_jsonl(path: str) -> tuple[list[dict], bool]:
  """(entries, torn) of a metrics.jsonl; torn:
  the last line is an incomplete write."""
  if not os.path.exists(path):
    return [], False
  with open(path, encoding="utf-8") as f:
    text = f.read()
  lines = text.split("\n")
  torn = lines[-1] != ""  # a complete file ends with "\n"
  complete = lines[:-1]
  entries = []
  for lineno, line in enumerate(complete, start=1):
    try:
      entry = json.loads(line)
    except json.JSONDecodeError as e:
      raise ValueError(
        f"{path}:{lineno}: not valid JSON ({e}): {line[:200]!r}"
      ) from e
    if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
      raise ValueError(
        f"{path}:{lineno}: expected an object with an int 'step', "
        f"got {line[:200]!r}"
      )
    if entries and entry["step"] <= entries[-1]["step"]:
      raise ValueError(
        f"{path}:{lineno}: step {entry['step']} does not increase "
        f"(previous {entries[-1]['step']})"
      )
    entries.append(entry)
  if torn:
    _log.warning(
      "%s: dropping an incomplete last line (interrupted write): %r",
      path,
      lines[-1][:200],
    )
  return entries, torn


def _format_elapsed(seconds: float) -> str:
  s = int(seconds)
  return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class MetricsWriter:
  """Writes one record of scalar metrics
  per training step (see module docstring).

  Args:
    workdir: run directory (created if needed, primary only).
    is_primary: whether this process writes; False makes every method a no-op.
    display_keys: keys shown on the terminal line (those present in the step);
      None shows every key; () shows only step and elapsed time.
    display_stream: where the terminal line goes (default sys.stderr);
      None: no line.
    clock: returns the wall time (seconds) recorded as "time";
      injectable for tests.
  """

  def __init__(
    self,
    workdir: str,
    *,
    is_primary: bool = True,
    display_keys: Sequence[str] | None = DEFAULT_DISPLAY_KEYS,
    display_stream: TextIO | None = sys.stderr,
    clock: Callable[[], float] = time.time,
  ):
    self.workdir = os.fspath(workdir)
    self.is_primary = bool(is_primary)
    self.jsonl_path = os.path.join(self.workdir, JSONL_NAME)
    self.tensorboard_dir = os.path.join(self.workdir, TENSORBOARD_DIR)
    self._display_keys = None if display_keys is None else tuple(display_keys)
    self._stream = display_stream
    self._clock = clock
    self._start = clock()
    self._jsonl = None
    self._events = None
    self._purge_step: int | None = None
    self._warned_nonfinite: set[str] = set()
    self._closed = False
    self._last_step: int | None = None
    if not self.is_primary:
      return
    os.makedirs(self.workdir, exist_ok=True)
    entries, torn = _load_jsonl(self.jsonl_path)
    if torn:
      self._rewrite_jsonl(entries)
    self._last_step = entries[-1]["step"] if entries else None

  # -- history -----------------------------------------------------------------
  @staticmethod
  def read_history(workdir: str) -> list[dict]:
    """All complete entries of workdir/metrics.jsonl
    (non-finite values are None)."""
    return _load_jsonl(os.path.join(os.fspath(workdir), JSONL_NAME))[0]

  def truncate_after(self, step: int) -> int:
    """Prepares to resume at ``step``: drops
    JSONL entries with entry step >= step.

    Also closes the current event file; the next one starts with a
    SessionLog.START at ``step`` so TensorBoard discards earlier events with
    step >= ``step``. Returns the number of dropped JSONL entries (0 on
    non-primary processes).
    """
    step = self._check_step(step, "truncate_after")
    if not self.is_primary:
      return 0
    self._check_open()
    entries, _ = _load_jsonl(self.jsonl_path)
    kept = [e for e in entries if e["step"] < step]
    if os.path.exists(self.jsonl_path):
      self._rewrite_jsonl(kept)
    self._last_step = kept[-1]["step"] if kept else None
    if self._events is not None:
      self._events.close()
      self._events = None
    self._purge_step = step
    return len(entries) - len(kept)

  # -- writing -----------------------------------------------------------------
  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    """Records ``metrics`` (key -> real number) for ``step``; flushed on return.

    Steps must strictly increase (after a restore call truncate_after first).
    NaN/inf are written as null to JSONL and left out of TensorBoard (one
    warning per key).
    """
    step = self._check_step(step, "write")
    if not isinstance(metrics, Mapping):
      raise TypeError(
        f"MetricsWriter.write(step={step}): metrics must be a mapping, "
        f"got {type(metrics).__name__}"
      )
    values = {}
    for key in sorted(metrics):
      if not isinstance(key, str) or not key or key in RESERVED_KEYS:
        raise ValueError(
          f"MetricsWriter.write(step={step}): invalid metric key "
          f"{key!r} (non-empty str, not one of {RESERVED_KEYS})"
        )
      values[key] = to_number(key, metrics[key])
    if not self.is_primary:
      return
    self._check_open()
    if self._last_step is not None and step <= self._last_step:
      raise ValueError(
        f"MetricsWriter.write: step {step} <= last written step "
        f"{self._last_step} in {self.jsonl_path}; when resuming at "
        "step s call truncate_after(s) first"
      )
    now = self._clock()
    self._write_jsonl(step, now, values)
    self._write_tensorboard(step, now, values)
    self._last_step = step
    self._display(step, now, values)

  def _write_jsonl(self, step: int, now: float, values: dict) -> None:
    entry = {"step": step, "time": now}
    entry.update(
      {k: (v if math.isfinite(v) else None) for k, v in values.items()}
    )
    if self._jsonl is None:
      self._jsonl = open(self.jsonl_path, "a", encoding="utf-8")
    self._jsonl.write(json.dumps(entry, allow_nan=False) + "\n")
    self._jsonl.flush()

  def _write_tensorboard(self, step: int, now: float, values: dict) -> None:
    # Imported lazily: tensorboardX (and its
    # protobuf) is only needed on the primary.
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto import event_pb2, summary_pb2

    if self._events is None:
      os.makedirs(self.tensorboard_dir, exist_ok=True)
      n = sum(
        1 for name in os.listdir(self.tensorboard_dir) if "tfevents" in name
      )
      self._events = EventsWriter(
        os.path.join(self.tensorboard_dir, "events"),
        filename_suffix=f".{n:04d}.{os.getpid()}",
      )
      if self._purge_step is not None:
        self._events.write_event(
          event_pb2.Event(
            wall_time=now,
            step=self._purge_step,
            session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START),
          )
        )
    summary = summary_pb2.Summary()
    for key, v in values.items():
      if math.isfinite(v):
        summary.value.add(tag=key, simple_value=float(v))
      elif key not in self._warned_nonfinite:
        self._warned_nonfinite.add(key)
        _log.warning(
          "metric %r is %r at step %d: written as null to %s, not "
          "written to TensorBoard (warned once per key)",
          key,
          v,
          step,
          JSONL_NAME,
        )
    self._events.write_event(
      event_pb2.Event(wall_time=now, step=step, summary=summary)
    )
    self._events.flush()

  def _display(self, step: int, now: float, values: dict) -> None:
    if self._stream is None:
      return
    keys = (
      values
      if self._display_keys is None
      else [k for k in self._display_keys if k in values]
    )
    parts = [f"step {step}", _format_elapsed(now - self._start)]
    parts += [
      f"{k}={values[k]}"
      if isinstance(values[k], int)
      else f"{k}={values[k]:.4g}"
      for k in keys
    ]
    self._stream.write(" | ".join(parts) + "\n")
    self._stream.flush()

  # -- helpers / lifecycle -----------------------------------------------------
  def _rewrite_jsonl(self, entries: list[dict]) -> None:
    if self._jsonl is not None:
      self._jsonl.close()
      self._jsonl = None
    tmp = self.jsonl_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      for entry in entries:
        f.write(json.dumps(entry, allow_nan=False) + "\n")
    os.replace(tmp, self.jsonl_path)

  @staticmethod
  def _check_step(step: Any, where: str) -> int:
    if (
      isinstance(step, bool)
      or not isinstance(step, numbers.Integral)
      or step < 0
    ):
      raise ValueError(
        f"MetricsWriter.{where}: step must be an int >= 0, got {step!r}"
      )
    return int(step)

  def _check_open(self) -> None:
    if self._closed:
      raise ValueError(f"MetricsWriter for {self.workdir} is closed")

  def close(self) -> None:
    """Closes the files; idempotent."""
    if self._closed:
      return
    self._closed = True
    if self._jsonl is not None:
      self._jsonl.close()
      self._jsonl = None
    if self._events is not None:
      self._events.close()
      self._events = None

  def __enter__(self) -> MetricsWriter:
    return self

  def __exit__(self, *exc) -> None:
    self.close()
