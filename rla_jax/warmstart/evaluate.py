"""Measuring the warm start: policy success and judge process accuracy.

The policy plays games in the native env through the `Sampler`, with the
same prompts (`agent_text`) and action parsing (`parse_action_index`) as the
RL loop. Every policy step is kept as a `StepRecord`, labelled by the
expert's progress label (`label_progress`), so the judge can be scored on
the policy's own steps (the paper's "process accuracy": agreement of the
judge's score with a reference step label).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.envs.alfworld import Game, label_progress, make_env
from rla_jax.models.qwen import Qwen
from rla_jax.rl import agent_text
from rla_jax.rl.parsing import parse_action_index, parse_boxed_score
from rla_jax.rl.prompts import candidate_actions
from rla_jax.sampling.sampler import Sampler
from rla_jax.warmstart import demos


@dataclasses.dataclass
class StepRecord:
  """One policy step: its user message, response, next observation and the
  expert progress label (+1 progress, -1 not)."""

  prompt_text: str
  response_text: str
  next_observation: str
  label: int


def make_sampler(
  model: Qwen,
  tokenizer,
  *,
  max_prompt_len: int,
  max_new_tokens: int,
  batch_size: int,
) -> Sampler:
  """A Sampler with one batch shape and prompt buckets every 128 tokens."""
  buckets = list(range(128, max_prompt_len + 1, 128)) or [max_prompt_len]
  return Sampler(
    model,
    max_prompt_len=max_prompt_len,
    max_new_tokens=max_new_tokens,
    stop_token_ids=agent_text.end_of_turn_ids(tokenizer),
    pad_id=tokenizer.pad_token_id,
    prompt_buckets=buckets,
    batch_buckets=[batch_size],
  )


def play_policy(
  model: Qwen,
  tokenizer,
  games: Sequence[Game],
  *,
  history_steps: int | None,
  max_steps: int = 50,
  temperature: float = 0.8,
  greedy: bool = False,
  seed: int = 0,
  batch_size: int = 32,
  max_prompt_len: int = 1536,
  max_new_tokens: int = 32,
) -> dict:
  """Plays each game once; returns success_rate, mean_steps, records.

  Games are played in chunks of batch_size rows; sampling seeds are
  fold-ins of `seed` per (chunk, step), so results are deterministic.
  """
  if not games:
    raise ValueError("play_policy: no games")
  sampler = make_sampler(
    model,
    tokenizer,
    max_prompt_len=max_prompt_len,
    max_new_tokens=max_new_tokens,
    batch_size=batch_size,
  )
  env = make_env("native", batch_size, max_steps=max_steps)
  won_all, steps_all, records = [], [], []
  for c0 in range(0, len(games), batch_size):
    chunk = list(games[c0 : c0 + batch_size])
    obs, infos = env.reset(chunk)
    hist_obs = [[o] for o in obs]
    hist_act: list[list[str]] = [[] for _ in chunk]
    adm = infos["admissible_commands"]
    done = list(env.done)
    for t in range(max_steps):
      live = [i for i in range(len(chunk)) if not done[i]]
      if not live:
        break
      texts = {
        i: agent_text.policy_step_text(
          hist_obs[i], hist_act[i], adm[i], history_steps
        )
        for i in live
      }
      out = sampler.generate(
        [agent_text.chat_ids(tokenizer, texts[i]) for i in live],
        seed=seed * 1_000_003 + c0 * 1009 + t,
        temperature=temperature,
        greedy=greedy,
      )
      commands: list[str | None] = [None] * len(chunk)
      responses = {}
      for i, toks in zip(live, out.tokens, strict=True):
        responses[i] = tokenizer.decode(toks, skip_special_tokens=True)
        cands = candidate_actions(adm[i])
        commands[i] = cands[parse_action_index(responses[i], len(cands))]
      obs, _, done, infos = env.step(commands)
      adm = infos["admissible_commands"]
      for i in live:
        good = label_progress(chunk[i], hist_act[i], commands[i])
        records.append(
          StepRecord(texts[i], responses[i], obs[i], 1 if good else -1)
        )
        hist_act[i].append(commands[i])
        hist_obs[i].append(obs[i])
    won_all += infos["won"][: len(chunk)]
    steps_all += infos["steps"][: len(chunk)]
  return {
    "success_rate": float(np.mean(won_all)),
    "mean_steps": float(np.mean(steps_all)),
    "num_games": len(games),
    "records": records,
  }


def judge_accuracy(
  model: Qwen,
  tokenizer,
  records: Sequence[StepRecord],
  *,
  temperature: float = 0.8,
  greedy: bool = True,
  seed: int = 0,
  batch_size: int = 32,
  max_prompt_len: int = 2048,
  max_new_tokens: int = 24,
) -> dict:
  """Process accuracy of the judge on `records` vs their expert labels.

  accuracy = mean[S == label] with S = parse_boxed_score(judge answer)
  (an unparseable answer, S = 0, counts as wrong); balanced_accuracy =
  mean of the accuracies on label +1 and label -1 steps;
  label_positive_rate = fraction of labels that are +1 (what a constant "+1"
  judge would score); vote_positive_rate = fraction of the judge's answers
  that are +1.
  """
  if not records:
    raise ValueError("judge_accuracy: no step records")
  sampler = make_sampler(
    model,
    tokenizer,
    max_prompt_len=max_prompt_len,
    max_new_tokens=max_new_tokens,
    batch_size=batch_size,
  )
  scores = []
  for c0 in range(0, len(records), batch_size):
    part = records[c0 : c0 + batch_size]
    prompts = [
      agent_text.chat_ids(
        tokenizer,
        agent_text.judge_step_text(
          r.prompt_text, r.response_text, r.next_observation
        ),
      )
      for r in part
    ]
    out = sampler.generate(
      prompts, seed=seed + c0, temperature=temperature, greedy=greedy
    )
    scores += [
      parse_boxed_score(tokenizer.decode(t, skip_special_tokens=True))
      for t in out.tokens
    ]
  scores = np.asarray(scores)
  labels = np.asarray([r.label for r in records])
  hit = scores == labels
  per_class = [
    float(hit[labels == c].mean()) for c in (1, -1) if (labels == c).any()
  ]
  return {
    "accuracy": float(hit.mean()),
    "balanced_accuracy": float(np.mean(per_class)),
    "label_positive_rate": float((labels > 0).mean()),
    "vote_positive_rate": float((scores > 0).mean()),
    "unparseable_rate": float((scores == 0).mean()),
    "num_steps": int(len(records)),
  }


def choice_accuracy_by_verb(
  model: Qwen,
  tokenizer,
  episodes,
  *,
  history_steps: int | None,
  seed: int = 0,
  max_states: int = 512,
  batch_size: int = 64,
) -> dict[str, dict]:
  """{demonstrator verb: {"states", "accuracy"}} plus "all": the share of
  visited states of `episodes` (demos.Episode) where the policy's greedy
  answer names the demonstrator's command, grouped by that command's verb
  (go, take, open, ...)."""
  states = [
    (
      demos.step_prompt(ep, k, history_steps),
      cmd,
      candidate_actions(ep.admissible[k]),
    )
    for ep in episodes
    for k, cmd in enumerate(ep.expert)
    if cmd is not None
  ][:max_states]
  if not states:
    raise ValueError("choice_accuracy_by_verb: no demonstrated states")
  sampler = make_sampler(
    model,
    tokenizer,
    max_prompt_len=2048,
    max_new_tokens=32,
    batch_size=batch_size,
  )
  hits = collections.defaultdict(list)
  for c0 in range(0, len(states), batch_size):
    part = states[c0 : c0 + batch_size]
    out = sampler.generate(
      [agent_text.chat_ids(tokenizer, p) for p, _, _ in part],
      seed=seed,
      greedy=True,
    )
    for (_, cmd, cands), toks in zip(part, out.tokens, strict=True):
      answer = tokenizer.decode(toks, skip_special_tokens=True)
      chosen = cands[parse_action_index(answer, len(cands))]
      hits[cmd.split()[0]].append(chosen == cmd)
      hits["all"].append(chosen == cmd)
  return {
    verb: {"states": len(h), "accuracy": float(np.mean(h))}
    for verb, h in sorted(hits.items())
  }
