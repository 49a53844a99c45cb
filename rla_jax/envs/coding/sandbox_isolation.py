"""Sandbox launcher, isolation: the launcher confines itself (and so every test
child it forks) before any test runs.

Runs inside the launcher process (``python -I -S -B``), imported by
``sandbox_launcher.py`` as a top-level module: it imports only the standard
library, never rla_jax. The launcher calls these steps in order (see its
docstring): unshare namespaces, become pid 1 of the new pid namespace, make the
filesystem read-only with a tmpfs working directory, enter the working directory
and pick the uid the test children drop to, become a child subreaper.
"""

import ctypes
import os
import sys

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


def setup_namespaces(cfg, report):
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


def become_pid_namespace_init():
  """Fork after unsharing the pid namespace: the child, pid 1 of the new
  namespace, returns and carries on; the parent waits for it and exits with 0
  when it succeeded, else 3."""
  pid1 = os.fork()  # becomes pid 1 of the new pid namespace
  if pid1 != 0:
    _, status = os.waitpid(pid1, 0)
    os._exit(0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 3)


def setup_filesystem(cfg, report):
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
  cfg["library_view"] = (libdir, "/tmp/.pylib")
  cfg["sys_path"] = [
    "/tmp/.pylib" + p[len(libdir) :] if p.startswith(libdir) else p
    for p in sys.path
  ]
  report["workdir"] = "tmpfs"


def prepare_workdir_and_uid(cfg, report):
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


def become_child_subreaper():
  """prctl(PR_SET_CHILD_SUBREAPER): orphaned test processes come back to the
  launcher. Returns True when it took effect."""
  return _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
