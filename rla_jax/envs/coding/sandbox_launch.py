"""Sandbox launch: the host's side of one launcher process, which runs one
program on up to ``tests_per_process`` stdins.

``run_launcher`` makes a private run directory (program, stdin files, config),
starts ``python -I -S -B sandbox_launcher.py CONFIG`` with exec (no
``preexec_fn``) in a new session with a scrubbed environment, kills its process
group (and, as root, every process of its dedicated uid) when it overruns its
budget, reads the outcomes and removes the run directory.
"""

from __future__ import annotations

import marshal
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

from rla_jax.envs.coding.sandbox_outcomes import (
  ExecutionOutcome,
  read_launcher_outcomes,
)
from rla_jax.envs.coding.sandbox_uids import (
  DedicatedUidPool,
  kill_uid_processes,
)

if TYPE_CHECKING:
  from rla_jax.envs.coding.sandbox import SandboxLimits

LAUNCHER_PATH = os.path.join(
  os.path.dirname(os.path.abspath(__file__)), "sandbox_launcher.py"
)


def _launcher_env(workdir: str) -> dict[str, str]:
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


def _write_run_dir(
  run_dir: str,
  program: str,
  stdins: list[str],
  time_limit_s: float,
  limits: SandboxLimits,
  uid: int | None,
) -> tuple[dict, str]:
  """Working directory, program, stdin files and the launcher's config in
  ``run_dir``; returns (config, config path)."""
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
    "use_namespaces": limits.use_namespaces,
    "tmpfs_bytes": limits.tmpfs_bytes,
    "limits": {
      "cpu_s": math.ceil(time_limit_s) + 1,
      "wall_s": time_limit_s,
      "memory_bytes": limits.memory_bytes,
      "output_bytes": limits.output_bytes,
      "max_open_files": limits.max_open_files,
      "max_processes": limits.max_processes,
      "stack_bytes": limits.stack_bytes,
    },
  }
  cfg_path = os.path.join(run_dir, "config.marshal")
  with open(cfg_path, "wb") as f:
    marshal.dump(cfg, f)
  return cfg, cfg_path


def _run_launcher_process(
  run_dir: str, cfg: dict, cfg_path: str, budget_s: float, uid: int | None
) -> None:
  """Start the launcher and wait for it; past ``budget_s`` kill its process
  group and, with a dedicated uid, every process of that uid."""
  with open(os.path.join(run_dir, "launcher_stderr"), "wb") as err_file:
    proc = subprocess.Popen(
      [sys.executable, "-I", "-S", "-B", LAUNCHER_PATH, cfg_path],
      cwd=run_dir,
      env=_launcher_env(cfg["workdir"]),
      stdin=subprocess.DEVNULL,
      stdout=subprocess.DEVNULL,
      stderr=err_file,
      start_new_session=True,
    )
    try:
      proc.wait(timeout=budget_s)
    except subprocess.TimeoutExpired:
      try:
        os.killpg(proc.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
      proc.wait()
      if uid is not None:
        kill_uid_processes(uid)


def run_launcher(
  program: str,
  stdins: list[str],
  time_limit_s: float,
  limits: SandboxLimits,
  tmp_root: str,
  uid_pool: DedicatedUidPool | None,
) -> tuple[list[ExecutionOutcome], dict | None]:
  """Run ``program`` on each stdin in one launcher: (one outcome per stdin,
  the launcher's isolation report or None)."""
  run_dir = tempfile.mkdtemp(prefix="rla_sbx_", dir=tmp_root)
  uid, uid_fd = uid_pool.acquire() if uid_pool else (None, None)
  try:
    os.chmod(run_dir, 0o711)
    cfg, cfg_path = _write_run_dir(
      run_dir, program, stdins, time_limit_s, limits, uid
    )
    budget_s = len(stdins) * (time_limit_s + 0.5) + limits.launcher_slack_s
    _run_launcher_process(run_dir, cfg, cfg_path, budget_s, uid)
    return read_launcher_outcomes(
      run_dir, cfg, len(stdins), limits.output_bytes
    )
  finally:
    if uid_fd is not None:
      DedicatedUidPool.release(uid_fd)
    shutil.rmtree(run_dir, ignore_errors=True)
