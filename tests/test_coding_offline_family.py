"""Offline task family: determinism, independent solution programs pass in the
sandbox, level 4 defeats the naive algorithm, rule-based variants, train/eval
split."""

import itertools
import json
import random

import pytest

from rla_jax.envs.coding import offline_family as fam
from rla_jax.envs.coding import sandbox as sb
from rla_jax.envs.coding.sandbox_outcomes import OK, TIMEOUT
from rla_jax.envs.coding.tasks import Task

# Independently written solutions (not the
# generator's solvers), one per (kind, level).
SOLUTIONS = {
  ("digits", 1): "print(sum(map(int, input().strip())))",
  ("digits", 2): (
    "n, b = map(int, input().split())\ns = 0\nwhile n:\n    s += n % b\n"
    "    n //= b\nprint(s)"
  ),
  ("digits", 3): (
    "n, k = map(int, input().split())\n"
    "print(sum(1 for x in range(1, n + 1) if sum(map(int, str(x))) % k == 0))"
  ),
  # Program text run as is in the sandbox: its long line stays unsplit.
  ("digits", 4): """
from functools import lru_cache
n, k = map(int, input().split())
d = str(n)
@lru_cache(None)
def go(i, m, tight):
    if i == len(d):
        return 1 if m == 0 else 0
    top = int(d[i]) if tight else 9
    return sum(go(i + 1, (m + x) % k, tight and x == top) for x in range(top + 1))
print(go(0, 0, True) - 1)""",  # noqa: E501
  ("array", 1): (
    "n, k = map(int, input().split())\na = list(map(int, input().split()))\n"
    "print(sum(x for x in a if x % k == 0))"
  ),
  ("array", 2): """
n = int(input()); a = list(map(int, input().split()))
best = cur = 1
for i in range(1, n):
    cur = cur + 1 if a[i] > a[i - 1] else 1
    best = max(best, cur)
print(best)""",
  ("array", 3): """
n = int(input()); a = list(map(int, input().split()))
best = max(a); s = 0
for x in a:
    s = max(s + x, x)
    best = max(best, s)
print(best)""",
  ("array", 4): """
from collections import Counter
n, k = map(int, input().split())
c = Counter()
ans = 0
for x in map(int, input().split()):
    ans += c[(-x) % k]
    c[x % k] += 1
print(ans)""",
  ("strings", 1): "print(' '.join(w[::-1] for w in input().split()))",
  ("strings", 2): (
    "import itertools\n"
    "print(''.join(ch + str(len(list(g))) for ch, g in "
    "itertools.groupby(input().strip())))"
  ),
  ("strings", 3): (
    "s = input().strip(); k = int(input())\n"
    "print(len(set(s[i:i + k] for i in range(len(s) - k + 1))))"
  ),
  ("strings", 4): """
s = input().strip(); n = len(s); best = 0
for c in range(2 * n - 1):
    l, r = c // 2, (c + 1) // 2
    while l >= 0 and r < n and s[l] == s[r]:
        l -= 1; r += 1
    best = max(best, r - l - 1)
print(best)""",
}

NAIVE_PAIRS = (
  "n, k = map(int, input().split())\na = list(map(int, input().split()))\n"
  "print(sum(1 for i in range(n) for j in range(i + 1, n) "
  "if (a[i] + a[j]) % k == 0))"
)


def test_generation_is_deterministic_balanced_and_serialisable():
  a, b = (
    fam.generate_offline_tasks(24, seed=7),
    fam.generate_offline_tasks(24, seed=7),
  )
  assert a == b and a != fam.generate_offline_tasks(24, seed=8)
  assert len({t.task_id for t in a}) == 24
  combos = [
    (json.loads(t.family_spec)["kind"], json.loads(t.family_spec)["level"])
    for t in a
  ]
  assert sorted(set(combos)) == sorted(fam.TEMPLATES) and all(
    combos.count(c) == 2 for c in set(combos)
  )
  for t in a:
    assert (
      1 <= len(t.tests) <= 8 and t.root_id == t.task_id and t.parent_id is None
    )
    assert Task.from_json(t.to_json()) == t
  only_easy = fam.generate_offline_tasks(6, seed=1, levels=(1,))
  assert {json.loads(t.family_spec)["level"] for t in only_easy} == {1}
  with pytest.raises(ValueError, match="unknown offline family problem"):
    fam.generate_offline_tasks(3, seed=1, levels=(9,))


