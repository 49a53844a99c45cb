"""Host-side ALFWorld rollouts.

`rollout_episodes` steps a batch of environments; at every turn it renders
each live agent's prompt (task, history window, numbered admissible
actions), samples ALL live agents in one sampler call, parses the boxed
index and steps the environments. It records, per step, the prompt ids, the
response ids and the behaviour log-probs, so every training sample keeps its
own prompt and response (no re-tokenisation, no misalignment). The judge's
pass over the finished episodes is `rla_jax.rl.alfworld_judge`.

Multi-process: each process owns a contiguous block of the games
(`distributed.process_slice`) and steps only those environments. At every
turn the live agents' prompts are all-gathered, so every process makes the
same global sampler call (rows in the single-process order, hence the same
samples as a single-process run); each process keeps the replies of its own
agents. The finished episodes are all-gathered at the end, so
`rollout_episodes` returns the GLOBAL list on every process and callers need
no change.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import numpy as np

from rla_jax import distributed
from rla_jax.envs.alfworld import BatchedEnv, Game, make_env
from rla_jax.metrics.progress import ProgressFn
from rla_jax.rl import agent_text
from rla_jax.rl.parsing import (
  action_index_parses,
  parse_action_index,
)
from rla_jax.rl.prompts import candidate_actions
from rla_jax.rl.seeds import derive_seed
from rla_jax.sampling.rows import SampleOutput
from rla_jax.sampling.sampler import Sampler
from rla_jax.sampling.settings import SamplingParams


@dataclasses.dataclass
class Episode:
  """One trajectory. observations has num_steps + 1 entries."""

  task_id: str
  game: Game
  observations: list[str] = dataclasses.field(default_factory=list)
  actions: list[str] = dataclasses.field(default_factory=list)
  prompt_texts: list[str] = dataclasses.field(default_factory=list)
  prompt_ids: list[list[int]] = dataclasses.field(default_factory=list)
  response_texts: list[str] = dataclasses.field(default_factory=list)
  response_ids: list[list[int]] = dataclasses.field(default_factory=list)
  logprobs: list[np.ndarray] = dataclasses.field(default_factory=list)
  # Per step: did the reply's \boxed{} index name a candidate itself
  # (parsing.action_index_parses), rather than fall back to candidate 0?
  answer_parsed: list[bool] = dataclasses.field(default_factory=list)
  won: bool = False

  @property
  def num_steps(self) -> int:
    return len(self.actions)

  # The fields the judge reads: what a reference trajectory keeps in a
  # checkpoint (token ids and log-probs are not needed to judge it again).
  REFERENCE_FIELDS = (
    "observations",
    "actions",
    "prompt_texts",
    "response_texts",
    "won",
  )

  def reference_record(self) -> dict:
    """The judge-reference fields of this episode, JSON-able."""
    return {
      "task_id": self.task_id,
      **{k: getattr(self, k) for k in self.REFERENCE_FIELDS},
    }

  @classmethod
  def from_reference_record(cls, record: dict, game: Game) -> Episode:
    """The episode `reference_record` saved, on its game."""
    return cls(
      task_id=record["task_id"],
      game=game,
      **{k: record[k] for k in cls.REFERENCE_FIELDS},
    )


def rollout_episodes(
  games: Sequence[Game],
  task_ids: Sequence[str],
  sampler: Sampler,
  tokenizer,
  *,
  backend: str,
  max_steps: int,
  history_steps: int | None,
  seed: int,
  params: SamplingParams,
  timings: dict | None = None,
  progress: ProgressFn | None = None,
  phase: str = "rollout",
) -> list[Episode]:
  """Plays every game once with the policy; returns one Episode per game.

  `games` is the global list (the same on every process); this process
  plays its own block of it and the result is the global list of episodes,
  in the order of `games`, on every process.

  timings, if given, accumulates seconds under "env" (reset + steps) and
  "policy_sampling" (prompt rendering, sampling, decoding and, when
  multi-process, the host gathers). progress, if given, is told after every
  turn how many of this process's episodes have ended (as `phase`).
  """
  timings = {} if timings is None else timings
  timings.setdefault("env", 0.0)
  timings.setdefault("policy_sampling", 0.0)
  if len(games) != len(task_ids):
    raise ValueError(f"{len(games)} games but {len(task_ids)} task ids")
  own = distributed.process_slice(len(games))
  episodes = _play_own_games(
    list(games[own]),
    list(task_ids[own]),
    own.start,
    sampler,
    tokenizer,
    backend=backend,
    max_steps=max_steps,
    history_steps=history_steps,
    seed=seed,
    params=params,
    timings=timings,
    progress=progress,
    phase=phase,
  )
  t0 = time.perf_counter()
  episodes = distributed.allgather_lists(episodes)
  timings["policy_sampling"] += time.perf_counter() - t0
  return episodes


@dataclasses.dataclass
class _GamesInPlay:
  """This process's games while they are played: their env, episodes so far,
  admissible commands now and whether each has ended."""

  env: BatchedEnv | None
  episodes: list[Episode]
  admissible: list[list[str]]
  done: list[bool]

  def live(self) -> list[int]:
    """Indices of the games still being played."""
    return [i for i, d in enumerate(self.done) if not d]


@dataclasses.dataclass
class _AgentPrompt:
  """A live agent's prompt this turn: its local index, text and token ids."""

  index: int
  text: str
  ids: list[int]


