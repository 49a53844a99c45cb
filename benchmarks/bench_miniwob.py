"""Throughput of the MiniWoB++ backend: resets/s and steps/s, N browsers.

For each N in --envs: start N headless Chromiums (timed), one warm-up
reset, then --resets batched resets (each slot a new seed of --task) and
--steps batched steps (a left click on the task's instruction banner, which
never ends a click-* episode, so every step is a full action + reward read
+ screenshot). Rates count environment transitions: N per batched call.
Prints the CPU model and the load average before and after (the machine is
shared; absolute numbers move with load).

Usage: python benchmarks/bench_miniwob.py [--envs 1,4] [--resets 20]
         [--steps 40] [--task click-button] [--scale 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from rla_jax.envs.gui.actions import GuiAction
from rla_jax.envs.gui.miniwob import MiniWobConfig, MiniWobEnvironment


def cpu_name() -> str:
  """The CPU model from /proc/cpuinfo and the visible core count."""
  name = "unknown CPU"
  try:
    with open("/proc/cpuinfo") as cpuinfo:
      for line in cpuinfo:
        if line.startswith("model name"):
          name = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  return f"{name}, {os.cpu_count()} cores visible"


def load_average() -> str:
  return " ".join(f"{value:.2f}" for value in os.getloadavg())


def measure(num_envs: int, args: argparse.Namespace) -> dict[str, float]:
  """Start-up seconds, resets/s and steps/s for ``num_envs`` browsers."""
  config = MiniWobConfig(num_envs=num_envs, screenshot_scale=args.scale)
  started = time.perf_counter()
  env = MiniWobEnvironment(config)
  startup = time.perf_counter() - started
  tasks = [args.task] * num_envs
  try:
    env.reset(tasks, list(range(num_envs)))
    started = time.perf_counter()
    for round_index in range(args.resets):
      seeds = [1000 + round_index * num_envs + i for i in range(num_envs)]
      env.reset(tasks, seeds)
    reset_seconds = time.perf_counter() - started
    height, width, _ = config.screenshot_shape
    banner = GuiAction("left_click", x=width - 8, y=8)
    started = time.perf_counter()
    for _ in range(args.steps):
      observations = env.step([banner] * num_envs)
      if any(observation.done for observation in observations):
        raise RuntimeError(
          "a banner click ended an episode; pick a click-* task"
        )
    step_seconds = time.perf_counter() - started
  finally:
    env.close()
  return {
    "startup_s": startup,
    "resets_per_s": num_envs * args.resets / reset_seconds,
    "steps_per_s": num_envs * args.steps / step_seconds,
    "reset_ms": 1000 * reset_seconds / args.resets,
    "step_ms": 1000 * step_seconds / args.steps,
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--envs", default="1,4")
  parser.add_argument("--resets", type=int, default=20)
  parser.add_argument("--steps", type=int, default=40)
  parser.add_argument("--task", default="click-button")
  parser.add_argument("--scale", type=int, default=2)
  args = parser.parse_args()
  print(f"cpu: {cpu_name()}")
  print(f"load average at start: {load_average()}")
  shape = MiniWobConfig(screenshot_scale=args.scale).screenshot_shape
  print(f"task {args.task}, screenshots {shape}")
  print(
    "| N | start-up s | resets/s | ms per batched reset | steps/s |"
    " ms per batched step |"
  )
  print("|---|---|---|---|---|---|")
  for num_envs in (int(n) for n in args.envs.split(",")):
    result = measure(num_envs, args)
    print(
      f"| {num_envs} | {result['startup_s']:.2f} | "
      f"{result['resets_per_s']:.1f} | {result['reset_ms']:.0f} | "
      f"{result['steps_per_s']:.1f} | {result['step_ms']:.0f} |",
      flush=True,
    )
  print(f"load average at end: {load_average()}")


if __name__ == "__main__":
  main()
