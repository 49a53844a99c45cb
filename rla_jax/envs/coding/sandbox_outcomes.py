"""Sandbox outcomes: the statuses an execution can end in, the result types,
and how a launcher's status file and captured output become outcomes.

The launcher (``sandbox_launcher.py``) writes one status record per line, as a
Python literal: first ``{"isolation": report}``, then one record per test
(``i``, ``timeout``, ``wall_s``, ``cpu_s``, ``exit``, ``signal``, ...), or
``{"fatal": text}`` when it failed. ``read_launcher_outcomes`` turns those
records and the per-test stdout/stderr files into ``ExecutionOutcome``s.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import signal

import numpy as np

# Outcome statuses.
OK = (
  "ok"  # exited 0 (lower-level call; run() turns it into passed / wrong_answer)
)
PASSED = "passed"
WRONG_ANSWER = "wrong_answer"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
INVALID_PROGRAM = (
  "invalid_program"  # no code could be extracted; never executed
)
# the launcher itself failed (a bug or an unsupported platform)
SANDBOX_ERROR = "sandbox_error"

# Exit code of a test child whose setup (before the program ran) failed:
# sandbox_test_child.SETUP_FAILED_EXIT_CODE.
_CHILD_SETUP_FAILED = 121


@dataclasses.dataclass(frozen=True)
class ExecutionOutcome:
  """Result of running one program on one stdin."""

  status: str
  stdout: str = ""
  stderr_tail: str = ""
  exit_code: int | None = None
  signal: int | None = None
  wall_s: float = 0.0
  cpu_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class ResultMatrix:
  """Execution results of P programs on T tests.

  passed: bool [P, T]; status: str [P, T] (one of the status constants).
  """

  passed: np.ndarray
  status: np.ndarray

  @property
  def shape(self) -> tuple[int, int]:
    return self.passed.shape

  def pass_all(self) -> np.ndarray:
    """bool [P]: program passes every test (False when T == 0)."""
    return self.passed.all(axis=1) & (self.passed.shape[1] > 0)


def _read_capped(path: str, cap: int, tail: bool = False) -> tuple[str, int]:
  """Read at most ``cap`` bytes (head, or tail) of a file; returns (text, full
  size)."""
  try:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
      if tail and size > cap:
        f.seek(size - cap)
      data = f.read(cap)
  except OSError:
    return "", 0
  return data.decode("utf-8", errors="replace"), size


def _read_status_file(
  path: str,
) -> tuple[dict | None, str | None, dict[int, dict]]:
  """(isolation report, fatal text, {test index: record}) from the launcher's
  status file; whatever could not be read or parsed is left out."""
  isolation = None
  records: dict[int, dict] = {}
  fatal = None
  try:
    with open(path) as f:
      for line in f:
        rec = ast.literal_eval(line)
        if "isolation" in rec:
          isolation = rec["isolation"]
        elif "fatal" in rec:
          fatal = rec["fatal"]
        else:
          records[rec["i"]] = rec
  except (OSError, ValueError, SyntaxError):
    pass
  return isolation, fatal, records


def _missing_record_outcome(
  run_dir: str, fatal: str | None
) -> ExecutionOutcome:
  """A test the launcher wrote no record for: TIMEOUT when there is nothing to
  report (e.g. the host killed the launcher on its budget), else SANDBOX_ERROR
  with the fatal record or the launcher's stderr."""
  launcher_stderr = os.path.join(run_dir, "launcher_stderr")
  detail = fatal or _read_capped(launcher_stderr, 4096, tail=True)[0]
  return ExecutionOutcome(
    TIMEOUT if fatal is None and not detail else SANDBOX_ERROR,
    stderr_tail=detail[-4096:],
  )


def _test_outcome(
  rec: dict, out_path: str, err_path: str, cap: int
) -> ExecutionOutcome:
  """Classify one test's record and captured output."""
  stdout, out_size = _read_capped(out_path, cap)
  stderr_tail, _ = _read_capped(err_path, 4096, tail=True)
  sig, code = rec["signal"], rec["exit"]
  if rec["timeout"] or sig in (signal.SIGXCPU, signal.SIGKILL):
    status = TIMEOUT
  elif sig == signal.SIGXFSZ or out_size >= cap:
    status = OUTPUT_LIMIT
  elif code == 0:
    status = OK
  elif code == _CHILD_SETUP_FAILED:
    status = SANDBOX_ERROR
  elif "MemoryError" in stderr_tail:
    status = MEMORY_LIMIT
  else:
    status = RUNTIME_ERROR
  return ExecutionOutcome(
    status,
    stdout=stdout,
    stderr_tail=stderr_tail,
    exit_code=code,
    signal=sig,
    wall_s=rec["wall_s"],
    cpu_s=rec["cpu_s"],
  )


def read_launcher_outcomes(
  run_dir: str, cfg: dict, n: int, output_cap: int
) -> tuple[list[ExecutionOutcome], dict | None]:
  """One outcome per test of a finished launcher, and its isolation report
  (None when it wrote none). ``cfg`` is the launcher's config (the status and
  output paths); ``output_cap`` the output limit in bytes."""
  isolation, fatal, records = _read_status_file(cfg["status_path"])
  out = []
  for i in range(n):
    rec = records.get(i)
    if rec is None:
      out.append(_missing_record_outcome(run_dir, fatal))
      continue
    out.append(
      _test_outcome(rec, cfg["outputs"][i], cfg["errors"][i], output_cap)
    )
  return out, isolation
