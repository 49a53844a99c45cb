"""Multi-host startup: which cluster this process runs in, and joining it.

`python launch/tpu_run.py --config=...` is the same command on every host.
Before any JAX computation it calls `maybe_initialize_distributed()`, which
reads the environment and calls `jax.distributed.initialize()` when the
process is one of several:

  1. `RLA_JAX_DISTRIBUTED=0` switches multi-host startup off (whatever else
     is set); `RLA_JAX_DISTRIBUTED=1` forces it on, with JAX's own cluster
     auto-detection;
  2. JAX's coordinator variables (`JAX_COORDINATOR_ADDRESS`,
     `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`), passed explicitly (any launcher:
     `launch/gpu_cluster.sh`, the multi-process tests);
  3. a SLURM step with more than one task (the variables JAX's SLURM
     cluster reads: `SLURM_JOB_ID`, `SLURM_STEP_NODELIST`, `SLURM_NTASKS`,
     `SLURM_PROCID`, `SLURM_LOCALID`);
  4. a Cloud TPU VM slice of more than one worker: TPU chips on this
     machine's PCI bus and several workers, read from `TPU_WORKER_HOSTNAMES`
     / `TPU_PROCESS_ADDRESSES` (GKE) or the VM's metadata server (GCE), or
     a multislice run (`MEGASCALE_NUM_SLICES` > 1).

Anything else (a laptop, one GPU box, a single-host TPU VM) stays a single
process. Detection (`detect_cluster`) is a pure function of the environment
and a probe of the TPU slice, so every case is tested without a cluster.
JAX's `clusters` package does the same auto-detection once `initialize()`
is called, but it raises on a single machine; this module decides whether
to call it at all.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

import jax
from absl import logging

from rla_jax.errors import ConfigError

SWITCH = "RLA_JAX_DISTRIBUTED"
COORDINATOR_VARS = (
  "JAX_COORDINATOR_ADDRESS",
  "JAX_NUM_PROCESSES",
  "JAX_PROCESS_ID",
)
SLURM_VARS = (
  "SLURM_JOB_ID",
  "SLURM_STEP_NODELIST",
  "SLURM_NTASKS",
  "SLURM_PROCID",
  "SLURM_LOCALID",
)
_GOOGLE_PCI_VENDOR = "0x1ae0"
_METADATA_URL = (
  "http://metadata.google.internal/computeMetadata/v1/instance/attributes/"
)


@dataclasses.dataclass(frozen=True)
class ClusterStart:
  """How this process joins a multi-process run.

  kind: "forced" | "coordinator" | "slurm" | "tpu_slice"; kwargs: passed to
  `jax.distributed.initialize` (empty = JAX auto-detects); reason: one line
  for the log naming the variables that decided it.
  """

  kind: str
  kwargs: dict[str, Any]
  reason: str


def tpu_slice_workers() -> int:
  """Workers of this Cloud TPU slice: 0 without TPU chips on the PCI bus,
  else the entries of `worker-network-endpoints` in the VM's metadata
  (1 when the metadata server does not answer within 2 s)."""
  vendors = glob.glob("/sys/bus/pci/devices/*/vendor")
  if not any(_read(p) == _GOOGLE_PCI_VENDOR for p in vendors):
    return 0
  request = urllib.request.Request(
    _METADATA_URL + "worker-network-endpoints",
    headers={"Metadata-Flavor": "Google"},
  )
  try:
    with urllib.request.urlopen(request, timeout=2) as reply:
      endpoints = reply.read().decode()
  except OSError:
    return 1
  return max(1, len([e for e in endpoints.split(",") if e.strip()]))


def _read(path: str) -> str:
  with open(path) as f:
    return f.read().strip()


def _int_var(env: Mapping[str, str], name: str) -> int:
  try:
    return int(env[name])
  except ValueError:
    raise ConfigError(
      f"environment variable {name}={env[name]!r} is not an integer"
    ) from None


def _listed_workers(env: Mapping[str, str]) -> int:
  """Workers named by GKE's TPU variables (0 when neither is set)."""
  for name in ("TPU_PROCESS_ADDRESSES", "TPU_WORKER_HOSTNAMES"):
    if env.get(name):
      return len([h for h in env[name].split(",") if h.strip()])
  return 0


def detect_cluster(
  env: Mapping[str, str], tpu_workers: Callable[[], int] = tpu_slice_workers
) -> ClusterStart | None:
  """The multi-process run this environment describes, or None (single
  process). Rules in the module docstring, in order; `tpu_workers` is
  asked only when no variable decided."""
  switch = env.get(SWITCH, "")
  if switch not in ("", "0", "1"):
    raise ConfigError(f"environment variable {SWITCH}={switch!r}: use 0 or 1")
  if switch == "0":
    return None
  if env.get(COORDINATOR_VARS[0]):
    missing = [v for v in COORDINATOR_VARS[1:] if v not in env]
    if missing:
      raise ConfigError(
        f"{COORDINATOR_VARS[0]} is set but {', '.join(missing)} is not"
      )
    kwargs = {
      "coordinator_address": env[COORDINATOR_VARS[0]],
      "num_processes": _int_var(env, "JAX_NUM_PROCESSES"),
      "process_id": _int_var(env, "JAX_PROCESS_ID"),
    }
    return ClusterStart("coordinator", kwargs, "JAX_COORDINATOR_ADDRESS")
  if switch == "1":
    return ClusterStart("forced", {}, f"{SWITCH}=1")
  if all(v in env for v in SLURM_VARS) and _int_var(env, "SLURM_NTASKS") > 1:
    return ClusterStart("slurm", {}, f"SLURM_NTASKS={env['SLURM_NTASKS']}")
  slices = (
    _int_var(env, "MEGASCALE_NUM_SLICES")
    if env.get("MEGASCALE_NUM_SLICES")
    else 1
  )
  if slices > 1:
    return ClusterStart("tpu_slice", {}, f"MEGASCALE_NUM_SLICES={slices}")
  workers = _listed_workers(env) or tpu_workers()
  if workers > 1:
    return ClusterStart(
      "tpu_slice", {}, f"Cloud TPU slice of {workers} workers"
    )
  return None


def maybe_initialize_distributed(
  env: Mapping[str, str] | None = None,
  initialize: Callable[..., None] | None = None,
  tpu_workers: Callable[[], int] = tpu_slice_workers,
) -> ClusterStart | None:
  """Calls `jax.distributed.initialize` when `detect_cluster` finds a
  multi-process run (once: a no-op if already initialised); returns what
  it detected. `env`, `initialize` and `tpu_workers` default to the real
  ones; tests pass their own."""
  env = os.environ if env is None else env
  initialize = jax.distributed.initialize if initialize is None else initialize
  if jax.distributed.is_initialized():
    return None
  start = detect_cluster(env, tpu_workers)
  if start is None:
    return None
  initialize(**start.kwargs)
  logging.info("jax.distributed initialised (%s: %s)", start.kind, start.reason)
  return start
