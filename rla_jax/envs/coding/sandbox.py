"""Sandboxed, batched execution of untrusted stdin/stdout Python programs.

Every program runs in a fresh subprocess started with exec (``subprocess.Popen``
without ``preexec_fn``, ``start_new_session=True``) of
``python -I -S -B sandbox_launcher.py``; the launcher applies the isolation to
itself (see its docstring): namespaces where the platform allows them, read-only
filesystem except a size-capped tmpfs working directory, an unprivileged
dedicated uid when started as root, rlimits (CPU, address space, file size =
output cap, open files, processes, core, stack) and a wall-clock limit after
which the whole process group / pid namespace is killed. The environment is
scrubbed.

One launcher runs all tests of one program (up to ``tests_per_process``),
forking a fresh child per test from its clean state, so isolation is per test
while interpreter start-up is paid once per program. Launchers run concurrently
on a bounded thread pool.

Modes (``SandboxExecutor.isolation_report()`` says which one a platform got):
- namespaces (root, or non-root with unprivileged user namespaces): network
  namespace (no network), pid namespace (trainer invisible, everything dies with
  the namespace), read-only filesystem except a tmpfs /tmp/work, and as root a
  dedicated uid per concurrent slot (flock-allocated from ``uid_base``) so
  RLIMIT_NPROC holds.
- fallback (no namespaces): in-process socket guard (bypassable, e.g. with
  ctypes), uid drop as root (world-writable directories such as /tmp remain
  writable), and only common stdlib modules importable when the uid cannot read
  the interpreter prefix. Non-root without namespaces gets no uid separation:
  the program could signal the trainer. Prefer a platform with namespaces.
Known limits: no seccomp; CPU time of a test is bounded by RLIMIT_CPU and the
wall limit, not shared fairly; the non-root user-namespace path was not
exercised on the development machine (it runs as root).

This module holds the public API (``SandboxLimits``, ``SandboxExecutor``). The
statuses and result types are in ``sandbox_outcomes``, the host's side of one
launcher run in ``sandbox_launch``, the dedicated uids in ``sandbox_uids``; the
launcher is ``sandbox_launcher`` with ``sandbox_isolation``,
``sandbox_test_loop`` and ``sandbox_test_child``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import tempfile
from collections.abc import Sequence

import numpy as np

from rla_jax.envs.coding.sandbox_launch import run_launcher
from rla_jax.envs.coding.sandbox_outcomes import (
  INVALID_PROGRAM,
  OK,
  PASSED,
  WRONG_ANSWER,
  ExecutionOutcome,
  ResultMatrix,
)
from rla_jax.envs.coding.sandbox_uids import (
  DedicatedUidPool,
  uid_map_covers_pool,
)
from rla_jax.envs.coding.tasks import outputs_match


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
  """Resource limits for one (program, test) execution."""

  memory_bytes: int = 1 << 30  # RLIMIT_AS
  output_bytes: int = (
    1 << 20
  )  # RLIMIT_FSIZE on captured stdout/stderr and any written file
  max_processes: int = 16  # RLIMIT_NPROC (per dedicated uid / user namespace)
  max_open_files: int = 64  # RLIMIT_NOFILE
  stack_bytes: int = 64 << 20  # RLIMIT_STACK (deep recursion)
  tmpfs_bytes: int = (
    64 << 20
  )  # size of the private working directory (namespace mode)
  use_namespaces: bool = (
    True  # False forces the fallback mode (uid drop + socket guard)
  )
  drop_uid: bool = (
    True  # as root: run under a dedicated unprivileged uid per concurrent slot
  )
  uid_base: int = 2_000_000_000  # first dedicated uid tried when root
  tests_per_process: int = 16  # tests run by one launcher (fresh fork per test)
  launcher_slack_s: float = (
    10.0  # host-side allowance on top of the per-test limits
  )


class SandboxExecutor:
  """Runs untrusted programs on stdin tests, many at a time. Use as a context
  manager."""

  def __init__(
    self,
    max_workers: int | None = None,
    limits: SandboxLimits = SandboxLimits(),
    tmp_root: str | None = None,
  ):
    self.max_workers = int(max_workers or os.cpu_count() or 1)
    if self.max_workers < 1:
      raise ValueError(f"max_workers must be >= 1, got {max_workers}")
    self.limits = limits
    self._tmp_root = tmp_root or tempfile.gettempdir()
    self._pool = concurrent.futures.ThreadPoolExecutor(
      self.max_workers, thread_name_prefix="sandbox"
    )
    self._uids = None
    if (
      limits.drop_uid
      and os.geteuid() == 0
      and uid_map_covers_pool(limits.uid_base)
    ):
      self._uids = DedicatedUidPool(
        limits.uid_base, os.path.join(self._tmp_root, "rla_jax_sandbox_uids")
      )
    self.last_isolation: dict | None = None
    self._closed = False

  # -- lifecycle ---------------------------------------------------------------
  def close(self) -> None:
    if not self._closed:
      self._closed = True
      self._pool.shutdown(wait=True, cancel_futures=True)

  def __enter__(self) -> SandboxExecutor:
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  # -- public API --------------------------------------------------------------
  def execute(
    self, pairs: Sequence[tuple[str | None, str]], time_limit_s: float
  ) -> list[ExecutionOutcome]:
    """Run each (program, stdin) pair; a ``None`` program gives INVALID_PROGRAM.

    Pairs sharing a program text run in the same launcher (a fresh fork per
    stdin). Returns one outcome per pair, in order.
    """
    if self._closed:
      raise RuntimeError("SandboxExecutor is closed")
    if not (0 < time_limit_s <= 600):
      raise ValueError(f"time_limit_s must be in (0, 600], got {time_limit_s}")
    outcomes: list[ExecutionOutcome | None] = [None] * len(pairs)
    by_program: dict[str, list[int]] = {}
    for idx, (program, _stdin) in enumerate(pairs):
      if program is None:
        outcomes[idx] = ExecutionOutcome(INVALID_PROGRAM)
      else:
        by_program.setdefault(program, []).append(idx)
    chunk = max(1, self.limits.tests_per_process)
    futures = []
    for program, idxs in by_program.items():
      for start in range(0, len(idxs), chunk):
        part = idxs[start : start + chunk]
        fut = self._pool.submit(
          self._run_one_launcher,
          program,
          [pairs[i][1] for i in part],
          time_limit_s,
        )
        futures.append((part, fut))
    for part, fut in futures:
      for i, outcome in zip(part, fut.result(), strict=True):
        outcomes[i] = outcome
    return outcomes  # type: ignore[return-value]

  def run(
    self,
    programs: Sequence[str | None],
    tests: Sequence[tuple[str, str]],
    time_limit_s: float,
  ) -> ResultMatrix:
    """Run every program on every (stdin, expected_stdout) test -> ResultMatrix
    [P, T]."""
    pairs = [(p, t[0]) for p in programs for t in tests]
    flat = self.execute(pairs, time_limit_s) if pairs else []
    n_p, n_t = len(programs), len(tests)
    passed = np.zeros((n_p, n_t), dtype=bool)
    status = np.empty((n_p, n_t), dtype=object)
    for k, outcome in enumerate(flat):
      i, j = divmod(k, n_t)
      st = outcome.status
      if st == OK:
        st = (
          PASSED if outputs_match(outcome.stdout, tests[j][1]) else WRONG_ANSWER
        )
      passed[i, j] = st == PASSED
      status[i, j] = st
    return ResultMatrix(passed=passed, status=status)

  def isolation_report(self) -> dict:
    """Run a no-op program and return the launcher's isolation report (what was
    achieved)."""
    self.execute([("pass", "")], time_limit_s=2.0)
    return dict(self.last_isolation or {})

  # -- one launcher ------------------------------------------------------------
  def _run_one_launcher(
    self, program: str, stdins: list[str], time_limit_s: float
  ) -> list[ExecutionOutcome]:
    outcomes, isolation = run_launcher(
      program, stdins, time_limit_s, self.limits, self._tmp_root, self._uids
    )
    if isolation is not None:
      self.last_isolation = isolation
    return outcomes
