"""Offline, seeded coding-task family: integer, array and string problems in 4
difficulty levels.

Lets the coding configuration run on a fresh machine without downloads. Every
task is fully determined by its family spec {kind, level, size, seed}: the
statement comes from the (kind, level) template, the tests from a reference
solver applied to seeded inputs. Level 4 problems have inputs large enough that
the naive quadratic / brute-force solution of level 3 is too slow, so levels
differ in algorithmic difficulty, not only in wording.

``propose_variant`` is the rule-based environment proposer: harder = next level
(or larger inputs at the top level), easier = previous level (or smaller inputs
at level 1).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence

from rla_jax.envs.coding import select_family
from rla_jax.envs.coding.tasks import DEFAULT_TIME_LIMIT_S, Task

LEVELS = (1, 2, 3, 4)
KINDS = ("digits", "array", "strings")
TESTS_PER_TASK = 6
MAX_SIZE = 4

# -- reference solvers ---------------------------------------------------------


def _digit_sum(n: int, base: int = 10) -> int:
  s = 0
  while n:
    n, r = divmod(n, base)
    s += r
  return s


def _count_digit_sum_divisible(n: int, k: int) -> int:
  """#{x in [1, n] : digit_sum(x) % k == 0} by digit DP over (position, sum mod
  k, tight)."""
  digits = list(map(int, str(n)))
  counts = {
    (0, True): 1
  }  # (sum mod k, still equal to n's prefix) -> count of prefixes
  for d in digits:
    nxt: dict[tuple[int, bool], int] = {}
    for (m, tight), c in counts.items():
      for x in range(0, (d if tight else 9) + 1):
        key = ((m + x) % k, tight and x == d)
        nxt[key] = nxt.get(key, 0) + c
    counts = nxt
  total = sum(c for (m, _), c in counts.items() if m == 0)
  return total - 1  # drop x = 0


def _longest_increasing_run(a: list[int]) -> int:
  best = cur = 1
  # Neighbour pairs: a[1:] is one shorter, so zip stops at the last pair.
  for x, y in zip(a, a[1:], strict=False):
    cur = cur + 1 if y > x else 1
    best = max(best, cur)
  return best


def _max_subarray(a: list[int]) -> int:
  best, cur = a[0], 0
  for x in a:
    cur = max(x, cur + x)
    best = max(best, cur)
  return best


def _pairs_sum_divisible(a: list[int], k: int) -> int:
  counts = [0] * k
  for x in a:
    counts[x % k] += 1
  total = counts[0] * (counts[0] - 1) // 2
  for r in range(1, k // 2 + 1):
    total += (
      counts[r] * (counts[r] - 1) // 2
      if 2 * r == k
      else counts[r] * counts[k - r]
    )
  return total


def _run_length(s: str) -> str:
  out, i = [], 0
  while i < len(s):
    j = i
    while j < len(s) and s[j] == s[i]:
      j += 1
    out.append(f"{s[i]}{j - i}")
    i = j
  return "".join(out)


def _longest_palindrome(s: str) -> int:
  best = 1 if s else 0
  for c in range(len(s)):
    for lo, hi in ((c, c), (c, c + 1)):
      while lo >= 0 and hi < len(s) and s[lo] == s[hi]:
        lo, hi = lo - 1, hi + 1
      best = max(best, hi - lo - 1)
  return best


# -- problem templates ---------------------------------------------------------
# (statement, input generator(rng, size, t), solver(input) -> output)


def _ints(line: str) -> list[int]:
  return list(map(int, line.split()))


def _array_input(
  rng: random.Random, n: int, lo: int, hi: int, k: int | None = None
) -> str:
  head = f"{n}" if k is None else f"{n} {k}"
  return (
    head + "\n" + " ".join(str(rng.randint(lo, hi)) for _ in range(n)) + "\n"
  )


def _word_line(rng: random.Random, words: int, alphabet: str = "abcde") -> str:
  return (
    " ".join(
      "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
      for _ in range(words)
    )
    + "\n"
  )


def _runs(rng: random.Random, length: int, alphabet: str) -> str:
  out = []
  while len(out) < length:
    out.extend(rng.choice(alphabet) * rng.randint(1, 5))
  return "".join(out[:length]) + "\n"


Template = tuple[
  str, Callable[[random.Random, int, int], str], Callable[[str], str]
]

TEMPLATES: dict[tuple[str, int], Template] = {
  ("digits", 1): (
    "Given a non-negative integer n (0 <= n <= 10^18), print the sum of its "
    "decimal digits.\nInput: one line with n.\nOutput: one integer.",
    lambda r, size, t: (
      f"{[0, 9][t] if t < 2 else r.randint(0, 10 ** (4 * size + 2 * t))}\n"
    ),
    lambda s: str(_digit_sum(int(s))),
  ),
  ("digits", 2): (
    "Given integers n and b (0 <= n <= 10^18, 2 <= b <= 9), write n in base b "
    "and print the sum of its digits.\nInput: one line with n and b.\nOutput: "
    "one integer.",
    lambda r, size, t: (
      f"{r.randint(0, 10 ** (4 * size + 2 * t))} "
      f"{2 if t == 0 else r.randint(2, 9)}\n"
    ),
    lambda s: str(_digit_sum(_ints(s)[0], _ints(s)[1])),
  ),
  ("digits", 3): (
    "Given integers n and k (1 <= n <= 200000, 1 <= k <= 30), count the "
    "integers x with 1 <= x <= n whose decimal digit sum is divisible by k.\n"
    "Input: one line with n and k.\nOutput: one integer.",
    lambda r, size, t: (
      f"{r.randint(1, 1000 * size * (t + 1) ** 2)} {r.randint(1, 12)}\n"
    ),
    lambda s: str(_count_digit_sum_divisible(*_ints(s))),
  ),
  ("digits", 4): (
    "Given integers n and k (1 <= n <= 10^15, 1 <= k <= 60), count the "
    "integers x with 1 <= x <= n whose decimal digit sum is divisible by k.\n"
    "Input: one line with n and k.\nOutput: one integer.",
    lambda r, size, t: (
      f"{r.randint(1, 10 ** min(15, 3 + 2 * t + size))} {r.randint(2, 40)}\n"
    ),
    lambda s: str(_count_digit_sum_divisible(*_ints(s))),
  ),
  ("array", 1): (
    "Given n integers and an integer k, print the sum of the integers that are "
    "divisible by k.\nInput: first line n and k (1 <= n <= 10^5, 1 <= k <= "
    "100); second line the n integers (each between -10^9 and 10^9).\nOutput: "
    "one integer.",
    lambda r, size, t: _array_input(
      r, 1 + t * 3 * size, -50, 50, r.randint(1, 7)
    ),
    lambda s: str(
      sum(x for x in _ints(s.split("\n")[1]) if x % _ints(s)[1] == 0)
    ),
  ),
  ("array", 2): (
    "Given n integers, print the length of the longest contiguous segment in "
    "which every element is strictly greater than the previous one.\nInput: "
    "first line n (1 <= n <= 10^5); second line the n integers.\nOutput: one "
    "integer.",
    lambda r, size, t: _array_input(r, 1 + t * 4 * size, 0, 3 + t),
    lambda s: str(_longest_increasing_run(_ints(s.split("\n")[1]))),
  ),
  ("array", 3): (
    "Given n integers, print the largest possible sum of a non-empty "
    "contiguous segment.\nInput: first line n (1 <= n <= 10^5); second line "
    "the n integers (each between -10^4 and 10^4).\nOutput: one integer.",
    lambda r, size, t: _array_input(r, 1 + t * 5 * size, -20, 15 if t else -1),
    lambda s: str(_max_subarray(_ints(s.split("\n")[1]))),
  ),
  ("array", 4): (
    "Given n integers and k, count the pairs of positions i < j such that a_i "
    "+ a_j is divisible by k.\nInput: first line n and k (2 <= n <= 2*10^5, 1 "
    "<= k <= 10^9); second line the n integers (each between 0 and 10^9).\n"
    "Output: one integer.",
    lambda r, size, t: _array_input(
      r, 2 + (t * 6000 * size if t >= 4 else t * 5), 0, 10**9, r.randint(1, 50)
    ),
    lambda s: str(_pairs_sum_divisible(_ints(s.split("\n")[1]), _ints(s)[1])),
  ),
  ("strings", 1): (
    "Given a line of words separated by single spaces, reverse the letters of "
    "every word but keep the words in their order.\nInput: one line of "
    "lowercase words.\nOutput: the transformed line.",
    lambda r, size, t: _word_line(r, 1 + t * size),
    lambda s: " ".join(w[::-1] for w in s.split()),
  ),
  ("strings", 2): (
    "Run-length encode a string: replace every maximal block of equal "
    "characters by the character followed by the block length (for example "
    "aaab -> a3b1).\nInput: one line, a non-empty lowercase string.\nOutput: "
    "the encoding.",
    lambda r, size, t: _runs(r, 1 + t * 4 * size, "ab" if t < 3 else "abc"),
    lambda s: _run_length(s.strip()),
  ),
  ("strings", 3): (
    "Given a lowercase string s and an integer k, print how many different "
    "substrings of length k s has.\nInput: first line s (1 <= |s| <= 10^5); "
    "second line k (1 <= k <= |s|).\nOutput: one integer.",
    lambda r, size, t: (lambda w: f"{w}\n{r.randint(1, len(w))}\n")(
      _runs(r, 2 + t * 5 * size, "abc").strip()
    ),
    lambda s: (
      lambda w, k: str(len({w[i : i + k] for i in range(len(w) - k + 1)}))
    )(s.split()[0], int(s.split()[1])),
  ),
  ("strings", 4): (
    "Print the length of the longest contiguous substring of s that reads the "
    "same forwards and backwards.\nInput: one line, a lowercase string s (1 <= "
    "|s| <= 5000).\nOutput: one integer.",
    lambda r, size, t: _runs(
      r, 1 + (t * 700 * size if t >= 4 else t * 6), "ab"
    ),
    lambda s: str(_longest_palindrome(s.strip())),
  ),
}


def _spec(kind: str, level: int, size: int, seed: int) -> dict:
  if (kind, level) not in TEMPLATES:
    raise ValueError(
      f"unknown offline family problem kind={kind!r} level={level!r}"
    )
  if not 1 <= size <= MAX_SIZE:
    raise ValueError(f"size must be in [1, {MAX_SIZE}], got {size}")
  return {
    "kind": kind,
    "level": int(level),
    "size": int(size),
    "seed": int(seed),
  }


def build_task(
  kind: str,
  level: int,
  size: int,
  seed: int,
  root_id: str = "",
  parent_id: str | None = None,
) -> Task:
  """The task defined by a family spec; identical arguments give an identical
  Task."""
  spec = _spec(kind, level, size, seed)
  statement, make_input, solve = TEMPLATES[(kind, level)]
  rng = random.Random(f"{kind}/{level}/{size}/{seed}")
  tests = []
  for t in range(TESTS_PER_TASK):
    stdin = make_input(rng, size, t)
    tests.append((stdin, solve(stdin) + "\n"))
  example_in, example_out = tests[1]
  question = (
    f"{statement}\n\nExample input:\n{example_in}Example output:\n{example_out}"
  )
  task_id = f"off-{kind}-L{level}-s{size}-{seed:08x}"
  return Task(
    task_id=task_id,
    question=question,
    tests=tuple(tests),
    time_limit_s=DEFAULT_TIME_LIMIT_S,
    difficulty=float(level) + (size - 1) / MAX_SIZE,
    root_id=root_id or task_id,
    parent_id=parent_id,
    family_spec=json.dumps(spec, sort_keys=True),
  )


def generate_offline_tasks(
  num_tasks: int,
  seed: int,
  levels: Sequence[int] = LEVELS,
  kinds: Sequence[str] = KINDS,
) -> list[Task]:
  """``num_tasks`` distinct family tasks, balanced over kinds and levels, fully
  determined by ``seed``."""
  if num_tasks < 0:
    raise ValueError(f"num_tasks must be >= 0, got {num_tasks}")
  for level in levels:
    for kind in kinds:
      _spec(kind, level, 1, 0)
  rng = random.Random(seed)
  tasks, seen = [], set()
  i = 0
  while len(tasks) < num_tasks:
    kind, level = kinds[i % len(kinds)], levels[(i // len(kinds)) % len(levels)]
    task = build_task(kind, level, 1, rng.getrandbits(32))
    i += 1
    if task.task_id not in seen:
      seen.add(task.task_id)
      tasks.append(task)
  return tasks


def offline_train_eval_split(
  num_train: int, num_eval: int, seed: int, levels: Sequence[int] = LEVELS
) -> tuple[list[Task], list[Task]]:
  """Disjoint train / evaluation task lists from separate seed streams (no
  shared task_id or tests)."""
  train = generate_offline_tasks(num_train, seed, levels)
  train_keys = {t.task_id for t in train} | {t.tests for t in train}
  pool = generate_offline_tasks(num_eval + len(train), seed + 1_000_003, levels)
  evals = [
    t for t in pool if t.task_id not in train_keys and t.tests not in train_keys
  ][:num_eval]
  if len(evals) < num_eval:
    raise RuntimeError(
      f"could only build {len(evals)} evaluation tasks disjoint from training"
    )
  return train, evals


def propose_variant(
  task: Task, direction: str, rng: random.Random
) -> Task | None:
  """Rule-based proposer: a harder / easier sibling of a family task, or None
  when impossible.

  harder: level + 1 (at the top level: size + 1); easier: level - 1 (at level 1:
  size - 1). A fresh seed from ``rng`` gives new tests. The variant keeps
  ``root_id``; ``parent_id`` = task. Select-family tasks move by predicates
  (`select_family.propose_select_variant`). Tasks without a family spec
  (dataset / LLM-proposed tasks) return None.
  """
  if direction not in ("harder", "easier"):
    raise ValueError(
      f"direction must be 'harder' or 'easier', got {direction!r}"
    )
  if not task.family_spec:
    return None
  spec = json.loads(task.family_spec)
  if spec["kind"] == select_family.KIND:
    return select_family.propose_select_variant(task, direction, rng)
  kind, level, size = spec["kind"], spec["level"], spec["size"]
  step = 1 if direction == "harder" else -1
  if (kind, level + step) in TEMPLATES:
    level += step
  elif 1 <= size + step <= MAX_SIZE:
    size += step
  else:
    return None
  return build_task(
    kind,
    level,
    size,
    rng.getrandbits(32),
    root_id=task.root_id,
    parent_id=task.task_id,
  )


def reference_program(task: Task) -> str | None:
  """A program that solves a family task, where the family has one (the
  select family); None otherwise."""
  return select_family.reference_program(task)
