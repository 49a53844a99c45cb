"""ALFWorld policy rollout: padding buckets, and one sampler call per
prompt bucket.

Plays the default RL step's rollout (6 train tasks x 6 rollouts, 20 steps,
T=0.8, small rooms) with the warm-started default policy, with the
sampler's old bucket sets (powers of two: a turn of 36 agents and 430-token
prompts pads to 64 rows x 512 slots), with the geometric buckets
(`geometric_buckets`, 4 sizes per octave: 40 x 448), both in one call per
turn, and with the current default: geometric buckets and one call per
prompt bucket (`split_by_length`, rla_jax/sampling/length_groups.py).
Variants alternate in one process, after untimed warm-up rollouts with the
timed seeds (so every shape is compiled before timing), and the ratio is
measured against a baseline from the same run. The variants must produce
the same tokens (padding and grouping change no row).

  python benchmarks/bench_rollout.py [--warmstart DIR] [--repeats 2]
  # the default's evaluation turns (valid_seen games, 40 steps, T = 0.6)
  python benchmarks/bench_rollout.py --games valid_seen --tasks 96 \
      --rollouts 1 --max-steps 40 --temperature 0.6 --seed 1234 --levels 1,2

DIR is a built warm start (default: the one `--config=alfworld` loads,
its config.warmstart.dir).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax.numpy as jnp

from configs import alfworld
from rla_jax.envs.alfworld import generate_split
from rla_jax.models.hf_io import load_qwen
from rla_jax.rl import agent_text
from rla_jax.rl.alfworld_rollout import rollout_episodes
from rla_jax.sampling.buckets import power_of_two_buckets
from rla_jax.sampling.sampler import Sampler
from rla_jax.sampling.settings import SamplingParams
from rla_jax.tokenizer import load_tokenizer
from rla_jax.warmstart.settings import warm_start_dir


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument(
    "--warmstart", default=warm_start_dir(alfworld.get_config().warmstart.dir)
  )
  ap.add_argument("--repeats", type=int, default=2)
  ap.add_argument("--tasks", type=int, default=6)
  ap.add_argument("--rollouts", type=int, default=6)
  ap.add_argument("--max-steps", type=int, default=20)
  ap.add_argument("--games", default="train", help="generate_split split")
  ap.add_argument("--seed", type=int, default=0, help="the games' seed")
  ap.add_argument("--temperature", type=float, default=0.8)
  ap.add_argument("--levels", default="", help="e.g. 1,2 (the default's)")
  args = ap.parse_args()
  if not os.path.isdir(os.path.join(args.warmstart, "policy")):
    raise SystemExit(
      f"--warmstart {args.warmstart!r} has no policy/ dir: "
      "build it first (python launch/build_warmstart.py "
      "--config=alfworld --out=DIR)"
    )
  tok = load_tokenizer(os.path.join(args.warmstart, "tokenizer"))
  model = load_qwen(
    os.path.join(args.warmstart, "policy"),
    dtype=jnp.float32,
    param_dtype=jnp.float32,
  )
  max_prompt, max_new = 1024, 32
  variants = {
    "power_of_two": dict(
      prompt_buckets=power_of_two_buckets(16, max_prompt),
      batch_buckets=power_of_two_buckets(1, 4096),
      split_by_length=False,
    ),
    "geometric": dict(split_by_length=False),  # the default bucket sets
    "split_by_length": {},  # the Sampler's defaults
  }
  samplers = {
    k: Sampler(
      model,
      max_prompt_len=max_prompt,
      max_new_tokens=max_new,
      stop_token_ids=agent_text.end_of_turn_ids(tok),
      pad_id=tok.pad_token_id or 0,
      **v,
    )
    for k, v in variants.items()
  }
  levels = [int(v) for v in args.levels.split(",")] if args.levels else None
  games = generate_split(
    args.games, args.tasks, args.seed, room_size="small", levels=levels
  )
  games = [g for g in games for _ in range(args.rollouts)]
  ids = [str(i) for i in range(len(games))]
  params = SamplingParams(
    temperature=args.temperature, top_p=1.0, max_new_tokens=max_new
  )

  def play(name, seed):
    t0 = time.perf_counter()
    eps = rollout_episodes(
      games,
      ids,
      samplers[name],
      tok,
      backend="native",
      max_steps=args.max_steps,
      history_steps=2,
      seed=seed,
      params=params,
    )
    return time.perf_counter() - t0, eps

  times = {k: [] for k in variants}
  tokens = {}
  for name in variants:  # warm-up: the timed seeds, so every bucket compiles
    for r in range(args.repeats):
      play(name, r + 1)
  for r in range(args.repeats):
    for name in variants:
      dt, eps = play(name, r + 1)
      times[name].append(dt)
      tokens.setdefault(r, {})[name] = [e.response_ids for e in eps]
  for r, by_name in tokens.items():
    if any(v != by_name["power_of_two"] for v in by_name.values()):
      raise SystemExit(f"repeat {r}: the variants sampled different tokens")
  steps = sum(e.num_steps for e in eps)
  base = statistics.median(times["power_of_two"])
  print(
    f"{len(games)} agents, {steps} agent-steps, {args.max_steps} turns; "
    f"median of {args.repeats} rollouts (s):"
  )
  for name in variants:
    med = statistics.median(times[name])
    print(
      f"  {name:13s} {med:7.2f} s  ({base / med:.2f}x vs power_of_two)  "
      f"runs: {', '.join(f'{t:.2f}' for t in times[name])}"
    )


if __name__ == "__main__":
  main()
