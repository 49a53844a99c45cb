"""Hostile-program suite for the coding sandbox: every case ends with a clear
status within its limit, the calling process survives, and nothing outside the
sandbox's temp dir changes."""

import os
import socket
import textwrap
import threading
import uuid

import pytest

from rla_jax.envs.coding import sandbox as sb
from rla_jax.envs.coding.sandbox_outcomes import (
  INVALID_PROGRAM,
  MEMORY_LIMIT,
  OK,
  OUTPUT_LIMIT,
  RUNTIME_ERROR,
  SANDBOX_ERROR,
  TIMEOUT,
)

TIME_LIMIT = 1.0
SECRET = "rla-secret-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def executor(tmp_path_factory):
  root = tmp_path_factory.mktemp("sbx_root")
  with sb.SandboxExecutor(max_workers=2, tmp_root=str(root)) as ex:
    yield ex


@pytest.fixture(scope="module")
def fallback_executor(tmp_path_factory):
  root = tmp_path_factory.mktemp("sbx_fallback_root")
  with sb.SandboxExecutor(
    max_workers=2,
    limits=sb.SandboxLimits(use_namespaces=False),
    tmp_root=str(root),
  ) as ex:
    yield ex


def _prog(src):
  return textwrap.dedent(src).strip() + "\n"


FORK_BOMB = _prog("""
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
""")

FORK_COUNTER = _prog("""
    import os, time
    n = 0
    for _ in range(500):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    print(n)
""")


def _network_probe(port):
  return _prog(f"""
        try:
            import socket
            s = socket.create_connection(("127.0.0.1", {port}), timeout=0.5)
            s.sendall(b"leak")
            print("connected")
        except BaseException as e:
            print("blocked", type(e).__name__)
    """)


def _outside_writer(outside_file, victim_file, world_writable_probe):
  # Program text run as is in the sandbox: its long line stays unsplit.
  return _prog(f"""
        import os
        results = []
        for path in [{outside_file!r}, "../escape.txt", os.path.expanduser("~/../../x.txt"), {world_writable_probe!r}]:
            try:
                with open(path, "w") as f:
                    f.write("pwned")
                results.append("wrote")
            except BaseException as e:
                results.append(type(e).__name__)
        try:
            os.remove({victim_file!r})
            results.append("removed")
        except BaseException as e:
            results.append(type(e).__name__)
        with open("inside.txt", "w") as f:
            f.write("fine")
        results.append(open("inside.txt").read())
        print(" ".join(results))
    """)  # noqa: E501


def _env_reader(test_pid):
  return _prog(f"""
        import os
        found = [k for k, v in os.environ.items() if "rla-secret" in v]
        for pid in (os.getppid(), {test_pid}, 1):
            try:
                data = open(f"/proc/{{pid}}/environ", "rb").read()
                if b"rla-secret" in data:
                    found.append(f"proc{{pid}}")
            except OSError:
                pass
        print("found" if found else "clean", found)
    """)


def _parent_killer(test_pid):
  return _prog(f"""
        import os, signal
        for target in (os.getppid(), {test_pid}):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        print("still here")
    """)


DEEP_RECURSION = _prog("""
    import sys
    sys.setrecursionlimit(10 ** 7)
    def f(n):
        return f(n + 1) + 1
    f(0)
""")


def _accept_until(server, received, stop):
  server.settimeout(0.1)
  while not stop.is_set():
    try:
      conn, _ = server.accept()
    except OSError:
      continue
    received.append(conn.recv(16))
    conn.close()


