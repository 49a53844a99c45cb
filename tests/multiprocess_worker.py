"""One process of the multi-process test (see tests/test_multiprocess.py).

  python tests/multiprocess_worker.py MODELS_DIR WORKDIR OUT_NPZ

With JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID set, the
process joins a jax.distributed run (CPU, gloo collectives, one device per
process); without them it is the single-process reference. It runs

  1. `Learner.update` x3 on a fixed, seeded set of samples (a 2-way FSDP
     mesh when there are 2 processes), then `Sampler.generate` from the
     trained parameters;
  2. two RL steps of the ALFWorld closed loop (preset "smoke", tiny models
     from MODELS_DIR) through `make_loop(config, workdir).run()`, recording
     every rollout's sampled tokens, log-probs and actions and every judge
     score,

and writes every result, gathered to the host, to OUT_NPZ.
"""

from __future__ import annotations

import json
import os
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)

import jax
import numpy as np

from rla_jax.metrics.keys import is_wall_clock_key


def _init_distributed() -> None:
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  if "JAX_COORDINATOR_ADDRESS" in os.environ:
    jax.distributed.initialize(
      coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
      num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
      process_id=int(os.environ["JAX_PROCESS_ID"]),
      initialization_timeout=90,
      heartbeat_timeout_seconds=30,
    )


def _learner_model():
  from rla_jax.models import QwenConfig

  return QwenConfig(
    "qwen3",
    vocab_size=211,
    hidden_size=64,
    intermediate_size=128,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
  )


def _flat_params(state, prefix: str) -> dict[str, np.ndarray]:
  from flax import nnx

  from rla_jax import distributed

  out = {}
  for path, value in nnx.to_flat_state(state):
    arr = value.get_value() if hasattr(value, "get_value") else value
    out[prefix + "/".join(map(str, path))] = distributed.to_host(arr)
  return out


def learner_updates() -> dict[str, np.ndarray]:
  """Three optimizer steps on fixed, seeded samples (really moves weights),
  then a sampled batch from the trained parameters."""
  from flax import nnx

  from rla_jax import sharding as shd
  from rla_jax.models import Qwen
  from rla_jax.rl.samples import Sample
  from rla_jax.rl.trainer import Learner, OptimConfig
  from rla_jax.sampling.sampler import Sampler

  rng = np.random.RandomState(0)
  samples = []
  for i in range(24):
    prompt = list(map(int, rng.randint(3, 211, size=3 + i % 17)))
    n = 4 + i % 5
    samples.append(
      Sample(
        prompt,
        list(map(int, rng.randint(3, 211, size=n))),
        -rng.uniform(0.5, 5.0, size=n).astype(np.float32),
        float(rng.randn()),
      )
    )
  mesh = shd.make_mesh(1, -1, 1)
  learner = Learner(
    Qwen(_learner_model(), rngs=nnx.Rngs(0)),
    OptimConfig(
      learning_rate=1e-3, eps=1e-5, micro_batch_size=4, max_seq_len=64
    ),
    mesh=mesh,
  )
  # 3 updates of 8 samples: 2 micro-batches of 4 rows, accumulated
  metrics = [learner.update(samples[i::3]) for i in range(3)]
  out = _flat_params(learner.state, "learner/")
  out["learner_metrics"] = np.asarray(
    [[m[k] for k in ("loss", "grad_norm", "num_samples")] for m in metrics]
  )
  # Sampling from the trained, cross-process parameters (resharded to the
  # sampling rules), with temperature and top-p.
  sampler = Sampler(
    learner.model(),
    max_prompt_len=32,
    max_new_tokens=6,
    stop_token_ids=[7],
    mesh=mesh,
  )
  gen = sampler.generate(
    [s.prompt for s in samples[:5]], seed=3, temperature=1.0, top_p=0.9
  )
  out["sample_tokens"] = np.asarray(
    [t + [-1] * (6 - len(t)) for t in gen.tokens]
  )
  out["sample_logprobs"] = np.concatenate(gen.logprobs)
  return out


