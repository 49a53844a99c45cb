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
"""

from __future__ import annotations

import ast
import concurrent.futures
import dataclasses
import fcntl
import marshal
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence

import numpy as np

from rla_jax.envs.coding.tasks import outputs_match

LAUNCHER_PATH = os.path.join(
  os.path.dirname(os.path.abspath(__file__)), "sandbox_launcher.py"
)

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


class _UidPool:
  """Dedicated uids for concurrent launchers, exclusive across processes via
  flock."""

  def __init__(self, base: int, lock_dir: str):
    self._base = base
    self._lock_dir = lock_dir
    self._lock = threading.Lock()
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)

  def acquire(self) -> tuple[int, int]:
    with self._lock:
      for uid in range(self._base, self._base + 4096):
        fd = os.open(
          os.path.join(self._lock_dir, f"{uid}.lock"),
          os.O_RDWR | os.O_CREAT,
          0o600,
        )
        try:
          fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
          return uid, fd
        except BlockingIOError:
          os.close(fd)
    raise RuntimeError(
      f"no free sandbox uid in [{self._base}, {self._base + 4096})"
    )

  @staticmethod
  def release(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _kill_uid_processes(uid: int, rounds: int = 50) -> None:
  """SIGKILL every process owned by ``uid`` (root only; used after a launcher
  was killed)."""
  for _ in range(rounds):
    found = False
    for name in os.listdir("/proc"):
      if not name.isdigit():
        continue
      try:
        if os.stat(f"/proc/{name}").st_uid == uid:
          found = True
          os.kill(int(name), signal.SIGKILL)
      except OSError:
        continue
    if not found:
      return


def _uid_map_allows(uid: int) -> bool:
  try:
    with open("/proc/self/uid_map") as f:
      for line in f:
        inside, _, count = (int(x) for x in line.split())
        if inside <= uid and uid + 4096 <= inside + count:
          return True
  except OSError:
    return False
  return False


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
      limits.drop_uid and os.geteuid() == 0 and _uid_map_allows(limits.uid_base)
    ):
      self._uids = _UidPool(
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
  def _launcher_env(self, workdir: str) -> dict[str, str]:
    return {
      "PATH": "/usr/bin:/bin",
      "LANG": "C.UTF-8",
      "LC_ALL": "C.UTF-8",
      "PYTHONHASHSEED": "0",
      "PYTHONIOENCODING": "utf-8",
      "HOME": workdir,
      "TMPDIR": workdir,
      "OMP_NUM_THREADS": "1",
    }

  def _run_one_launcher(
    self, program: str, stdins: list[str], time_limit_s: float
  ) -> list[ExecutionOutcome]:
    lim = self.limits
    run_dir = tempfile.mkdtemp(prefix="rla_sbx_", dir=self._tmp_root)
    uid, uid_fd = self._uids.acquire() if self._uids else (None, None)
    try:
      os.chmod(run_dir, 0o711)
      workdir = os.path.join(run_dir, "work")
      os.mkdir(workdir, 0o700)
      prog_path = os.path.join(run_dir, "main.py")
      with open(prog_path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(program)
      inputs, outputs, errors = [], [], []
      for i, text in enumerate(stdins):
        path = os.path.join(run_dir, f"in_{i}")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
          f.write(text)
        inputs.append(path)
        outputs.append(os.path.join(run_dir, f"out_{i}"))
        errors.append(os.path.join(run_dir, f"err_{i}"))
      cfg = {
        "program_path": prog_path,
        "inputs": inputs,
        "outputs": outputs,
        "errors": errors,
        "status_path": os.path.join(run_dir, "status"),
        "workdir": workdir,
        "uid": uid,
        "use_namespaces": lim.use_namespaces,
        "tmpfs_bytes": lim.tmpfs_bytes,
        "limits": {
          "cpu_s": math.ceil(time_limit_s) + 1,
          "wall_s": time_limit_s,
          "memory_bytes": lim.memory_bytes,
          "output_bytes": lim.output_bytes,
          "max_open_files": lim.max_open_files,
          "max_processes": lim.max_processes,
          "stack_bytes": lim.stack_bytes,
        },
      }
      cfg_path = os.path.join(run_dir, "config.marshal")
      with open(cfg_path, "wb") as f:
        marshal.dump(cfg, f)
      with open(os.path.join(run_dir, "launcher_stderr"), "wb") as err_file:
        proc = subprocess.Popen(
          [sys.executable, "-I", "-S", "-B", LAUNCHER_PATH, cfg_path],
          cwd=run_dir,
          env=self._launcher_env(workdir),
          stdin=subprocess.DEVNULL,
          stdout=subprocess.DEVNULL,
          stderr=err_file,
          start_new_session=True,
        )
        budget = len(stdins) * (time_limit_s + 0.5) + lim.launcher_slack_s
        try:
          proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
          try:
            os.killpg(proc.pid, signal.SIGKILL)
          except ProcessLookupError:
            pass
          proc.wait()
          if uid is not None:
            _kill_uid_processes(uid)
      return self._collect(run_dir, cfg, len(stdins))
    finally:
      if uid_fd is not None:
        _UidPool.release(uid_fd)
      shutil.rmtree(run_dir, ignore_errors=True)

  def _collect(self, run_dir: str, cfg: dict, n: int) -> list[ExecutionOutcome]:
    records: dict[int, dict] = {}
    fatal = None
    try:
      with open(cfg["status_path"]) as f:
        for line in f:
          rec = ast.literal_eval(line)
          if "isolation" in rec:
            self.last_isolation = rec["isolation"]
          elif "fatal" in rec:
            fatal = rec["fatal"]
          else:
            records[rec["i"]] = rec
    except (OSError, ValueError, SyntaxError):
      pass
    cap = self.limits.output_bytes
    out = []
    for i in range(n):
      rec = records.get(i)
      if rec is None:
        detail = (
          fatal
          or _read_capped(
            os.path.join(run_dir, "launcher_stderr"), 4096, tail=True
          )[0]
        )
        out.append(
          ExecutionOutcome(
            TIMEOUT if fatal is None and not detail else SANDBOX_ERROR,
            stderr_tail=detail[-4096:],
          )
        )
        continue
      stdout, out_size = _read_capped(cfg["outputs"][i], cap)
      stderr_tail, _ = _read_capped(cfg["errors"][i], 4096, tail=True)
      sig, code = rec["signal"], rec["exit"]
      if rec["timeout"] or sig in (signal.SIGXCPU, signal.SIGKILL):
        status = TIMEOUT
      elif sig == signal.SIGXFSZ or out_size >= cap:
        status = OUTPUT_LIMIT
      elif code == 0:
        status = OK
      elif code == 121:
        status = SANDBOX_ERROR
      elif "MemoryError" in stderr_tail:
        status = MEMORY_LIMIT
      else:
        status = RUNTIME_ERROR
      out.append(
        ExecutionOutcome(
          status,
          stdout=stdout,
          stderr_tail=stderr_tail,
          exit_code=code,
          signal=sig,
          wall_s=rec["wall_s"],
          cpu_s=rec["cpu_s"],
        )
      )
    return out
