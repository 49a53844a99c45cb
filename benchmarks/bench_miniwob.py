"""Throughput of the MiniWoB++ backend: resets/s and steps/s, N browsers.

For each N in --envs: start N headless Chromiums (timed), one warm-up
reset, then --resets batched resets (each slot a new seed of --task) and
--steps batched steps (a left click on the task's instruction banner, which
never ends a click-* episode, so every step is a full action + reward read
+ screenshot). Rates count environment transitions: N per batched call.
Prints the CPU model and the load average before and after (the machine is
shared; absolute numbers move with load).

With --guard-startups K, it also times K start-ups and closes of N
browsers with chromedriver under its guard (`rla_jax.envs.gui.driver_guard`,
as the product runs it) and K with chromedriver started directly (the
baseline), alternating, and prints the medians and their ratio.

Usage: python benchmarks/bench_miniwob.py [--envs 1,4] [--resets 20]
         [--steps 40] [--task click-button] [--scale 2] [--guard-startups 0]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from unittest import mock

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from rla_jax.envs.gui import chromium
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


def startup_and_close_seconds(num_envs: int, scale: int, guarded: bool):
  """(start-up, close) seconds of ``num_envs`` browsers; guarded=False
  hands selenium the chromedriver itself (the baseline without the
  guard)."""
  patch = (
    contextlib.nullcontext()
    if guarded
    else mock.patch.object(chromium, "guarded_chromedriver", str)
  )
  with patch:
    started = time.perf_counter()
    env = MiniWobEnvironment(
      MiniWobConfig(num_envs=num_envs, screenshot_scale=scale)
    )
    startup = time.perf_counter() - started
    started = time.perf_counter()
    env.close()
    return startup, time.perf_counter() - started


def compare_guard(num_envs: int, args: argparse.Namespace) -> None:
  """Prints the medians of --guard-startups guarded and plain start-ups
  and closes of num_envs browsers, alternating, and the ratios."""
  times = {True: [], False: []}
  for _ in range(args.guard_startups):
    for guarded in (False, True):
      times[guarded].append(
        startup_and_close_seconds(num_envs, args.scale, guarded)
      )
  med = {
    g: [statistics.median(t[i] for t in times[g]) for i in (0, 1)]
    for g in times
  }
  print(
    f"| {num_envs} | {med[False][0]:.3f} | {med[True][0]:.3f} | "
    f"{med[True][0] / med[False][0]:.2f} | {med[False][1]:.3f} | "
    f"{med[True][1]:.3f} |",
    flush=True,
  )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--envs", default="1,4")
  parser.add_argument("--resets", type=int, default=20)
  parser.add_argument("--steps", type=int, default=40)
  parser.add_argument("--task", default="click-button")
  parser.add_argument("--scale", type=int, default=2)
  parser.add_argument("--guard-startups", type=int, default=0)
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
  if args.guard_startups:
    print(
      f"\nstart-up and close, median of {args.guard_startups} each "
      "(alternating): chromedriver directly vs under its guard"
    )
    print(
      "| N | start-up s, plain | start-up s, guarded | ratio |"
      " close s, plain | close s, guarded |"
    )
    print("|---|---|---|---|---|---|")
    for num_envs in (int(n) for n in args.envs.split(",")):
      compare_guard(num_envs, args)
  print(f"load average at end: {load_average()}")


if __name__ == "__main__":
  main()