def _record_rollouts() -> dict:
  """Wraps the rollout module's entry points to record what they return.

  The real functions run unchanged; the wrappers only copy out the global
  episodes (tokens, log-probs, actions), the judge scores and the batch size
  of every environment this process created.
  """
  from rla_jax.rl import alfworld_loop, alfworld_rollout

  rec = {
    "env_batch_sizes": [],
    "tokens": [],
    "logprobs": [],
    "actions": [],
    "scores": [],
  }
  make_env, rollout, judge = (
    alfworld_rollout.make_env,
    alfworld_loop.rollout_episodes,
    alfworld_loop.judge_episodes,
  )

  def recording_make_env(backend, batch_size, **kw):
    rec["env_batch_sizes"].append(batch_size)
    return make_env(backend, batch_size, **kw)

  def recording_rollout(*args, **kw):
    episodes = rollout(*args, **kw)
    for e in episodes:
      rec["actions"].append(e.actions)
      for toks, lps in zip(e.response_ids, e.logprobs, strict=True):
        rec["tokens"] += list(toks) + [-1]
        rec["logprobs"] += list(lps) + [0.0]
    return episodes

  def recording_judge(*args, **kw):
    judged = judge(*args, **kw)
    rec["scores"].append(judged.scores.ravel())
    return judged

  alfworld_rollout.make_env = recording_make_env
  alfworld_loop.rollout_episodes = recording_rollout
  alfworld_loop.judge_episodes = recording_judge
  return rec


def closed_loop(models: str, workdir: str) -> dict[str, np.ndarray]:
  """Two RL steps of the ALFWorld loop; parameters and metrics history."""
  from configs import alfworld
  from rla_jax.rl.loops import make_loop

  c = alfworld.get_config("smoke")
  c.model.update(
    tokenizer_dir=os.path.join(models, "tok"),
    policy_dir=os.path.join(models, "policy"),
    reward_dir=os.path.join(models, "reward"),
  )
  c.rollout.update(max_prompt_len=1024, max_new_tokens=8)
  c.reward.update(max_new_tokens=8, m=2, judge_batch=8)
  c.env.update(max_steps=3, history_steps=0, rollouts_per_task=2)
  c.eval.update(at_start=False, num_games=3, num_rm_episodes=2, max_steps=2)
  c.checkpoint.every = 2  # one cooperative Orbax save, at the last step
  recorded = _record_rollouts()
  loop = make_loop(c, workdir, log=lambda msg: None)
  history = loop.run()
  out = {
    "env_batch_sizes": np.asarray(recorded["env_batch_sizes"]),
    "rollout_tokens": np.asarray(recorded["tokens"], np.int64),
    "rollout_logprobs": np.asarray(recorded["logprobs"], np.float64),
    "rollout_actions": np.asarray(json.dumps(recorded["actions"])),
    "judge_scores": np.concatenate(recorded["scores"] or [[]]),
  }
  for role, learner in loop.learners.items():
    out.update(_flat_params(learner.state, f"loop/{role}/"))
  keep = [
    {k: v for k, v in row.items() if not is_wall_clock_key(k)}
    for row in history
  ]
  out["loop_history"] = np.asarray(json.dumps(keep, sort_keys=True))
  return out


def main(models: str, workdir: str, out_path: str) -> None:
  t0 = time.perf_counter()
  _init_distributed()
  out = learner_updates()
  print(f"learner updates: {time.perf_counter() - t0:.1f} s", flush=True)
  out.update(closed_loop(models, workdir))
  print(f"closed loop done: {time.perf_counter() - t0:.1f} s", flush=True)
  out["process_count"] = np.asarray(jax.process_count())
  out["device_count"] = np.asarray(jax.device_count())
  np.savez(out_path, **out)
  print(f"worker {jax.process_index()}: wrote {out_path}", flush=True)


if __name__ == "__main__":
  main(*sys.argv[1:4])
