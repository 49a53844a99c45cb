"""Multi-host startup: which environments call jax.distributed.initialize.

Each supported launcher's variables are simulated; the initialize call is
observed through a recording stand-in (no cluster is started).
"""

from __future__ import annotations

import pytest

from rla_jax import cluster
from rla_jax.errors import ConfigError

SLURM_2 = {
  "SLURM_JOB_ID": "4242",
  "SLURM_STEP_NODELIST": "node[1-2]",
  "SLURM_NTASKS": "2",
  "SLURM_PROCID": "1",
  "SLURM_LOCALID": "0",
}
COORD = {
  "JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234",
  "JAX_NUM_PROCESSES": "4",
  "JAX_PROCESS_ID": "3",
}


def _no_tpu() -> int:
  return 0


def _start(env, tpu_workers=_no_tpu):
  """Runs the real entry point with a recording initialize; returns the
  list of kwargs it was called with."""
  calls = []
  cluster.maybe_initialize_distributed(
    env=env, initialize=lambda **kw: calls.append(kw), tpu_workers=tpu_workers
  )
  return calls


def test_single_machine_stays_single_process():
  assert _start({}) == []
  assert _start({"PATH": "/usr/bin", "HOME": "/root"}) == []


def test_coordinator_variables_are_passed_explicitly():
  assert _start(COORD) == [
    {
      "coordinator_address": "10.0.0.1:1234",
      "num_processes": 4,
      "process_id": 3,
    }
  ]


def test_slurm_with_several_tasks_auto_detects():
  assert _start(SLURM_2) == [{}]
  start = cluster.detect_cluster(SLURM_2, _no_tpu)
  assert start.kind == "slurm" and "SLURM_NTASKS=2" in start.reason


def test_slurm_with_one_task_or_outside_a_step_is_single():
  assert _start({**SLURM_2, "SLURM_NTASKS": "1"}) == []
  outside_step = {
    k: v for k, v in SLURM_2.items() if k != "SLURM_STEP_NODELIST"
  }
  assert _start(outside_step) == []


def test_tpu_slice_from_gke_variables():
  env = {"TPU_WORKER_HOSTNAMES": "t-0,t-1,t-2,t-3", "TPU_WORKER_ID": "2"}
  assert _start(env) == [{}]
  assert cluster.detect_cluster(env, _no_tpu).reason == (
    "Cloud TPU slice of 4 workers"
  )
  assert _start({"TPU_WORKER_HOSTNAMES": "t-0"}) == []


def test_tpu_slice_from_metadata_probe():
  assert _start({}, tpu_workers=lambda: 8) == [{}]
  assert _start({}, tpu_workers=lambda: 1) == []  # a single-host TPU VM


def test_multislice():
  assert _start({"MEGASCALE_NUM_SLICES": "2"}) == [{}]


def test_switch_off_wins_and_switch_on_forces():
  for env in (COORD, SLURM_2, {"TPU_WORKER_HOSTNAMES": "a,b"}):
    assert _start({**env, cluster.SWITCH: "0"}) == []
  assert _start({cluster.SWITCH: "1"}) == [{}]
  # Explicit coordinator variables still win over a bare switch-on.
  assert _start({**COORD, cluster.SWITCH: "1"})[0]["process_id"] == 3


def test_probe_not_asked_when_variables_decide():
  def boom() -> int:
    raise AssertionError("metadata probe called")

  assert _start(COORD, tpu_workers=boom)[0]["num_processes"] == 4
  assert _start({cluster.SWITCH: "0"}, tpu_workers=boom) == []


@pytest.mark.parametrize(
  ("env", "needle"),
  [
    ({cluster.SWITCH: "yes"}, "RLA_JAX_DISTRIBUTED='yes'"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1"}, "JAX_NUM_PROCESSES, JAX_PROCESS_ID"),
    ({**COORD, "JAX_PROCESS_ID": "x"}, "JAX_PROCESS_ID='x'"),
  ],
)
def test_bad_variables_are_one_clear_error(env, needle):
  with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
    _start(env)


def test_this_machine_probe_finds_no_tpu_slice():
  # The CI machine has no TPU: the real probe must say so without a
  # network call (no Google PCI device).
  assert cluster.tpu_slice_workers() == 0


def test_launcher_initialises_before_building_the_loop(monkeypatch, tmp_path):
  """launch/tpu_run.main joins the cluster before any loop is built."""
  from launch import tpu_run

  order = []
  monkeypatch.setattr(
    cluster, "maybe_initialize_distributed", lambda: order.append("init")
  )

  class FakeLoop:
    def run(self):
      order.append("run")

  import rla_jax.rl.loops as loops

  monkeypatch.setattr(
    loops, "make_loop", lambda *a, **k: order.append("build") or FakeLoop()
  )

  import ml_collections

  class ConfigFlag:
    value = ml_collections.ConfigDict({"name": "alfworld", "preset": "t"})

  class WorkdirFlag:
    value = str(tmp_path)

  monkeypatch.setattr(tpu_run, "_CONFIG", ConfigFlag)
  monkeypatch.setattr(tpu_run, "_WORKDIR", WorkdirFlag)
  monkeypatch.setattr(tpu_run, "enable_compilation_cache", lambda: None)
  tpu_run.main([])
  assert order == ["init", "build", "run"]
