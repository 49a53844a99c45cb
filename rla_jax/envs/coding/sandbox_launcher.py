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
   and writes one JSON status line per test.
"""

import ctypes
import marshal
import os
import resource
import select
import signal
import sys
import time

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (
  0x00020000,
  0x10000000,
  0x20000000,
  0x40000000,
)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = (
  32,
  1024,
  2048,
  4096,
  16384,
)
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PR_SET_CHILD_SUBREAPER = 36
_LOCKED_FLAGS = {
  "nosuid": MS_NOSUID,
  "nodev": MS_NODEV,
  "noexec": MS_NOEXEC,
  "noatime": MS_NOATIME,
  "nodiratime": MS_NODIRATIME,
  "relatime": MS_RELATIME,
  "strictatime": MS_STRICTATIME,
}

PREIMPORTED_MODULES = (
  "abc",
  "array",
  "bisect",
  "cmath",
  "collections",
  "copy",
  "dataclasses",
  "datetime",
  "decimal",
  "enum",
  "fractions",
  "functools",
  "heapq",
  "io",
  "itertools",
  "json",
  "math",
  "operator",
  "random",
  "re",
  "pathlib",
  "socket",
  "statistics",
  "string",
  "struct",
  "tempfile",
  "textwrap",
  "threading",
  "traceback",
  "typing",
  "unicodedata",
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
  ctypes.c_char_p,
  ctypes.c_char_p,
  ctypes.c_char_p,
  ctypes.c_ulong,
  ctypes.c_char_p,
]


def _b(s):
  return None if s is None else os.fsencode(s)


def _mount(source, target, fstype, flags, data=None):
  if _libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)) != 0:
    err = ctypes.get_errno()
    raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _unshare(flags):
  if _libc.unshare(flags) != 0:
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err))


def _write_file(path, text):
  with open(path, "w") as f:
    f.write(text)


def _mountinfo():
  """[(mount_point, per-mount option flags)] from /proc/self/mountinfo."""
  out = []
  with open("/proc/self/mountinfo") as f:
    for line in f:
      parts = line.split()
      mp = parts[4].encode().decode("unicode_escape")
      flags = 0
      for opt in parts[5].split(","):
        flags |= _LOCKED_FLAGS.get(opt, 0)
      out.append((mp, flags))
  return out


def _setup_namespaces(cfg, report):
  """Unshare namespaces; returns True when mount+pid+net namespaces are in
  effect."""
  is_root = os.geteuid() == 0
  if cfg["use_namespaces"]:
    flags = (
      CLONE_NEWNS
      | CLONE_NEWPID
      | CLONE_NEWNET
      | (0 if is_root else CLONE_NEWUSER)
    )
    uid, gid = os.getuid(), os.getgid()
    try:
      _unshare(flags)
      if not is_root:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"0 {uid} 1")
        _write_file("/proc/self/gid_map", f"0 {gid} 1")
      report["namespaces"] = "mount+pid+net" + ("" if is_root else "+user")
      report["network"] = "netns"
      return True
    except OSError as e:
      report["namespace_error"] = str(e)
    try:
      _unshare(CLONE_NEWNET | (0 if is_root else CLONE_NEWUSER))
      report["network"] = "netns"
    except OSError as e:
      report["netns_error"] = str(e)
  report.setdefault("namespaces", "none")
  report.setdefault("network", "socket-guard")
  return False


def _setup_filesystem(cfg, report):
  """Inside the new mount namespace: private, read-only everything, fresh /proc,
  tmpfs workdir."""
  _mount(None, "/", None, MS_REC | MS_PRIVATE)
  failures = []
  for mp, flags in _mountinfo():
    try:
      _mount(None, mp, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)
    except OSError:
      failures.append(mp)
  report["readonly_remount_failures"] = failures
  try:
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    report["proc"] = "private"
  except OSError as e:
    report["proc"] = f"host ({e})"
  # A fresh, size-capped /tmp holds the working directory and a read-only view
  # of the Python library (the dropped uid may not be able to traverse the real
  # prefix, e.g. /root/.pyenv).
  uid = cfg["uid"] if cfg["uid"] is not None else 0
  _mount(
    "tmpfs",
    "/tmp",
    "tmpfs",
    MS_NOSUID | MS_NODEV,
    f"size={int(cfg['tmpfs_bytes'])},mode=0755",
  )
  os.mkdir("/tmp/work", 0o700)
  os.chown("/tmp/work", uid, uid)
  libdir = os.path.dirname(os.path.dirname(os.__file__))
  os.mkdir("/tmp/.pylib", 0o755)
  _mount(libdir, "/tmp/.pylib", None, MS_BIND | MS_REC)
  _mount(
    None,
    "/tmp/.pylib",
    None,
    MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
  )
  cfg["workdir"] = "/tmp/work"
  cfg["sys_path"] = [
    "/tmp/.pylib" + p[len(libdir) :] if p.startswith(libdir) else p
    for p in sys.path
  ]
  report["workdir"] = "tmpfs"


def _prepare_workdir_and_uid(cfg, report):
  """Enter the working directory; decide the uid the per-test children will drop
  to.

  The launcher itself keeps its uid so that a test child (running as the
  dedicated uid) cannot signal it; each child drops privileges right after
  setting its rlimits.
  """
  uid = cfg["uid"]
  drop = uid is not None and os.geteuid() == 0
  if drop and not cfg["namespaced"]:
    os.chown(cfg["workdir"], uid, uid)
    os.chmod(cfg["workdir"], 0o700)
  os.chdir(cfg["workdir"])
  cfg["drop_to_uid"] = uid if drop else None
  report["uid"] = uid if drop else os.getuid()
  if (
    drop and not cfg["namespaced"]
  ):  # the dropped uid may not reach the stdlib: import common modules now
    for name in PREIMPORTED_MODULES:
      try:
        __import__(name)
      except ImportError:
        pass
    report["stdlib"] = "preimported"


def _become_uid(uid):
  os.setgroups([])
  os.setgid(uid)
  os.setuid(uid)


def _install_socket_guard():
  import _socket
  import socket

  def _blocked(*args, **kwargs):
    raise PermissionError(1, "network access is disabled in the sandbox")

  class _NoSocket:
    def __new__(cls, *args, **kwargs):
      _blocked()

  for mod in (socket, _socket):
    mod.socket = _NoSocket
    for name in (
      "create_connection",
      "socketpair",
      "fromfd",
      "getaddrinfo",
      "create_server",
    ):
      if hasattr(mod, name):
        setattr(mod, name, _blocked)


def _run_child(cfg, src, fds):
  """Forked per-test child: never returns."""
  try:
    os.setpgid(0, 0)
    in_fd, out_fd, err_fd = fds
    os.dup2(in_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.closerange(3, 65536)
    lim = cfg["limits"]
    cpu = int(lim["cpu_s"])
    for res, value in (
      (resource.RLIMIT_CPU, (cpu, cpu + 1)),
      (resource.RLIMIT_AS, lim["memory_bytes"]),
      (resource.RLIMIT_FSIZE, lim["output_bytes"]),
      (resource.RLIMIT_NOFILE, lim["max_open_files"]),
      (resource.RLIMIT_CORE, 0),
      (resource.RLIMIT_STACK, lim["stack_bytes"]),
    ):
      soft, hard = value if isinstance(value, tuple) else (value, value)
      resource.setrlimit(res, (soft, hard))
    if cfg["enforce_nproc"]:
      resource.setrlimit(
        resource.RLIMIT_NPROC, (lim["max_processes"], lim["max_processes"])
      )
    if cfg["drop_to_uid"] is not None:
      _become_uid(cfg["drop_to_uid"])
    if cfg["report"]["network"] != "netns":
      _install_socket_guard()
    import builtins

    if cfg.get("sys_path"):
      sys.path[:] = cfg["sys_path"]
    os.environ["HOME"] = os.environ["TMPDIR"] = cfg["workdir"]
    builtins.exit = builtins.quit = sys.exit
    sys.argv = ["main.py"]
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
  except (
    BaseException
  ) as e:  # setup failure: visible as a sandbox error, not a user error
    os.write(2, f"sandbox child setup failed: {e!r}\n".encode())
    os._exit(121)
  code = 0
  try:
    exec(
      compile(src, "main.py", "exec"),
      {"__name__": "__main__", "__builtins__": builtins},
    )
  except SystemExit as e:
    if e.code is None:
      code = 0
    elif isinstance(e.code, int):
      code = e.code & 0xFF
    else:
      print(e.code, file=sys.stderr)
      code = 1
  except BaseException:
    # lazily: keeps launcher start-up fast (reachable via sys_path / preimport)
    import traceback

    traceback.print_exc()
    code = 1
  try:
    sys.stdout.flush()
    sys.stderr.flush()
  except BaseException:
    code = code or 1
  os._exit(code)


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
        _become_uid(dedicated_uid)
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


def _write_record(fd, record):
  """One status record per line, as a Python literal (json would cost ~25 ms of
  imports)."""
  os.write(fd, (repr(record) + "\n").encode())


def _run_tests(cfg, src, test_fds, status_fd, is_ns_init):
  dedicated_uid = cfg["drop_to_uid"]
  for i, fds in enumerate(test_fds):
    if os.listdir("."):
      _clear_workdir(".")
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
      _run_child(cfg, src, fds)
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
    _write_record(status_fd, rec)


def main(config_path):
  with open(config_path, "rb") as f:
    cfg = marshal.load(f)
  status_fd = os.open(
    cfg["status_path"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
  )
  try:
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
    report = {}
    cfg["report"] = report
    started_as_root = os.geteuid() == 0
    cfg["namespaced"] = _setup_namespaces(cfg, report)
    if cfg["namespaced"]:
      pid1 = os.fork()  # becomes pid 1 of the new pid namespace
      if pid1 != 0:
        _, status = os.waitpid(pid1, 0)
        os._exit(
          0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 3
        )
      _setup_filesystem(cfg, report)
    _prepare_workdir_and_uid(cfg, report)
    if (
      _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    ):  # orphaned test processes come back to us
      report["subreaper"] = True
    # RLIMIT_NPROC is ignored for real root; it holds for a dropped uid and
    # inside a user namespace.
    cfg["enforce_nproc"] = not started_as_root or cfg["drop_to_uid"] is not None
    report["nproc_limit"] = cfg["enforce_nproc"]
    _write_record(status_fd, {"isolation": report})
    _run_tests(
      cfg,
      src,
      test_fds,
      status_fd,
      is_ns_init=cfg["namespaced"] and os.getpid() == 1,
    )
  except BaseException as e:
    import traceback

    _write_record(status_fd, {"fatal": f"{e}\n{traceback.format_exc()}"})
    os._exit(2)
  os._exit(0)


if __name__ == "__main__":
  main(sys.argv[1])