@dataclasses.dataclass
class _TurnRows:
  """Every process's live agents this turn, in global row order: their
  global rows (also their row seeds) and prompt token ids."""

  rows: list[int]
  prompt_ids: list[list[int]]


def _play_own_games(
  games: list[Game],
  task_ids: list[str],
  offset: int,
  sampler: Sampler,
  tokenizer,
  *,
  backend: str,
  max_steps: int,
  history_steps: int | None,
  seed: int,
  params: SamplingParams,
  timings: dict,
  progress: ProgressFn | None = None,
  phase: str = "rollout",
) -> list[Episode]:
  """Steps this process's games; rows of games[i] are global row offset + i.

  Every turn is one global sampler call over all processes' live agents,
  ordered by global row; the loop ends when no agent is live anywhere.
  Episode g's noise at a turn comes from its own stream, named by (seed,
  turn, g) (the sampler's row seeds): it does not depend on which other
  episodes are still live, so replaying the same games with the same seed
  under another policy draws the same noise per episode (paired evaluation).
  """
  t0 = time.perf_counter()
  play = _start_games(games, task_ids, backend, max_steps)
  timings["env"] += time.perf_counter() - t0
  for turn in range(max_steps):
    t0 = time.perf_counter()
    prompts = _render_prompts(play, tokenizer, history_steps)
    turn_rows = _gather_turn_rows(prompts, offset)
    if not turn_rows.rows:
      break
    out = sampler.generate(
      turn_rows.prompt_ids,
      seed=derive_seed(seed, turn),
      row_seeds=turn_rows.rows,  # common random numbers per episode
      **dataclasses.asdict(params),
    )
    commands = _record_replies(play, prompts, turn_rows, out, tokenizer, offset)
    t1 = time.perf_counter()
    timings["policy_sampling"] += t1 - t0
    if not prompts:
      continue  # this process is done; others still sample
    _step_games(play, prompts, commands)
    timings["env"] += time.perf_counter() - t1
    if progress is not None:
      ended = sum(play.done)
      progress(phase, ended, len(games), f"episodes ended, turn {turn + 1}")
  return play.episodes


def _start_games(
  games: list[Game], task_ids: list[str], backend: str, max_steps: int
) -> _GamesInPlay:
  """Resets an env on `games` (none when there are no games) and opens one
  episode per game on its first observation."""
  env = make_env(backend, len(games), max_steps=max_steps) if games else None
  obs, infos = env.reset(games) if games else ([], {"admissible_commands": []})
  episodes = [
    Episode(t, g, observations=[o])
    for t, g, o in zip(task_ids, games, obs, strict=True)
  ]
  return _GamesInPlay(
    env=env,
    episodes=episodes,
    admissible=infos["admissible_commands"],
    done=[False] * len(games),
  )


def _render_prompts(
  play: _GamesInPlay, tokenizer, history_steps: int | None
) -> list[_AgentPrompt]:
  """The policy prompt of every live agent of this process, in index order."""
  prompts = []
  for i in play.live():
    ep = play.episodes[i]
    text = agent_text.policy_step_text(
      ep.observations, ep.actions, play.admissible[i], history_steps
    )
    ids = agent_text.chat_ids(tokenizer, text)
    prompts.append(_AgentPrompt(index=i, text=text, ids=ids))
  return prompts


def _gather_turn_rows(prompts: list[_AgentPrompt], offset: int) -> _TurnRows:
  """All-gathers (global row, prompt ids) of every process's live agents."""
  rows = distributed.allgather_lists(
    [(offset + p.index, p.ids) for p in prompts]
  )
  return _TurnRows(
    rows=[g for g, _ in rows], prompt_ids=[ids for _, ids in rows]
  )


def _record_replies(
  play: _GamesInPlay,
  prompts: list[_AgentPrompt],
  turn_rows: _TurnRows,
  out: SampleOutput,
  tokenizer,
  offset: int,
) -> list[str | None]:
  """Appends each live agent's prompt, reply and chosen command to its
  episode; returns the commands to step with (None for ended games)."""
  position = {g: j for j, g in enumerate(turn_rows.rows)}
  commands: list[str | None] = [None] * len(play.episodes)
  for p in prompts:
    j = position[offset + p.index]
    text = tokenizer.decode(out.tokens[j], skip_special_tokens=True)
    options = candidate_actions(play.admissible[p.index])
    command = options[parse_action_index(text, len(options))]
    ep = play.episodes[p.index]
    ep.prompt_texts.append(p.text)
    ep.prompt_ids.append(p.ids)
    ep.response_texts.append(text)
    ep.response_ids.append(out.tokens[j])
    ep.logprobs.append(out.logprobs[j])
    ep.actions.append(command)
    ep.answer_parsed.append(action_index_parses(text, len(options)))
    commands[p.index] = command
  return commands


def _step_games(
  play: _GamesInPlay,
  prompts: list[_AgentPrompt],
  commands: list[str | None],
) -> None:
  """Steps the env with `commands`; the prompted agents' episodes take the
  new observation and won flag, and their games may end."""
  obs, won, dones, infos = play.env.step(commands)
  play.admissible = infos["admissible_commands"]
  for p in prompts:
    play.episodes[p.index].observations.append(obs[p.index])
    play.episodes[p.index].won = bool(won[p.index])
    play.done[p.index] = bool(dones[p.index])
