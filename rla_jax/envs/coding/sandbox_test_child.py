"""Sandbox launcher, test child: the process forked for ONE test confines
itself further and executes the program text.

Runs inside the launcher process (``python -I -S -B``), imported by
``sandbox_launcher.py`` (through ``sandbox_test_loop.py``) as a top-level
module: it imports only the standard library, never rla_jax. In order, the
child: becomes its own process group, wires the test's files to fd 0/1/2 and
closes every other fd, sets its rlimits (CPU, AS, FSIZE, NOFILE, CORE, STACK,
then NPROC where it holds), drops to the dedicated uid, installs the socket
guard when there is no network namespace, and prepares the interpreter
(sys.path, HOME/TMPDIR, exit, argv, std streams). A failure in any of that exits
with 121 (a sandbox error, not a user error); then the program runs as
``__main__`` and its exit status becomes the child's.
"""

import builtins
import os
import resource
import sys

SETUP_FAILED_EXIT_CODE = 121


def become_uid(uid):
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


def _wire_test_files(fds):
  """The test's stdin/stdout/stderr files become fd 0/1/2; every other fd is
  closed."""
  in_fd, out_fd, err_fd = fds
  os.dup2(in_fd, 0)
  os.dup2(out_fd, 1)
  os.dup2(err_fd, 2)
  os.closerange(3, 65536)


def _set_rlimits(cfg):
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


def _search_library_view(real, view):
  """Packages the launcher imported from the real library directory `real`
  (collections, encodings, ...) look for their submodules in its read-only
  view `view` instead, as sys.path does: the dedicated uid may not traverse
  `real` (e.g. /root/.pyenv), and `import collections.abc` (so typing and
  traceback) failed there."""
  for module in list(sys.modules.values()):
    spec = getattr(module, "__spec__", None)
    for where in (
      getattr(module, "__path__", None),
      getattr(spec, "submodule_search_locations", None),
    ):
      if isinstance(where, list):
        where[:] = [
          view + p[len(real) :] if p.startswith(real + os.sep) else p
          for p in where
        ]
  sys.path_importer_cache.clear()


def _prepare_interpreter(cfg):
  """What the program sees of the interpreter: sys.path (and the search
  paths of packages already imported, `_search_library_view`), HOME/TMPDIR,
  exit, argv and std streams on fd 0/1/2."""
  if cfg.get("sys_path"):
    sys.path[:] = cfg["sys_path"]
  if cfg.get("library_view"):
    _search_library_view(*cfg["library_view"])
  os.environ["HOME"] = os.environ["TMPDIR"] = cfg["workdir"]
  builtins.exit = builtins.quit = sys.exit
  sys.argv = ["main.py"]
  sys.stdin = open(0, closefd=False)
  sys.stdout = open(1, "w", closefd=False)
  sys.stderr = open(2, "w", closefd=False)


def run_test_child(cfg, src, fds):
  """Forked per-test child: confine this process, then run the program text as
  ``__main__`` and exit with its status. Never returns.

  The program runs in this frame rather than a helper's, so a traceback holds
  as few launcher frames as possible: the host looks for MemoryError in the
  last 4096 bytes of stderr.
  """
  try:
    os.setpgid(0, 0)
    _wire_test_files(fds)
    _set_rlimits(cfg)
    if cfg["drop_to_uid"] is not None:
      become_uid(cfg["drop_to_uid"])
    if cfg["report"]["network"] != "netns":
      _install_socket_guard()
    _prepare_interpreter(cfg)
  except (
    BaseException
  ) as e:  # setup failure: visible as a sandbox error, not a user error
    os.write(2, f"sandbox child setup failed: {e!r}\n".encode())
    os._exit(SETUP_FAILED_EXIT_CODE)
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
