"""Sandbox launcher: runs ONE untrusted program on a list of stdin files.

Started by ``sandbox.SandboxExecutor`` as
``python -I -S -B sandbox_launcher.py CONFIG.marshal`` in a fresh process (exec,
never a fork of the trainer). It imports nothing from rla_jax (it must work with
``-I -S``) and applies every restriction to itself and its children:

1. Opens the per-test stdin/stdout/stderr files and the status file while it
   still sees them.
2. Isolation (best effort, reported in the first status line):
   - root:      unshare(NEWNS | NEWPID | NEWNET)
   - non-root:  unshare(NEWUSER | NEWNS | NEWPID | NEWNET) with a 1-uid map
   If that works: make all mounts private, remount every mount read-only, mount
   a fresh /proc (only sandbox pids visible) and a size-capped tmpfs as the
   working directory. Otherwise (fallback) try a network namespace alone;
   without one, the per-test child installs an in-process socket guard.
3. As root with a dedicated uid: every per-test child drops to that uid (so
   RLIMIT_NPROC is enforced and the trainer's processes, /proc files and private
   files are out of reach); the launcher keeps its uid, so a test cannot signal
   it, and is a child subreaper, so orphans come back to it and are reaped.
4. For each test: fork a fresh child from the clean launcher state; the child
   sets its own rlimits (CPU, AS, FSIZE, NOFILE, NPROC, CORE, STACK), wires the
   test files to fd 0/1/2, and executes the program text. The parent enforces
   the wall-clock limit, then kills everything the child left behind (kill(-1)
   as the pid-namespace init or dedicated uid, else the child's process group)
   and writes one status line (a Python literal) per test.

This file is the entry point and the order of those steps; the steps live in
three sibling modules, standard library only like this file: step 2 and the
uid choice of step 3 in ``sandbox_isolation.py``, the per-test child of step 4
in ``sandbox_test_child.py``, the per-test loop of step 4 in
``sandbox_test_loop.py``.
"""

import marshal
import os
import sys

# Run as a script under -I, this directory is not on sys.path: it is put there
# only while the sibling modules are imported, so that the programs see the
# interpreter's own sys.path (in namespace mode, its remapped copy).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
  import sandbox_isolation
  import sandbox_test_loop
finally:
  del sys.path[0]


def _read_program_and_open_test_files(cfg):
  """The program text and (stdin, stdout, stderr) fds per test, opened while
  the launcher still sees the host's files."""
  with open(cfg["program_path"], encoding="utf-8", errors="replace") as f:
    src = f.read()
  test_fds = [
    (
      os.open(i, os.O_RDONLY),
      os.open(o, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
      os.open(e, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    )
    for i, o, e in zip(
      cfg["inputs"], cfg["outputs"], cfg["errors"], strict=True
    )
  ]
  return src, test_fds


def _isolate(cfg, report):
  """Steps 2-3, in order: namespaces, pid-namespace init, filesystem, working
  directory and uid, child subreaper, whether RLIMIT_NPROC holds."""
  started_as_root = os.geteuid() == 0
  cfg["namespaced"] = sandbox_isolation.setup_namespaces(cfg, report)
  if cfg["namespaced"]:
    sandbox_isolation.become_pid_namespace_init()
    sandbox_isolation.setup_filesystem(cfg, report)
  sandbox_isolation.prepare_workdir_and_uid(cfg, report)
  if sandbox_isolation.become_child_subreaper():
    report["subreaper"] = True
  # RLIMIT_NPROC is ignored for real root; it holds for a dropped uid and
  # inside a user namespace.
  cfg["enforce_nproc"] = not started_as_root or cfg["drop_to_uid"] is not None
  report["nproc_limit"] = cfg["enforce_nproc"]


def main(config_path):
  with open(config_path, "rb") as f:
    cfg = marshal.load(f)
  status_fd = os.open(
    cfg["status_path"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
  )
  try:
    src, test_fds = _read_program_and_open_test_files(cfg)
    report = {}
    cfg["report"] = report
    _isolate(cfg, report)
    sandbox_test_loop.write_status_record(status_fd, {"isolation": report})
    sandbox_test_loop.run_tests(
      cfg,
      src,
      test_fds,
      status_fd,
      is_ns_init=cfg["namespaced"] and os.getpid() == 1,
    )
  except BaseException as e:
    import traceback

    sandbox_test_loop.write_status_record(
      status_fd, {"fatal": f"{e}\n{traceback.format_exc()}"}
    )
    os._exit(2)
  os._exit(0)


if __name__ == "__main__":
  main(sys.argv[1])