def test_reference_solvers_against_brute_force():
  rng = random.Random(0)
  for _ in range(200):
    n, k = rng.randint(1, 3000), rng.randint(1, 20)
    assert fam._count_digit_sum_divisible(n, k) == sum(
      1 for x in range(1, n + 1) if sum(map(int, str(x))) % k == 0
    )
    a = [rng.randint(-9, 9) for _ in range(rng.randint(1, 12))]
    assert fam._max_subarray(a) == max(
      sum(a[i:j]) for i in range(len(a)) for j in range(i + 1, len(a) + 1)
    )
    b = [abs(x) for x in a]
    assert fam._pairs_sum_divisible(b, k) == sum(
      1
      for i, j in itertools.combinations(range(len(b)), 2)
      if (b[i] + b[j]) % k == 0
    )
    s = "".join(rng.choice("ab") for _ in range(rng.randint(1, 12)))
    assert fam._longest_palindrome(s) == max(
      j - i
      for i in range(len(s))
      for j in range(i + 1, len(s) + 1)
      if s[i:j] == s[i:j][::-1]
    )


def test_independent_solutions_pass_and_naive_level4_times_out(tmp_path):
  tasks = {
    (json.loads(t.family_spec)["kind"], json.loads(t.family_spec)["level"]): t
    for t in fam.generate_offline_tasks(12, seed=11)
  }
  pairs, owners = [], []
  for key, task in tasks.items():
    for stdin, _ in task.tests:
      pairs.append((SOLUTIONS[key].strip() + "\n", stdin))
      owners.append(key)
  big_pairs_test = max(tasks[("array", 4)].tests, key=lambda t: len(t[0]))
  pairs.append((NAIVE_PAIRS, big_pairs_test[0]))
  with sb.SandboxExecutor(max_workers=2, tmp_root=str(tmp_path)) as ex:
    outs = ex.execute(pairs, time_limit_s=1.0)
  from rla_jax.envs.coding.tasks import outputs_match

  expected = [t[1] for key in tasks for t in tasks[key].tests]
  for key, out, exp in zip(owners, outs[:-1], expected, strict=True):
    assert out.status == OK and outputs_match(out.stdout, exp), (
      key,
      out,
      exp,
    )
  assert outs[-1].status == TIMEOUT  # level 4 needs the linear algorithm


def test_propose_variant_moves_level_then_size():
  rng = random.Random(0)
  l1 = fam.build_task("array", 1, 1, seed=5)
  harder = fam.propose_variant(l1, "harder", rng)
  assert json.loads(harder.family_spec)["level"] == 2
  assert (
    harder.root_id == l1.task_id
    and harder.parent_id == l1.task_id
    and harder.difficulty > l1.difficulty
  )
  assert (
    fam.propose_variant(l1, "easier", rng) is None
  )  # level 1, size 1: nothing easier
  l4 = fam.build_task("strings", 4, 1, seed=5, root_id="root-x")
  top = fam.propose_variant(l4, "harder", rng)
  spec = json.loads(top.family_spec)
  assert (spec["level"], spec["size"]) == (4, 2) and top.root_id == "root-x"
  assert max(len(t[0]) for t in top.tests) > max(len(t[0]) for t in l4.tests)
  assert (
    fam.propose_variant(
      fam.build_task("strings", 4, fam.MAX_SIZE, seed=1), "harder", rng
    )
    is None
  )
  easier = fam.propose_variant(top, "easier", rng)
  assert (
    json.loads(easier.family_spec)["level"] == 3
    and easier.parent_id == top.task_id
  )
  assert (
    fam.propose_variant(
      Task(task_id="d", question="q", tests=(("1", "1"),)), "harder", rng
    )
    is None
  )
  with pytest.raises(ValueError, match="direction"):
    fam.propose_variant(l1, "up", rng)
  assert fam.propose_variant(
    l1, "harder", random.Random(3)
  ) == fam.propose_variant(l1, "harder", random.Random(3))


def test_train_eval_split_is_disjoint():
  train, evals = fam.offline_train_eval_split(30, 12, seed=0)
  assert len(train) == 30 and len(evals) == 12
  assert not {t.task_id for t in train} & {t.task_id for t in evals}
  assert not {t.tests for t in train} & {t.tests for t in evals}
