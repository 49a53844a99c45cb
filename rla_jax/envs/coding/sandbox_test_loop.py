"""Sandbox launcher, test loop: the launcher's side of each test, and the status
records it writes.

Runs inside the launcher process (``python -I -S -B``), imported by
``sandbox_launcher.py`` as a top-level module: it imports only the standard
library (and ``sandbox_test_child``), never rla_jax. For each test: empty the
working directory, fork a child from the clean launcher state
(``sandbox_test_child.run_test_child``), enforce the wall-clock limit, kill
everything the child left behind (kill(-1) as the pid-namespace init or as the
dedicated uid, else the child's process group), reap, and write one status
record.
"""

import os
import select
import signal
import time

import sandbox_test_child


def write_status_record(fd, record):
  """One status record per line, as a Python literal (json would cost ~25 ms of
  imports)."""
  os.write(fd, (repr(record) + "\n").encode())


def _kill_all_signalable():
  """kill(-1, SIGKILL) until nothing is left: every process we may signal except
  ourselves."""
  for _ in range(100):
    try:
      os.kill(-1, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      return
    time.sleep(0.001)


def _kill_leftovers(child_pid, is_ns_init, dedicated_uid):
  """Kill everything a test left running, then reap zombies.

  As pid-namespace init: kill(-1) reaches exactly the sandbox's processes. With
  a dedicated uid (fallback as root): a short-lived helper becomes that uid and
  does kill(-1). Otherwise: the child's process group (processes that called
  setsid() escape until the wall kill).
  """
  if is_ns_init:
    _kill_all_signalable()
  elif dedicated_uid is not None:
    helper = os.fork()
    if helper == 0:
      try:
        sandbox_test_child.become_uid(dedicated_uid)
        _kill_all_signalable()
      finally:
        os._exit(0)
    os.waitpid(helper, 0)
  else:
    try:
      os.killpg(child_pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass
  deadline = time.monotonic() + 5.0
  while (
    time.monotonic() < deadline
  ):  # as pid-1 or child subreaper, orphans are ours to reap
    try:
      pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
      break
    if pid == 0:
      if not (is_ns_init or dedicated_uid is not None):
        break
      time.sleep(0.001)


def _wait_with_deadline(pid, wall_s):
  """Wait for ``pid`` up to ``wall_s`` seconds; returns True on timeout."""
  try:
    pidfd = os.pidfd_open(pid)
  except (AttributeError, OSError):
    pidfd = None
  if pidfd is not None:
    ready, _, _ = select.select([pidfd], [], [], wall_s)
    os.close(pidfd)
    return not ready
  deadline = time.monotonic() + wall_s
  while time.monotonic() < deadline:
    if os.waitpid(pid, os.WNOHANG)[0] != 0:
      raise RuntimeError("unreachable: reaped early")  # pragma: no cover
    time.sleep(0.002)
  return True


def _clear_workdir(path):
  for name in os.listdir(path):
    full = os.path.join(path, name)
    if os.path.isdir(full) and not os.path.islink(full):
      import shutil

      shutil.rmtree(full, ignore_errors=True)
    else:
      try:
        os.unlink(full)
      except OSError:
        pass


def run_tests(cfg, src, test_fds, status_fd, is_ns_init):
  dedicated_uid = cfg["drop_to_uid"]
  for i, fds in enumerate(test_fds):
    if os.listdir("."):
      _clear_workdir(".")
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
      sandbox_test_child.run_test_child(cfg, src, fds)
    try:
      os.setpgid(pid, pid)
    except OSError:
      pass
    timed_out = _wait_with_deadline(pid, cfg["limits"]["wall_s"])
    if timed_out:
      try:
        os.killpg(pid, signal.SIGKILL)
      except OSError:
        os.kill(pid, signal.SIGKILL)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - start
    _kill_leftovers(pid, is_ns_init, dedicated_uid)
    rec = {
      "i": i,
      "timeout": timed_out,
      "wall_s": round(wall, 4),
      "cpu_s": round(ru.ru_utime + ru.ru_stime, 4),
      "maxrss_kb": ru.ru_maxrss,
      "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
      "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
    }
    write_status_record(status_fd, rec)
