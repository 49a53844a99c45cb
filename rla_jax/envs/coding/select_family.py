"""The "select" coding-task family: filter-and-aggregate problems over a list
of integers, composed from an aggregate and 0-3 predicates.

A statement reads "print the sum of the integers that are even and greater
than k" (aggregates: sum, count, largest, smallest; predicates: even, odd,
positive, negative, greater than k, less than k, divisible by k, not
divisible by k). The level is 1 + the number of predicates, so a harder
variant adds a predicate to the same problem and an easier one drops one:
the rule-based environment model moves a task along an axis a small coder
can learn. 4 + 32 + 92 + 112 = 240 distinct statements (level 1-4; pairs
that contradict, such as even and odd, are left out).

Every task is determined by its family spec {kind: "select", agg, preds,
size, seed}: the statement comes from agg and preds, the tests from a
reference solver applied to seeded inputs (small integers; one test has no
qualifying integer, so "print 0" matters). `reference_program` writes a
program that solves a task, in one of several styles (comprehension, loop,
generator; two input readers), which is what the warm start imitates.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Sequence

from rla_jax.envs.coding.tasks import DEFAULT_TIME_LIMIT_S, Task

KIND = "select"
LEVELS = (1, 2, 3, 4)
MAX_SIZE = 4
TESTS_PER_TASK = 6

AGGREGATES = ("sum", "count", "max", "min")
PREDICATES = {  # name: (statement phrase, python condition on x and k)
  "even": ("even", "x % 2 == 0"),
  "odd": ("odd", "x % 2 == 1"),
  "positive": ("positive", "x > 0"),
  "negative": ("negative", "x < 0"),
  "gt": ("greater than k", "x > k"),
  "lt": ("less than k", "x < k"),
  "div": ("divisible by k", "x % k == 0"),
  "ndiv": ("not divisible by k", "x % k != 0"),
}
_TESTS = {  # the same conditions as functions, for the solver
  "even": lambda x, k: x % 2 == 0,
  "odd": lambda x, k: x % 2 == 1,
  "positive": lambda x, k: x > 0,
  "negative": lambda x, k: x < 0,
  "gt": lambda x, k: x > k,
  "lt": lambda x, k: x < k,
  "div": lambda x, k: x % k == 0,
  "ndiv": lambda x, k: x % k != 0,
}
# Pairs no integer satisfies (k is drawn from 2-5, so "greater than k"
# excludes negatives; nothing is both greater and less than k).
_CONTRADICTIONS = (
  {"even", "odd"},
  {"positive", "negative"},
  {"div", "ndiv"},
  {"negative", "gt"},
  {"gt", "lt"},
)


def _compatible(preds: Sequence[str]) -> bool:
  return not any(c <= set(preds) for c in _CONTRADICTIONS)


def predicate_sets(level: int) -> list[tuple[str, ...]]:
  """Every predicate tuple of a level (level - 1 predicates, in PREDICATES
  order, no contradicting pair)."""
  if level not in LEVELS:
    raise ValueError(f"select family: level must be in {LEVELS}, got {level}")
  return [
    p for p in itertools.combinations(PREDICATES, level - 1) if _compatible(p)
  ]


def statement(agg: str, preds: Sequence[str]) -> str:
  """The problem statement of (agg, preds)."""
  cond = " and ".join(PREDICATES[p][0] for p in preds)
  what = {
    "sum": "the sum of the integers",
    "count": "how many of the integers",
    "max": "the largest of the integers",
    "min": "the smallest of the integers",
  }[agg]
  if preds:
    verb = "are" if agg == "count" else "that are"
    what = f"{what} {verb} {cond}"
  return (
    f"Given n integers and an integer k, print {what}. If no integer "
    "qualifies, print 0.\nInput: first line n and k; second line the n "
    "integers.\nOutput: one integer."
  )


def _condition(preds: Sequence[str]) -> str:
  return " and ".join(PREDICATES[p][1] for p in preds) or "True"


def solve(agg: str, preds: Sequence[str], stdin: str) -> str:
  """The expected output of (agg, preds) on stdin."""
  lines = stdin.split("\n")
  _, k = map(int, lines[0].split())
  a = list(map(int, lines[1].split()))
  b = [x for x in a if all(_TESTS[p](x, k) for p in preds)]
  if agg == "sum":
    return str(sum(b))
  if agg == "count":
    return str(len(b))
  if not b:
    return "0"
  return str(max(b) if agg == "max" else min(b))


def _input(rng: random.Random, n: int, k: int) -> str:
  values = " ".join(str(rng.randint(-9, 9)) for _ in range(n))
  return f"{n} {k}\n{values}\n"


def _tests(agg, preds, size, rng) -> tuple[tuple[str, str], ...]:
  """TESTS_PER_TASK tests: n grows with the test index and size; test 0
  is redrawn until no integer qualifies (where possible), test 1 (the
  statement's example) until some does."""
  tests = []
  for t in range(TESTS_PER_TASK):
    n = min(2 + t + size, 3 * size + 3)
    for _ in range(50):
      stdin = _input(rng, n, rng.randint(2, 5))
      none = solve("count", preds, stdin) == "0"
      if (t == 0) == none or t > 1:
        break
    tests.append((stdin, solve(agg, preds, stdin) + "\n"))
  return tuple(tests)


def _spec(agg: str, preds: Sequence[str], size: int, seed: int) -> dict:
  if agg not in AGGREGATES:
    raise ValueError(f"select family: unknown aggregate {agg!r}")
  unknown = [p for p in preds if p not in PREDICATES]
  if unknown or not _compatible(preds) or len(set(preds)) != len(preds):
    raise ValueError(f"select family: bad predicates {list(preds)!r}")
  if len(preds) + 1 not in LEVELS:
    raise ValueError(f"select family: at most 3 predicates, got {preds!r}")
  if not 1 <= size <= MAX_SIZE:
    raise ValueError(f"select family: size must be in [1, {MAX_SIZE}]")
  order = list(PREDICATES)
  return {
    "kind": KIND,
    "agg": agg,
    "preds": sorted(preds, key=order.index),
    "level": len(preds) + 1,
    "size": int(size),
    "seed": int(seed),
  }


def build_select_task(
  agg: str,
  preds: Sequence[str],
  size: int,
  seed: int,
  root_id: str = "",
  parent_id: str | None = None,
) -> Task:
  """The task of a family spec; identical arguments give an identical
  Task."""
  spec = _spec(agg, preds, size, seed)
  preds = spec["preds"]
  rng = random.Random(f"select/{agg}/{','.join(preds)}/{size}/{seed}")
  tests = _tests(agg, preds, size, rng)
  example_in, example_out = tests[1]
  question = (
    f"{statement(agg, preds)}\n\nExample input:\n{example_in}"
    f"Example output:\n{example_out}"
  )
  name = "-".join([agg, *preds])
  task_id = f"sel-{name}-s{size}-{seed:08x}"
  return Task(
    task_id=task_id,
    question=question,
    tests=tests,
    time_limit_s=DEFAULT_TIME_LIMIT_S,
    difficulty=float(spec["level"]) + (size - 1) / MAX_SIZE,
    root_id=root_id or task_id,
    parent_id=parent_id,
    family_spec=json.dumps(spec, sort_keys=True),
  )


def generate_select_tasks(
  num_tasks: int, seed: int, levels: Sequence[int] = (2, 3)
) -> list[Task]:
  """`num_tasks` distinct tasks, levels alternating, the aggregate and
  predicates drawn uniformly within the level; fully determined by seed."""
  if num_tasks < 0:
    raise ValueError(f"num_tasks must be >= 0, got {num_tasks}")
  sets = {level: predicate_sets(level) for level in levels}
  rng = random.Random(seed)
  tasks, seen = [], set()
  while len(tasks) < num_tasks:
    level = levels[len(tasks) % len(levels)]
    task = build_select_task(
      rng.choice(AGGREGATES),
      rng.choice(sets[level]),
      1,
      rng.getrandbits(32),
    )
    if task.task_id not in seen:
      seen.add(task.task_id)
      tasks.append(task)
  return tasks


def select_train_eval_split(
  num_train: int, num_eval: int, seed: int, levels: Sequence[int] = (2, 3)
) -> tuple[list[Task], list[Task]]:
  """Disjoint train / evaluation tasks from separate seed streams (no shared
  task id or test list). Statements repeat across the split (there are few
  of them); the tests do not."""
  train = generate_select_tasks(num_train, seed, levels)
  seen = {t.task_id for t in train} | {t.tests for t in train}
  pool = generate_select_tasks(num_eval + num_train, seed + 1_000_003, levels)
  evals = [t for t in pool if t.task_id not in seen and t.tests not in seen]
  return train, evals[:num_eval]


def propose_select_variant(
  task: Task, direction: str, rng: random.Random
) -> Task | None:
  """harder: one more predicate (drawn from the compatible ones); easier:
  one predicate fewer (drawn); at the ends, size + 1 / - 1; None past them.
  A fresh seed gives new tests; root_id is kept, parent_id = task."""
  spec = json.loads(task.family_spec)
  preds, size = list(spec["preds"]), spec["size"]
  if direction == "harder":
    extra = [
      p for p in PREDICATES if p not in preds and _compatible([*preds, p])
    ]
    if len(preds) < len(LEVELS) - 1 and extra:
      preds.append(rng.choice(extra))
    elif size < MAX_SIZE:
      size += 1
    else:
      return None
  elif preds:
    preds.remove(rng.choice(preds))
  elif size > 1:
    size -= 1
  else:
    return None
  return build_select_task(
    spec["agg"],
    preds,
    size,
    rng.getrandbits(32),
    root_id=task.root_id,
    parent_id=task.task_id,
  )


_READERS = (
  "n, k = map(int, input().split())\na = list(map(int, input().split()))\n",
  "n, k = [int(t) for t in input().split()]\na = [int(t) for t in "
  "input().split()]\n",
)


def _comprehension(agg: str, cond: str) -> str:
  out = {
    "sum": "sum(b)",
    "count": "len(b)",
    "max": "max(b) if b else 0",
    "min": "min(b) if b else 0",
  }[agg]
  return f"b = [x for x in a if {cond}]\nprint({out})\n"


def _loop(agg: str, cond: str) -> str:
  if agg in ("sum", "count"):
    add = "x" if agg == "sum" else "1"
    return f"s = 0\nfor x in a:\n    if {cond}:\n        s += {add}\nprint(s)\n"
  better = ">" if agg == "max" else "<"
  return (
    f"best = None\nfor x in a:\n    if {cond} and (best is None or x "
    f"{better} best):\n        best = x\nprint(0 if best is None else best)\n"
  )


def _generator(agg: str, cond: str) -> str:
  if agg == "sum":
    return f"print(sum(x for x in a if {cond}))\n"
  if agg == "count":
    return f"print(sum(1 for x in a if {cond}))\n"
  return f"print({agg}((x for x in a if {cond}), default=0))\n"


STYLES = (_comprehension, _loop, _generator)


def reference_program(task: Task, style: int = 0) -> str | None:
  """A python stdin/stdout program solving a select-family task (None for
  any other task): input reader style // 3 % 2, body style % 3."""
  if not task.family_spec:
    return None
  spec = json.loads(task.family_spec)
  if spec.get("kind") != KIND:
    return None
  cond = _condition(spec["preds"])
  body = STYLES[style % len(STYLES)](spec["agg"], cond)
  return _READERS[style // len(STYLES) % len(_READERS)] + body


NUM_STYLES = len(STYLES) * len(_READERS)
