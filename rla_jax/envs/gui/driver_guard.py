"""Runs chromedriver so that its browsers die with the process that started
them, however that process ends (a SIGKILL included).

Selenium starts chromedriver as a child with a pipe on its stdin; chromedriver
starts Chromium, and Chromium's helpers put themselves in sessions of their
own. When the Python process is killed, chromedriver, Chromium and its helpers
are orphaned and keep running (measured: all 10 processes of one browser
survive a SIGKILL of their owner). Process groups cannot reach them (the
helpers call setsid), and a parent-death signal would fire when the thread that
started the browser exits, not the process.

This guard sits between selenium and chromedriver (`guarded_chromedriver`
writes the executable selenium is given):

- it marks itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every
  process below it that loses its parent is re-parented to the guard rather
  than to init, whatever session it is in;
- it reads its stdin (selenium's pipe) until end of file, which comes when the
  owner closes it on a clean stop or dies; then it stops chromedriver;
- a SIGTERM (selenium's `terminate`) is passed on to chromedriver;
- once chromedriver has exited, it kills and reaps every process still below
  it, and exits with chromedriver's status.

Standard library only: it runs as a script with the owner's interpreter.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

_PR_SET_CHILD_SUBREAPER = 36
_STOP_GRACE_S = 5.0


def descendants(root: int) -> list[int]:
  """The pids of every live process below ``root`` (from /proc)."""
  children: dict[int, list[int]] = {}
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat") as f:
        stat = f.read()
    except OSError:
      continue
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] != "Z":
      children.setdefault(int(fields[1]), []).append(int(entry))
  found, stack = [], [root]
  while stack:
    for pid in children.get(stack.pop(), []):
      found.append(pid)
      stack.append(pid)
  return found


def _kill_and_reap_below(root: int) -> None:
  """SIGKILLs every process below ``root`` until none is left, reaping the
  ones re-parented to this (subreaper) process."""
  deadline = time.monotonic() + _STOP_GRACE_S
  while True:
    left = descendants(root)
    for pid in left:
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    try:
      while os.waitpid(-1, os.WNOHANG)[0] > 0:
        pass
    except ChildProcessError:
      pass
    if not left or time.monotonic() > deadline:
      return
    time.sleep(0.05)


def _stop(driver: subprocess.Popen) -> None:
  """SIGTERM to chromedriver, SIGKILL if it is still running after the
  grace period."""
  if driver.poll() is None:
    driver.terminate()
    try:
      driver.wait(_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
      driver.kill()


def main(argv: list[str]) -> int:
  """``driver_guard.py CHROMEDRIVER [ARGS...]``: runs CHROMEDRIVER ARGS under
  the guard (see the module docstring); returns its exit status."""
  if len(argv) < 2:
    print("usage: driver_guard.py CHROMEDRIVER [ARGS...]", file=sys.stderr)
    return 2
  libc = ctypes.CDLL(None, use_errno=True)
  if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
  # An interrupt from the terminal reaches chromedriver directly (same
  # process group); the guard itself waits for it to exit.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  driver = subprocess.Popen(argv[1:], stdin=subprocess.DEVNULL)
  signal.signal(signal.SIGTERM, lambda *_: driver.send_signal(signal.SIGTERM))

  def stop_when_owner_goes() -> None:
    while os.read(0, 4096):
      pass
    _stop(driver)

  threading.Thread(target=stop_when_owner_goes, daemon=True).start()
  status = driver.wait()
  _kill_and_reap_below(os.getpid())
  return status if status >= 0 else 128 - status


def script_dirs() -> list[str]:
  """Where the guard's launcher script may go, in order of preference: the
  user's own cache (where the launchers' XLA cache also lives), then a
  per-user directory in the temporary directory."""
  return [
    os.path.join(os.path.expanduser("~"), ".cache", "rla_jax", "bin"),
    os.path.join(tempfile.gettempdir(), f"rla_jax-{os.getuid()}"),
  ]


def _private_exec_dir() -> str:
  """The first of `script_dirs` that this user owns, nobody else can write
  and that allows executables (a script another user could write would run
  as this user); created 0700 if missing."""
  refused = []
  for directory in script_dirs():
    try:
      os.makedirs(directory, mode=0o700, exist_ok=True)
      info = os.stat(directory)
      noexec = os.statvfs(directory).f_flag & os.ST_NOEXEC
    except OSError as error:
      refused.append(f"{directory} ({error})")
      continue
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
      refused.append(f"{directory} (not private to uid {os.getuid()})")
    elif noexec:
      refused.append(f"{directory} (mounted noexec)")
    else:
      return directory
  raise RuntimeError(
    "chromedriver's guard needs a private directory that allows "
    "executables; refused: " + "; ".join(refused)
  )


def guarded_chromedriver(chromedriver: str) -> str:
  """The path of an executable that runs ``chromedriver`` under this guard
  with the current interpreter, for selenium's ``Service(executable_path=)``.

  Selenium runs the executable it is given with its own arguments, so the
  guard is reached through a two-line shell script, kept in a private
  directory (`_private_exec_dir`) under a name that hashes the interpreter,
  guard and chromedriver paths, and rewritten atomically unless it holds
  exactly the expected text.
  """
  command = " ".join(
    shlex.quote(part) for part in (sys.executable, __file__, chromedriver)
  )
  script = f'#!/bin/sh\nexec {command} "$@"\n'
  directory = _private_exec_dir()
  digest = hashlib.sha256(script.encode()).hexdigest()[:16]
  path = os.path.join(directory, f"chromedriver-{digest}")
  try:
    with open(path) as f:
      current = f.read()
  except OSError:
    current = None
  if current != script or not os.access(path, os.X_OK):
    fd, partial = tempfile.mkstemp(dir=directory)
    with os.fdopen(fd, "w") as f:
      f.write(script)
    os.chmod(partial, 0o700)
    os.replace(partial, path)
  return path


if __name__ == "__main__":
  sys.exit(main(sys.argv))
