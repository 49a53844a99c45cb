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

from rla_jax.envs.alfworld import (
  BatchedEnv,
  Game,
  label_progress,
  make_env,
)
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
  policy = _Policy(
    sampler=sampler,
    tokenizer=tokenizer,
    history_steps=history_steps,
    temperature=temperature,
    greedy=greedy,
  )
  chunks = [
    _play_chunk(
      env,
      policy,
      list(games[c0 : c0 + batch_size]),
      max_steps=max_steps,
      chunk_seed=seed * 1_000_003 + c0 * 1009,
    )
    for c0 in range(0, len(games), batch_size)
  ]
  return _play_summary(chunks, len(games))


@dataclasses.dataclass
class _Policy:
  """The policy as `play_policy` samples it: sampler, tokenizer, history
  window and sampling settings."""

  sampler: Sampler
  tokenizer: object
  history_steps: int | None
  temperature: float
  greedy: bool


@dataclasses.dataclass
class _ChunkPlay:
  """One chunk of games in play: per game its observations and actions so
  far, admissible commands now and whether it has ended; the env's infos."""

  games: list[Game]
  observations: list[list[str]]
  actions: list[list[str]]
  admissible: list[list[str]]
  done: list[bool]
  infos: dict

  def live(self) -> list[int]:
    """Indices of the games still being played."""
    return [i for i in range(len(self.games)) if not self.done[i]]


@dataclasses.dataclass
class _PolicyMove:
  """A live game's move: its policy prompt, the reply and the command."""

  prompt_text: str
  response_text: str
  command: str


@dataclasses.dataclass
class _ChunkResult:
  """A played chunk: per game won and steps taken; every step's record."""

  won: list[bool]
  steps: list[int]
  records: list[StepRecord]


def _play_chunk(
  env: BatchedEnv,
  policy: _Policy,
  chunk: list[Game],
  *,
  max_steps: int,
  chunk_seed: int,
) -> _ChunkResult:
  """Plays `chunk` on `env` until every game ended or max_steps; step t
  samples with seed chunk_seed + t."""
  obs, infos = env.reset(chunk)
  play = _ChunkPlay(
    games=chunk,
    observations=[[o] for o in obs],
    actions=[[] for _ in chunk],
    admissible=infos["admissible_commands"],
    done=list(env.done),
    infos=infos,
  )
  records: list[StepRecord] = []
  for t in range(max_steps):
    live = play.live()
    if not live:
      break
    moves = _policy_moves(policy, play, live, seed=chunk_seed + t)
    records += _step_chunk(env, play, moves)
  return _ChunkResult(
    won=play.infos["won"][: len(chunk)],
    steps=play.infos["steps"][: len(chunk)],
    records=records,
  )


def _policy_moves(
  policy: _Policy, play: _ChunkPlay, live: list[int], *, seed: int
) -> dict[int, _PolicyMove]:
  """One sampler call over the live games' prompts; each reply's parsed
  candidate index names its command."""
  texts = {
    i: agent_text.policy_step_text(
      play.observations[i],
      play.actions[i],
      play.admissible[i],
      policy.history_steps,
    )
    for i in live
  }
  out = policy.sampler.generate(
    [agent_text.chat_ids(policy.tokenizer, texts[i]) for i in live],
    seed=seed,
    temperature=policy.temperature,
    greedy=policy.greedy,
  )
  moves = {}
  for i, toks in zip(live, out.tokens, strict=True):
    response = policy.tokenizer.decode(toks, skip_special_tokens=True)
    cands = candidate_actions(play.admissible[i])
    command = cands[parse_action_index(response, len(cands))]
    moves[i] = _PolicyMove(
      prompt_text=texts[i], response_text=response, command=command
    )
  return moves


def _step_chunk(
  env: BatchedEnv, play: _ChunkPlay, moves: dict[int, _PolicyMove]
) -> list[StepRecord]:
  """Steps the env with the moves (None for ended games), extends the
  histories and returns each move's StepRecord with its expert label."""
  commands: list[str | None] = [None] * len(play.games)
  for i, move in moves.items():
    commands[i] = move.command
  obs, _, play.done, play.infos = env.step(commands)
  play.admissible = play.infos["admissible_commands"]
  records = []
  for i, move in moves.items():
    good = label_progress(play.games[i], play.actions[i], move.command)
    records.append(
      StepRecord(
        move.prompt_text, move.response_text, obs[i], 1 if good else -1
      )
    )
    play.actions[i].append(move.command)
    play.observations[i].append(obs[i])
  return records


def _play_summary(chunks: list[_ChunkResult], num_games: int) -> dict:
  """play_policy's result: success rate and mean steps over all chunks'
  games, and every step record in play order."""
  won = [w for c in chunks for w in c.won]
  steps = [s for c in chunks for s in c.steps]
  return {
    "success_rate": float(np.mean(won)),
    "mean_steps": float(np.mean(steps)),
    "num_games": num_games,
    "records": [r for c in chunks for r in c.records],
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
  scores = _judge_scores(
    sampler,
    tokenizer,
    records,
    batch_size=batch_size,
    seed=seed,
    temperature=temperature,
    greedy=greedy,
  )
  return _accuracy_summary(scores, np.asarray([r.label for r in records]))


def _judge_scores(
  sampler: Sampler,
  tokenizer,
  records: Sequence[StepRecord],
  *,
  batch_size: int,
  seed: int,
  temperature: float,
  greedy: bool,
) -> np.ndarray:
  """The judge's parsed score of every record, sampled in chunks of
  batch_size; the chunk at c0 samples with seed + c0."""
  scores = []
  for c0 in range(0, len(records), batch_size):
    part = records[c0 : c0 + batch_size]
    out = sampler.generate(
      [_judge_prompt_ids(tokenizer, r) for r in part],
      seed=seed + c0,
      temperature=temperature,
      greedy=greedy,
    )
    scores += [
      parse_boxed_score(tokenizer.decode(t, skip_special_tokens=True))
      for t in out.tokens
    ]
  return np.asarray(scores)


def _judge_prompt_ids(tokenizer, record: StepRecord) -> list[int]:
  """The judge's chat prompt ids for one policy step."""
  return agent_text.chat_ids(
    tokenizer,
    agent_text.judge_step_text(
      record.prompt_text, record.response_text, record.next_observation
    ),
  )


def _accuracy_summary(scores: np.ndarray, labels: np.ndarray) -> dict:
  """judge_accuracy's metrics of the judge's scores against the labels."""
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
    "num_steps": int(len(labels)),
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
