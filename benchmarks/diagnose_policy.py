"""Where a warm-started AlfWorld policy fails: success per task type, and
how often it picks the expert's command, by the expert's verb.

    python benchmarks/diagnose_policy.py
        --model_dir=rla_jax/warmstart/shipped/alfworld

`--model_dir` is a warm-start directory (holding `tokenizer/` and
`policy/`). Prints two markdown tables:

1. success on valid_seen small-room games, per task type (at most
   `--per_type` games each, 20 steps, T = 0.6, as the loop's evaluation);
2. choice accuracy: on the states of epsilon-noisy expert episodes of other
   valid_seen games, the share of greedy policy answers that name the
   expert's command, grouped by the expert's verb (go, take, clean, ...).

Deterministic for fixed flags. A diagnostic, not a test: nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import collections
import os

import numpy as np

from rla_jax.envs.alfworld import generate_split
from rla_jax.models import load_qwen
from rla_jax.tokenizer import load_tokenizer
from rla_jax.warmstart import demos, evaluate


def success_by_type(
  model, tok, games, *, history_steps, max_steps, temperature, per_type, seed
):
  """{task type: (games, success rate)} playing each type's games once."""
  by_type = collections.defaultdict(list)
  for g in games:
    by_type[g.task_type].append(g)
  out = {}
  for task_type, group in sorted(by_type.items()):
    group = group[:per_type]
    r = evaluate.play_policy(
      model,
      tok,
      group,
      history_steps=history_steps,
      max_steps=max_steps,
      temperature=temperature,
      seed=seed,
      batch_size=len(group),
      max_prompt_len=2048,
    )
    out[task_type] = (len(group), r["success_rate"])
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--model_dir", required=True)
  ap.add_argument("--history_steps", type=int, default=2)
  ap.add_argument(
    "--games",
    type=int,
    default=192,
    help="valid_seen games drawn for the per-type evaluation",
  )
  ap.add_argument("--per_type", type=int, default=32)
  ap.add_argument("--max_steps", type=int, default=20)
  ap.add_argument("--temperature", type=float, default=0.6)
  ap.add_argument("--states", type=int, default=512)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument(
    "--levels", default="1,2", help="game levels ('' = small rooms)"
  )
  ap.add_argument("--expert", default="search", choices=sorted(demos.EXPERTS))
  a = ap.parse_args()
  a.model_dir = os.path.expanduser(a.model_dir)
  for sub in ("tokenizer", "policy"):
    if not os.path.isdir(os.path.join(a.model_dir, sub)):
      raise SystemExit(f"--model_dir={a.model_dir!r} has no {sub}/ directory")
  tok = load_tokenizer(os.path.join(a.model_dir, "tokenizer"))
  model = load_qwen(os.path.join(a.model_dir, "policy"))
  levels = [int(x) for x in a.levels.split(",")] if a.levels else None
  split_args = {"room_size": "small", "levels": levels}
  games = generate_split("valid_seen", a.games, seed=99, **split_args)
  succ = success_by_type(
    model,
    tok,
    games,
    history_steps=a.history_steps,
    max_steps=a.max_steps,
    temperature=a.temperature,
    per_type=a.per_type,
    seed=a.seed,
  )
  print(f"success per task type ({a.max_steps} steps, T = {a.temperature}):\n")
  print("| task type | games | success |\n|---|---|---|")
  for t, (n, s) in succ.items():
    print(f"| {t} | {n} | {s:.3f} |")
  n_all = sum(n for n, _ in succ.values())
  won = sum(n * s for n, s in succ.values())
  print(f"| all | {n_all} | {won / n_all:.3f} |\n")
  other = generate_split("valid_seen", 96, seed=77, **split_args)
  episodes = demos.noisy_expert_rollouts(
    other, 0.3, np.random.default_rng(a.seed), 40, a.expert
  )
  acc = evaluate.choice_accuracy_by_verb(
    model,
    tok,
    episodes,
    history_steps=a.history_steps,
    max_states=a.states,
    seed=a.seed,
  )
  print(f"greedy choice = the {a.expert} expert's command, by its verb:\n")
  print("| verb | states | accuracy |\n|---|---|---|")
  for v, r in sorted(acc.items(), key=lambda kv: -kv[1]["states"]):
    print(f"| {v} | {r['states']} | {r['accuracy']:.3f} |")


if __name__ == "__main__":
  main()
