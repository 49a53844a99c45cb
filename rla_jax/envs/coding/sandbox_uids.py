"""Sandbox uids: the dedicated unprivileged uids that launchers started as root
drop their test children to, one per concurrent launcher.

A uid is held through an exclusive flock on ``<lock_dir>/<uid>.lock``, so
concurrent executors (in any process) never share one; ``kill_uid_processes``
clears out a uid whose launcher had to be killed from the host.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading

UID_POOL_SIZE = 4096  # uids tried from the pool's base


class DedicatedUidPool:
  """Dedicated uids for concurrent launchers, exclusive across processes via
  flock."""

  def __init__(self, base: int, lock_dir: str):
    self._base = base
    self._lock_dir = lock_dir
    self._lock = threading.Lock()
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)

  def acquire(self) -> tuple[int, int]:
    """(uid, fd of its held lock file); give the fd back to ``release``."""
    with self._lock:
      for uid in range(self._base, self._base + UID_POOL_SIZE):
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
      f"no free sandbox uid in [{self._base}, {self._base + UID_POOL_SIZE})"
    )

  @staticmethod
  def release(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def kill_uid_processes(uid: int, rounds: int = 50) -> None:
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


def uid_map_covers_pool(base: int) -> bool:
  """Whether this process's uid map holds every uid of a pool starting at
  ``base`` (False when the map cannot be read)."""
  try:
    with open("/proc/self/uid_map") as f:
      for line in f:
        inside, _, count = (int(x) for x in line.split())
        if inside <= base and base + UID_POOL_SIZE <= inside + count:
          return True
  except OSError:
    return False
  return False