def _hostile_suite(ex, tmp_path, monkeypatch):
  """Runs every hostile program in one batch;
  returns {name: outcome} and side-effect info."""
  monkeypatch.setenv("RLA_TEST_SECRET", SECRET)
  world_writable_probe = f"/tmp/rla_sbx_probe_{uuid.uuid4().hex}"
  outside = tmp_path / "outside.txt"
  victim = tmp_path / "victim.txt"
  victim.write_text("keep me")
  server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
  server.bind(("127.0.0.1", 0))
  server.listen(1)
  sanity = socket.create_connection(
    server.getsockname(), timeout=2
  )  # the server is reachable from here
  server.accept()[0].close()
  sanity.close()
  received, stop = [], threading.Event()
  thread = threading.Thread(target=_accept_until, args=(server, received, stop))
  thread.start()
  cases = {
    "infinite_loop": ("while True:\n    pass\n", ""),
    "fork_bomb": (FORK_BOMB, ""),
    "memory_bomb": ("x = bytearray(8 * 2 ** 30)\n", ""),
    "memory_growth": (
      "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2 ** 20))\n",
      "",
    ),
    "huge_output": ("while True:\n    print('x' * 4096)\n", ""),
    "write_outside": (
      _outside_writer(str(outside), str(victim), world_writable_probe),
      "",
    ),
    "read_env": (_env_reader(os.getpid()), ""),
    "network": (_network_probe(server.getsockname()[1]), ""),
    "kill_parent": (_parent_killer(os.getpid()), ""),
    "deep_recursion": (DEEP_RECURSION, ""),
    "default_recursion": ("def f(n):\n    return f(n + 1)\nf(0)\n", ""),
    "ignores_stdin": ("print(42)\n", "1 " * 500_000),
    "sleeps_forever": ("import time\ntime.sleep(3600)\n", ""),
  }
  names = list(cases)
  outcomes = ex.execute([cases[n] for n in names], TIME_LIMIT)
  stop.set()
  thread.join()
  server.close()
  return (
    dict(zip(names, outcomes, strict=True)),
    outside,
    victim,
    received,
    world_writable_probe,
  )


def _check_common(results, outside, victim, received, ex):
  for name, out in results.items():
    assert out.status != SANDBOX_ERROR, (name, out)
    assert out.wall_s <= TIME_LIMIT + 1.0, (
      name,
      out.wall_s,
    )  # ended within its limit (+ kill latency)
  assert results["infinite_loop"].status == TIMEOUT
  assert results["sleeps_forever"].status == TIMEOUT
  assert results["fork_bomb"].status in (TIMEOUT, RUNTIME_ERROR)
  assert results["memory_bomb"].status == MEMORY_LIMIT
  # Page-faulting 1 GiB can take longer than the time
  # limit on a slow machine: either limit may fire.
  assert results["memory_growth"].status in (MEMORY_LIMIT, TIMEOUT)
  assert results["huge_output"].status == OUTPUT_LIMIT
  assert len(results["huge_output"].stdout.encode()) <= ex.limits.output_bytes
  assert results["default_recursion"].status == RUNTIME_ERROR
  assert "RecursionError" in results["default_recursion"].stderr_tail
  # Python 3.11 keeps Python frames off the C stack: a
  # raised recursion limit ends in whichever limit is hit.
  assert results["deep_recursion"].status in (
    RUNTIME_ERROR,
    MEMORY_LIMIT,
    TIMEOUT,
  )
  assert (
    results["ignores_stdin"].status == OK
    and results["ignores_stdin"].stdout.strip() == "42"
  )
  assert results["read_env"].stdout.startswith("clean"), results["read_env"]
  assert results["network"].stdout.startswith("blocked"), results["network"]
  # blocked by the sandbox, not by a failed import of socket
  assert "Error" in results["network"].stdout
  assert "ImportError" not in results["network"].stdout
  assert "ModuleNotFound" not in results["network"].stdout
  assert received == []
  assert (
    results["kill_parent"].status == OK
    and "still here" in results["kill_parent"].stdout
  )
  words = results["write_outside"].stdout.split()
  assert (
    len(words) == 6 and "wrote" not in words[:3] and words[4] != "removed"
  ), words
  assert words[-1] == "fine"  # the working directory itself is writable
  assert not outside.exists()
  assert victim.read_text() == "keep me"


def _sandbox_leftovers(root):
  return [p for p in os.listdir(root) if p.startswith("rla_sbx_")]


def test_hostile_programs_namespace_mode(executor, tmp_path, monkeypatch):
  results, outside, victim, received, probe = _hostile_suite(
    executor, tmp_path, monkeypatch
  )
  _check_common(results, outside, victim, received, executor)
  if executor.last_isolation["namespaces"] == "none":
    pytest.skip(
      "no namespaces on this platform: world-writable dirs are not protected"
    )
  assert (
    results["write_outside"].stdout.split()[3] != "wrote"
  )  # even /tmp is read-only for the program
  assert not os.path.exists(probe)
  assert _sandbox_leftovers(executor._tmp_root) == []
  assert executor.last_isolation["network"] in ("netns", "socket-guard")


def test_hostile_programs_fallback_mode(
  fallback_executor, tmp_path, monkeypatch
):
  """Without namespaces: uid drop (as root) + in-process socket guard contain
  everything except world-writable directories such as /tmp (documented
  limitation of this mode)."""
  if os.geteuid() != 0:
    pytest.skip(
      "fallback containment of file writes relies on the root-only uid drop"
    )
  results, outside, victim, received, probe = _hostile_suite(
    fallback_executor, tmp_path, monkeypatch
  )
  if os.path.exists(
    probe
  ):  # documented limitation of the fallback: world-writable dirs stay writable
    os.remove(probe)
  _check_common(results, outside, victim, received, fallback_executor)
  assert fallback_executor.last_isolation["network"] == "socket-guard"
  assert results["network"].stdout.split()[1] == "PermissionError"


