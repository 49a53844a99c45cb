"""One process of the two-process resume test (test_multiprocess_resume.py).

  python tests/multiprocess_resume_worker.py MODEL_DIRS_JSON WORKDIR OUT_NPZ

Joins the jax.distributed run given by JAX_COORDINATOR_ADDRESS /
JAX_NUM_PROCESSES / JAX_PROCESS_ID (CPU, gloo collectives, one device per
process) and runs (or resumes, from the latest checkpoint in WORKDIR) the
coding loop of tests/test_resume_accepted_task.py (preset smoke, 4 train
tasks, 3 RL steps; shorter samples, one evaluation task) with the oracle
of tests/coding_oracle_run.py (a candidate proposed at step 0 is accepted
at step 1, and the policy trains on it), and a checkpoint after every
step (cooperative Orbax saves of the FSDP-sharded learners).
MODEL_DIRS_JSON holds the tokenizer, policy and reward dirs
(config.model.*_dir), built once by the test. Writes the metrics history
(without wall-clock fields) and the final parameters of both learners,
gathered to the host, to OUT_NPZ. The loop's log lines (e.g. "resumed
from checkpoint step 1") go to stdout.
"""

from __future__ import annotations

import json
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)

import jax
import numpy as np
from coding_oracle_run import install_oracle
from multiprocess_worker import _flat_params, _init_distributed

TOTAL_STEPS = 3
KILL_AFTER_STEP = 1  # the step that accepts and trains on the candidate


def closed_loop(model_dirs: dict, workdir: str) -> dict[str, np.ndarray]:
  """Runs or resumes the loop; its metrics history and final parameters."""
  from configs import coding
  from rla_jax.metrics.keys import is_wall_clock_key
  from rla_jax.rl.loops import make_loop

  c = coding.get_config("smoke")
  c.model.update(**model_dirs)
  c.total_steps = TOTAL_STEPS
  # 4 select-family tasks of levels 2-3: each has an easier variant.
  c.env.update(num_slots=4, num_tasks=4)
  c.checkpoint.every = 1
  # Smaller than the smoke preset where it does not matter (the oracle
  # decides the accuracies): shorter samples, no evaluation before step 0.
  c.rollout.max_new_tokens = 8
  c.reward.max_new_tokens = 8
  c.eval.update(at_start=False, num_tasks=1)
  loop = make_loop(c, workdir, log=lambda msg: print(msg, flush=True))
  history = loop.run()
  out = {}
  for role, learner in loop.learners.items():
    out.update(_flat_params(learner.state, f"{role}/"))
  keep = [
    {k: v for k, v in row.items() if not is_wall_clock_key(k)}
    for row in history
  ]
  out["loop_history"] = np.asarray(json.dumps(keep, sort_keys=True))
  return out


def main(model_dirs_json: str, workdir: str, out_path: str) -> None:
  from launch.cli import enable_compilation_cache

  _init_distributed()
  enable_compilation_cache()  # RLA_JAX_XLA_CACHE: later runs skip compiles
  install_oracle()
  with open(model_dirs_json) as f:
    model_dirs = json.load(f)
  out = closed_loop(model_dirs, workdir)
  out["process_count"] = np.asarray(jax.process_count())
  np.savez(out_path, **out)
  print(f"worker {jax.process_index()}: wrote {out_path}", flush=True)


if __name__ == "__main__":
  main(*sys.argv[1:4])
