"""Native vs TextWorld ALFWorld engine speed on the same generated games.

Usage: python benchmarks/bench_alfworld_engine.py [--room-size full|small]
         [--games N] [--steps S]

Both engines replay the *same* command sequences (random admissible commands,
seeded, one episode of up to S steps per game; sequences are drawn with the
native engine, which the parity test shows to behave identically). Reported:
reset time per game and per-step time (median over all steps) for each engine,
and the step-time ratio measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

os.environ.setdefault(
  "ALFWORLD_DATA", tempfile.mkdtemp(prefix="rla_alfworld_bench_")
)

from rla_jax.envs.alfworld import generate_split, make_env


def command_sequences(games, steps: int, seed: int) -> list[list[str]]:
  rng, env, seqs = random.Random(seed), make_env("native", 1), []
  for g in games:
    _, infos = env.reset([g])
    seq = []
    for _ in range(steps):
      if env.done[0]:
        break
      cmd = rng.choice(infos["admissible_commands"][0])
      _, _, _, infos = env.step([cmd])
      seq.append(cmd)
    seqs.append(seq)
  return seqs


def time_backend(
  backend: str, games, seqs, repeats: int
) -> tuple[list[float], list[float]]:
  env = make_env(backend, 1)
  resets, steps = [], []
  for _ in range(repeats):
    for g, seq in zip(games, seqs, strict=True):
      t0 = time.perf_counter()
      env.reset([g])
      resets.append(time.perf_counter() - t0)
      for cmd in seq:
        t0 = time.perf_counter()
        env.step([cmd])
        steps.append(time.perf_counter() - t0)
  return resets, steps


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--room-size", default="full", choices=["full", "small"])
  ap.add_argument("--games", type=int, default=6)
  ap.add_argument("--steps", type=int, default=30)
  ap.add_argument("--native-repeats", type=int, default=20)
  args = ap.parse_args()
  games = generate_split(
    "valid_seen", args.games, seed=0, room_size=args.room_size
  )
  seqs = command_sequences(games, args.steps, seed=0)
  n_recs = statistics.mean(len(g.receptacles) for g in games)
  n_objs = statistics.mean(len(g.objects) for g in games)
  print(
    f"games={len(games)} room_size={args.room_size} mean "
    f"receptacles={n_recs:.1f} objects={n_objs:.1f} "
    f"steps/game<= {args.steps}"
  )
  res = {}
  for backend, reps in (("native", args.native_repeats), ("textworld", 1)):
    resets, steps = time_backend(backend, games, seqs, reps)
    res[backend] = statistics.median(steps)
    print(
      f"{backend:9s}: reset median {statistics.median(resets) * 1e3:9.2f} ms | "
      f"step median {statistics.median(steps) * 1e3:9.3f} ms | "
      f"{1.0 / statistics.median(steps):10.1f} steps/s "
      f"| {len(steps)} steps timed"
    )
  print(
    "native speed-up per step (median/median): "
    f"{res['textworld'] / res['native']:.0f}x"
  )


if __name__ == "__main__":
  main()