@pytest.mark.parametrize("mode", ["namespaces", "fallback"])
def test_programs_import_the_standard_library(
  mode, executor, fallback_executor
):
  """Submodules of packages the launcher imported before dropping its uid
  (collections.abc, through typing and traceback) import in the program, and
  a raised exception ends with the program's own traceback."""
  ex = executor if mode == "namespaces" else fallback_executor
  imports = _prog("""
        import collections.abc
        import traceback
        from typing import List
        from collections import Counter
        xs: List[int] = [3, 1, 3]
        print(Counter(xs)[3], isinstance(xs, collections.abc.Sequence))
    """)
  raises = _prog("""
        def f():
            raise ValueError("boom from the program")
        f()
    """)
  ok, failed = ex.execute([(imports, ""), (raises, "")], TIME_LIMIT)
  assert (ok.status, ok.stdout, ok.stderr_tail) == (OK, "2 True\n", ""), ok
  assert failed.status == RUNTIME_ERROR, failed
  assert "ValueError: boom from the program" in failed.stderr_tail, failed
  assert 'File "main.py", line 2, in f' in failed.stderr_tail, failed


@pytest.mark.parametrize("mode", ["namespaces", "fallback"])
def test_process_limit_really_holds(mode, executor, fallback_executor):
  ex = executor if mode == "namespaces" else fallback_executor
  out = ex.execute([(FORK_COUNTER, "")], time_limit_s=3.0)[0]
  if not ex.last_isolation.get("nproc_limit"):
    pytest.skip(f"no process limit available in this mode: {ex.last_isolation}")
  assert out.status == OK, out
  assert int(out.stdout) < ex.limits.max_processes
  # The sleeping children were killed when the test
  # ended: no process of a sandbox uid survives.
  base = ex.limits.uid_base
  survivors = []
  for name in os.listdir("/proc"):
    if name.isdigit():
      try:
        uid = os.stat(f"/proc/{name}").st_uid
      except OSError:
        continue
      if base <= uid < base + 4096:
        survivors.append(name)
  assert survivors == []


def test_isolation_report_names_the_mechanisms(executor):
  report = executor.isolation_report()
  assert report["network"] in ("netns", "socket-guard")
  if report["namespaces"] != "none":
    assert report["workdir"] == "tmpfs"
    assert report["readonly_remount_failures"] == []


def test_results_matrix_and_invalid_programs(executor):
  programs = [
    "a, b = map(int, input().split())\nprint(a + b)\n",
    None,
    "print(int(input()) * 2)\n",
    "raise SystemExit(3)\n",
    "import sys\nsys.exit('bad')\n",
  ]
  tests = [("1 2\n", "3\n"), ("10 -4", " 6 ")]
  res = executor.run(programs, tests, time_limit_s=TIME_LIMIT)
  assert res.shape == (5, 2)
  assert res.passed.tolist() == [
    [True, True],
    [False, False],
    [False, False],
    [False, False],
    [False, False],
  ]
  assert res.status[1].tolist() == [INVALID_PROGRAM] * 2
  assert res.status[2].tolist() == [RUNTIME_ERROR] * 2  # int("1 2") raises
  assert res.status[3].tolist() == [RUNTIME_ERROR] * 2
  assert res.pass_all().tolist() == [True, False, False, False, False]


def test_each_test_gets_a_fresh_process_and_directory(executor):
  """State written by one test must not leak
  into the next test of the same program."""
  prog = _prog("""
        import os
        seen = os.path.exists("state.txt")
        open("state.txt", "w").write("x")
        print("seen" if seen else "fresh", input())
    """)
  outs = executor.execute([(prog, "a"), (prog, "b"), (prog, "c")], TIME_LIMIT)
  assert [o.stdout.split() for o in outs] == [
    ["fresh", "a"],
    ["fresh", "b"],
    ["fresh", "c"],
  ]


def test_closed_executor_refuses_work(tmp_path):
  ex = sb.SandboxExecutor(max_workers=1, tmp_root=str(tmp_path))
  ex.close()
  with pytest.raises(RuntimeError, match="closed"):
    ex.execute([("print(1)", "")], 1.0)
