"""Throughput of the coding sandbox: (program, test) executions per second.

Workload: offline-family tasks (digits L1/L2, array L1-L3, strings L1/L2) with P
distinct programs per task (correct solutions and wrong ones, each made distinct
by a comment, like policy samples) run on all of the task's T tests.
Configurations, measured in the same run after one warm-up:
  one_at_a_time  : 1 worker, 1 test per launcher (a fresh sandbox per
                   (program, test), sequential)
  batched_serial : 1 worker, all tests of a program in one launcher (fresh fork
                   per test)
  pool_unbatched : N workers, 1 test per launcher
  pool           : N workers, all tests of a program in one launcher (the
                   default)

Usage: python benchmarks/bench_executor.py [--tasks 6] [--programs 16]
         [--workers N] [--no-namespaces]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from rla_jax.envs.coding.offline_family import build_task
from rla_jax.envs.coding.sandbox import SandboxExecutor, SandboxLimits

SOLUTIONS = {
  ("digits", 1): (
    "print(sum(map(int, input().strip())))",
    "print(len(input().strip()))",
  ),
  ("digits", 2): (
    "n, b = map(int, input().split())\ns = 0\nwhile n:\n    s += n % b\n"
    "    n //= b\nprint(s)",
    "n, b = map(int, input().split())\nprint(sum(map(int, str(n))))",
  ),
  ("array", 1): (
    "n, k = map(int, input().split())\nprint(sum(x for x in map(int, "
    "input().split()) if x % k == 0))",
    "n, k = map(int, input().split())\nprint(sum(map(int, input().split())))",
  ),
  ("array", 3): (
    "input()\nbest = None; s = 0\nfor x in map(int, input().split()):\n"
    "    s = max(s + x, x)\n"
    "    best = s if best is None else max(best, s)\nprint(best)",
    "input()\nprint(max(map(int, input().split())))",
  ),
  ("strings", 1): (
    "print(' '.join(w[::-1] for w in input().split()))",
    "print(input()[::-1])",
  ),
  ("strings", 2): (
    "import itertools\nprint(''.join(c + str(len(list(g))) for c, g in "
    "itertools.groupby(input().strip())))",
    "print(input().strip())",
  ),
}


def workload(n_tasks: int, n_programs: int):
  keys = list(SOLUTIONS)
  batches = []
  for i in range(n_tasks):
    kind, level = keys[i % len(keys)]
    task = build_task(kind, level, 1, seed=1000 + i)
    good, bad = SOLUTIONS[(kind, level)]
    programs = [
      f"# sample {j}\n" + (good if j % 2 == 0 else bad) + "\n"
      for j in range(n_programs)
    ]
    batches.append((programs, task.tests, task.time_limit_s))
  return batches


def measure(
  batches, workers: int, tests_per_process: int, use_namespaces: bool
) -> dict:
  limits = SandboxLimits(
    tests_per_process=tests_per_process, use_namespaces=use_namespaces
  )
  with SandboxExecutor(max_workers=workers, limits=limits) as ex:
    ex.run(
      batches[0][0][:2], batches[0][1][:2], 2.0
    )  # warm-up (page cache, uid locks)
    n_exec, passed = 0, 0
    start = time.perf_counter()
    for programs, tests, limit in batches:
      res = ex.run(programs, tests, limit)
      n_exec += res.passed.size
      passed += int(res.passed.sum())
    elapsed = time.perf_counter() - start
    isolation = ex.last_isolation
  return {
    "workers": workers,
    "tests_per_process": tests_per_process,
    "executions": n_exec,
    "passed": passed,
    "seconds": round(elapsed, 3),
    "executions_per_s": round(n_exec / elapsed, 1),
    "isolation": isolation,
  }


def main():
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("--tasks", type=int, default=6)
  parser.add_argument("--programs", type=int, default=16)
  parser.add_argument("--workers", type=int, default=os.cpu_count())
  parser.add_argument("--no-namespaces", action="store_true")
  args = parser.parse_args()
  batches = workload(args.tasks, args.programs)
  ns = not args.no_namespaces
  configs = {
    "one_at_a_time": (1, 1),
    "batched_serial": (1, 16),
    "pool_unbatched": (args.workers, 1),
    "pool": (args.workers, 16),
  }
  results = {
    name: measure(batches, w, tpp, ns) for name, (w, tpp) in configs.items()
  }
  base = results["one_at_a_time"]["executions_per_s"]
  for name, r in results.items():
    r["speedup_vs_one_at_a_time"] = round(r["executions_per_s"] / base, 2)
    print(
      f"{name:15s} workers={r['workers']:2d} "
      f"tests/launcher={r['tests_per_process']:2d} "
      f"{r['executions']} execs in {r['seconds']:.2f} s = "
      f"{r['executions_per_s']:.1f}/s "
      f"(x{r['speedup_vs_one_at_a_time']:.2f})"
    )
  assert len({r["passed"] for r in results.values()}) == 1, (
    "configurations disagree on results"
  )
  print(
    json.dumps(
      {"cpu_count": os.cpu_count(), "isolation": results["pool"]["isolation"]}
    )
  )


if __name__ == "__main__":
  main()
