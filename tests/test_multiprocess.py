"""Multi-controller runs: two local CPU processes vs one process.

Two worker processes (tests/multiprocess_worker.py) join a jax.distributed
run with a coordinator on 127.0.0.1 and gloo CPU collectives, one CPU device
each, so the mesh (data 1, fsdp 2, tensor 1) shards parameters and batches
across the processes. A third worker runs the same program alone (one
device) with the same global batches. The test checks that both processes
end with identical parameters, metrics and samples, and that these match
the single-process run.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from rla_jax import distributed

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKER = os.path.join(_REPO, "tests", "multiprocess_worker.py")
# Every worker is killed past this (a hang cannot block CI); a quiet run
# takes about 130 s, a loaded machine (CI beside other jobs) twice that.
_TIMEOUT_S = 480


def test_process_slice_blocks_cover_items_in_order():
  for n in (0, 1, 2, 3, 7, 8):
    for P in (1, 2, 3):
      blocks = [distributed.process_slice(n, p, P) for p in range(P)]
      items = [i for b in blocks for i in range(n)[b]]
      assert items == list(range(n))
      sizes = [len(range(n)[b]) for b in blocks]
      assert max(sizes) - min(sizes) <= 1
  with pytest.raises(ValueError, match="process index 2"):
    distributed.process_slice(4, 2, 2)


def test_single_process_helpers_are_plain_calls():
  assert distributed.allgather_objects({"a": 1}) == [{"a": 1}]
  assert distributed.allgather_lists([3, 4]) == [3, 4]
  assert distributed.global_any(False) is False
  assert distributed.fingerprint(np.arange(3)) != distributed.fingerprint(
    np.arange(3).astype(np.int64) + 1
  )
  distributed.assert_same_on_all_processes("x", np.arange(3))


def _build_models(out: str) -> None:
  """Tiny random-init policy and reward Qwen3 models + a small BPE trained
  on real ALFWorld prompts (short prompts keep the test fast)."""
  from flax import nnx

  from rla_jax.envs.alfworld import generate_split, make_env
  from rla_jax.models import Qwen, QwenConfig, save_qwen
  from rla_jax.rl import agent_text
  from rla_jax.warmstart.bpe_tokenizer import train_bpe_tokenizer

  games = generate_split("train", 40, 0, room_size="small")
  obs, infos = make_env("native", len(games)).reset(games)
  texts = [
    agent_text.policy_response_text("go to fridge 1", 3),
    agent_text.judge_response_text(1),
    agent_text.judge_response_text(-1),
  ]
  for o, admissible in zip(obs, infos["admissible_commands"], strict=True):
    prompt = agent_text.policy_step_text([o], [], admissible, 0)
    texts += [
      prompt,
      agent_text.judge_step_text(
        prompt, agent_text.policy_response_text(admissible[0], 1), o
      ),
    ]
  tok = train_bpe_tokenizer(texts * 3, 1000, os.path.join(out, "tok"))
  for seed, name in enumerate(("policy", "reward")):
    cfg = QwenConfig(
      "qwen3", len(tok), 64, 128, 2, 4, 2, 16, tie_word_embeddings=True
    )
    save_qwen(
      Qwen(cfg, rngs=nnx.Rngs(seed)), os.path.join(out, name), tokenizer=tok
    )


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _start(models, workdir, out, env_extra, log):
  env = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith("JAX_") and k != "XLA_FLAGS"
  }
  env.update(env_extra, PYTHONPATH=_REPO, JAX_PLATFORMS="cpu")
  return subprocess.Popen(
    [sys.executable, _WORKER, models, workdir, out],
    env=env,
    stdout=log,
    stderr=subprocess.STDOUT,
  )


def _wait_all(procs, logs, deadline):
  """Waits for every worker; kills all of them if one fails or time's up."""
  try:
    while any(p.poll() is None for p in procs):
      failed = [p for p in procs if p.returncode not in (None, 0)]
      if failed or time.monotonic() > deadline:
        break
      time.sleep(0.5)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  if any(p.returncode != 0 for p in procs):
    tails = []
    for p, path in zip(procs, logs, strict=True):
      with open(path, errors="replace") as f:
        tails.append(f"--- {path} (rc {p.returncode}) ---\n" + f.read()[-4000:])
    pytest.fail("worker failed or timed out:\n" + "\n".join(tails))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Results of the two-process run (per process) and the 1-process run."""
  root = tmp_path_factory.mktemp("multiprocess")
  models = str(root / "models")
  _build_models(models)
  address = f"127.0.0.1:{_free_port()}"
  procs, logs, outs = [], [], []
  deadline = time.monotonic() + _TIMEOUT_S
  for name, env in (
    (
      "p0",
      {
        "JAX_COORDINATOR_ADDRESS": address,
        "JAX_NUM_PROCESSES": "2",
        "JAX_PROCESS_ID": "0",
      },
    ),
    (
      "p1",
      {
        "JAX_COORDINATOR_ADDRESS": address,
        "JAX_NUM_PROCESSES": "2",
        "JAX_PROCESS_ID": "1",
      },
    ),
    ("single", {}),
  ):
    workdir = str(root / ("work_single" if name == "single" else "work_2p"))
    outs.append(str(root / f"{name}.npz"))
    logs.append(str(root / f"{name}.log"))
    with open(logs[-1], "w") as log:
      procs.append(_start(models, workdir, outs[-1], env, log))
  _wait_all(procs, logs, deadline)
  return [dict(np.load(o)) for o in outs]


def _assert_results_match(a, b, rtol, atol, what):
  assert sorted(a) == sorted(b), what
  for key in a:
    if key == "loop_history":
      ha, hb = json.loads(str(a[key])), json.loads(str(b[key]))
      assert len(ha) == len(hb), what
      for ra, rb in zip(ha, hb, strict=True):
        assert sorted(ra) == sorted(rb), what
        for k in ra:
          if ra[k] is None or rb[k] is None:  # NaN (e.g. a 1-run stderr)
            assert ra[k] is None and rb[k] is None, f"{what}: metric {k}"
            continue
          np.testing.assert_allclose(
            ra[k], rb[k], rtol=rtol, atol=atol, err_msg=f"{what}: metric {k}"
          )
    elif key == "rollout_actions":
      assert json.loads(str(a[key])) == json.loads(str(b[key])), what
    elif key not in ("process_count", "device_count", "env_batch_sizes"):
      np.testing.assert_allclose(
        a[key], b[key], rtol=rtol, atol=atol, err_msg=f"{what}: {key}"
      )


@pytest.mark.slow
def test_two_processes_agree_with_each_other_and_with_one_process(runs):
  p0, p1, single = runs
  assert int(p0["process_count"]) == 2 and int(p0["device_count"]) == 2
  assert int(single["process_count"]) == 1
  # Both processes hold the same (gathered) global results, bit for bit.
  _assert_results_match(p0, p1, 0, 0, "process 0 vs process 1")
  # Same global batches on one process: equal up to reduction order.
  _assert_results_match(p0, single, 1e-5, 1e-5, "2 processes vs 1")
  # Each process stepped only its own block of every rollout's games.
  np.testing.assert_array_equal(
    p0["env_batch_sizes"] + p1["env_batch_sizes"], single["env_batch_sizes"]
  )
  assert (p0["env_batch_sizes"] < single["env_batch_sizes"]).all()
  assert len(p0["rollout_tokens"]) > 100 and len(p0["judge_scores"]) > 10


@pytest.mark.slow
def test_learner_updates_really_moved_parameters(runs):
  """Guards the comparison above against a no-op update."""
  from flax import nnx

  from rla_jax.models import Qwen

  sys.path.insert(0, os.path.dirname(_WORKER))
  from multiprocess_worker import _learner_model

  init = {
    "learner/" + "/".join(map(str, path)): np.asarray(v.get_value())
    for path, v in nnx.to_flat_state(
      nnx.state(Qwen(_learner_model(), rngs=nnx.Rngs(0)))
    )
  }
  p0 = runs[0]
  moved = [k for k in init if np.abs(p0[k] - init[k]).max() > 1e-3]
  assert len(moved) == len(init), sorted(set(init) - set(moved))
  history = json.loads(str(p0["loop_history"]))
  assert len(history) == 2 and "train/rm_samples" in history[-1]
