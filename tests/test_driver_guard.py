"""chromedriver's guard: a browser dies with the process that started it,
even when that process is SIGKILLed (and a clean quit still works).

The first test needs no browser: a stand-in "driver" starts a grandchild in
a session of its own, as Chromium's helpers do. The browser tests start real
headless Chromium (`.ci/run` installs it) and skip without it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest
from conftest import kill_processes, needs_browser, still_running

from rla_jax.envs.gui import driver_guard
from rla_jax.envs.gui.chromium import find_browser


def _run_owner(script: str) -> tuple[subprocess.Popen, list]:
  """Starts ``script`` in a fresh interpreter; it prints READY once its
  browser (or stand-in) runs. Returns the owner and every process below it
  (psutil, independent of the guard's own `descendants`)."""
  owner = subprocess.Popen(
    [sys.executable, "-c", textwrap.dedent(script)],
    stdout=subprocess.PIPE,
    text=True,
  )
  line = owner.stdout.readline()
  assert line.strip() == "READY", line
  return owner, psutil.Process(owner.pid).children(recursive=True)


STAND_IN_OWNER = """
  import subprocess, sys
  from rla_jax.envs.gui.driver_guard import guarded_chromedriver
  # The stand-in driver: a shell that starts `sleep` in a new session (as
  # Chromium's helpers do), then waits.
  path = guarded_chromedriver("/bin/sh")
  guard = subprocess.Popen(
    [path, "-c", "setsid sleep 300 & sleep 300"], stdin=subprocess.PIPE
  )
  import time
  from rla_jax.envs.gui.driver_guard import descendants
  def sleeps():
    below = descendants(guard.pid)
    return [p for p in below if open(f"/proc/{p}/comm").read() == "sleep\\n"]
  while len(sleeps()) < 2:
    time.sleep(0.05)
  print("READY", flush=True)
  time.sleep(300)
"""


def _killed_owner_leaves_nothing(script: str, started) -> None:
  """Runs ``script``, checks started(the command lines, as argument lists,
  of the processes below it), SIGKILLs it and asserts that every one of
  them ends."""
  owner, below = _run_owner(script)
  try:
    command_lines = [p.cmdline() for p in below]
    assert started(command_lines), command_lines
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    left = still_running(below, timeout_s=15.0)
    assert left == [], f"still running after the owner's SIGKILL: {left}"
  finally:
    owner.kill()
    kill_processes(below)


def test_guard_kills_a_new_session_grandchild_when_its_owner_is_killed():
  """The stand-in's setsid'd grandchild, which a process-group kill would
  miss and which init would adopt, is killed once the owner dies."""
  _killed_owner_leaves_nothing(
    STAND_IN_OWNER,
    lambda command_lines: sum(c[:1] == ["sleep"] for c in command_lines) == 2,
  )


def test_guard_passes_on_the_driver_exit_status():
  """The driver's own status, while the owner keeps the pipe open; closing
  the pipe stops the driver (SIGTERM: 128 + 15)."""
  path = driver_guard.guarded_chromedriver("/bin/sh")
  guard = subprocess.Popen([path, "-c", "exit 7"], stdin=subprocess.PIPE)
  assert guard.wait(30) == 7
  guard.stdin.close()
  guard = subprocess.Popen([path, "-c", "sleep 300"], stdin=subprocess.PIPE)
  guard.stdin.close()
  assert guard.wait(30) == 128 + signal.SIGTERM


BROWSER_OWNER = """
  import time
  from rla_jax.envs.gui.chromium import find_browser, start_driver
  driver = start_driver(find_browser(), 160, 210, 1)
  driver.get("data:text/html,<p>hi</p>")
  print("READY", flush=True)
  time.sleep(300)
"""


@needs_browser
def test_chromium_dies_with_its_killed_owner():
  """Measured without the guard: chromedriver, Chromium and all 8 helpers
  outlive a SIGKILL of their owner."""
  _killed_owner_leaves_nothing(
    BROWSER_OWNER,
    lambda command_lines: any("chromium" in " ".join(c) for c in command_lines),
  )


@needs_browser
def test_quit_stops_every_browser_process():
  from rla_jax.envs.gui.chromium import start_driver

  driver = start_driver(find_browser(), 160, 210, 1)
  guard = psutil.Process(driver.service.process.pid)
  below = [guard, *guard.children(recursive=True)]
  try:
    assert any("chromium" in " ".join(p.cmdline()) for p in below)
    driver.quit()
    assert still_running(below, timeout_s=10.0) == []
  finally:
    kill_processes(below)


def test_guard_script_is_private_and_rewritten_when_changed():
  """The script selenium runs lives in a directory only this user can
  write, and a script whose text differs (tampered) is replaced."""
  path = driver_guard.guarded_chromedriver("/bin/sh")
  info = os.stat(os.path.dirname(path))
  assert info.st_uid == os.getuid() and not info.st_mode & 0o022
  expected = open(path).read()
  assert expected.startswith("#!/bin/sh\nexec ") and "/bin/sh" in expected
  with open(path, "w") as f:
    f.write("#!/bin/sh\necho tampered\n")
  assert driver_guard.guarded_chromedriver("/bin/sh") == path
  assert open(path).read() == expected


def test_guard_script_skips_directories_others_can_write(tmp_path, monkeypatch):
  shared, private = tmp_path / "shared", tmp_path / "private"
  shared.mkdir()
  shared.chmod(0o777)
  monkeypatch.setattr(
    driver_guard, "script_dirs", lambda: [str(shared), str(private)]
  )
  path = driver_guard.guarded_chromedriver("/bin/sh")
  assert os.path.dirname(path) == str(private)
  monkeypatch.setattr(driver_guard, "script_dirs", lambda: [str(shared)])
  with pytest.raises(RuntimeError, match="shared .not private to uid"):
    driver_guard.guarded_chromedriver("/bin/sh")
