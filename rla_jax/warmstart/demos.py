"""Demonstration data: epsilon-noisy expert
rollouts and the examples built from them.

A rollout follows an expert (the oracle ``next_action`` or the searching
``search_next_action``, see ``EXPERTS``) but, with probability epsilon,
takes a uniformly random admissible command instead, so the visited states
include mistakes and recoveries. Examples are rendered with
``rla_jax.rl.agent_text`` so warm start and RL see byte-identical prompts:

* policy example at step k: prompt = chat(policy_step_text(o_0..o_k,
  a_0..a_{k-1}, admissible_k, H)), response = policy_response_text(e_k, index of
  e_k) + <|im_end|>, where e_k is the EXPERT's command at the visited state (not
  the taken a_k);
* judge example at step k: prompt = chat(judge_step_text(policy step text,
  policy_response_text(a_k, index of a_k), o_{k+1})), response =
  judge_response_text(+1 if label_progress(game, a_0..a_{k-1}, a_k) else -1) +
  <|im_end|>.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.envs.alfworld import Game, label_progress, make_env, next_action
from rla_jax.envs.alfworld.search_expert import (
  search_lowest_next_action,
  search_next_action,
)
from rla_jax.rl import agent_text
from rla_jax.rl.prompts import candidate_actions

# Demonstrators: (game, actions so far) -> next command or None.
EXPERTS = {
  "oracle": next_action,
  "search": search_next_action,
  "search_lowest": search_lowest_next_action,
}


@dataclasses.dataclass
class Episode:
  """One rollout: observations o_0..o_L, taken actions a_0..a_{L-1},
  admissible lists per visited state (L + 1 of them), expert commands e_k at
  each of the first L states (None where the state was a dead end)."""

  game: Game
  observations: list[str]
  actions: list[str]
  admissible: list[list[str]]
  expert: list[str | None]
  won: bool


@dataclasses.dataclass
class TextExample:
  """A (user message, assistant response) pair; label is +1/-1 for judge
  examples (the expert progress label, before any label noise) else 0;
  parts = (step prompt, step response, next observation) for judge examples."""

  prompt_text: str
  response_text: str
  label: int = 0
  parts: tuple[str, str, str] | None = None


def noisy_expert_rollouts(
  games: Sequence[Game],
  epsilon: float,
  rng: np.random.Generator,
  max_steps: int,
  expert: str = "oracle",
) -> list[Episode]:
  """Plays every game with the epsilon-noisy expert for at most max_steps.

  At each state: e = EXPERTS[expert](game, actions); with probability epsilon
  (or if e is None) the action is a uniform draw from the admissible commands,
  otherwise e. Games are stepped one at a time in the native env, in order, so
  the result is a deterministic function of (games, epsilon, rng state).
  """
  if not 0.0 <= epsilon <= 1.0:
    raise ValueError(f"demo epsilon must be in [0, 1], got {epsilon}")
  if expert not in EXPERTS:
    raise ValueError(
      f"demo expert must be one of {sorted(EXPERTS)}, got {expert!r}"
    )
  expert_fn = EXPERTS[expert]
  env = make_env("native", 1, max_steps=max_steps)
  episodes = []
  for game in games:
    obs, infos = env.reset([game])
    ep = Episode(
      game,
      [obs[0]],
      [],
      [list(infos["admissible_commands"][0])],
      [],
      bool(infos["won"][0]),
    )
    done = ep.won
    while not done:
      expert = expert_fn(game, ep.actions)
      cands = candidate_actions(ep.admissible[-1])
      if expert is not None and expert not in cands:
        raise RuntimeError(
          f"game {game.game_id}: expert command {expert!r} "
          f"is not admissible {cands}"
        )
      explore = rng.random() < epsilon
      action = (
        cands[int(rng.integers(len(cands)))]
        if (explore or expert is None)
        else expert
      )
      obs, won, dones, infos = env.step([action])
      ep.expert.append(expert)
      ep.actions.append(action)
      ep.observations.append(obs[0])
      ep.admissible.append(list(infos["admissible_commands"][0]))
      ep.won, done = bool(won[0]), bool(dones[0])
    episodes.append(ep)
  return episodes


def step_prompt(ep: Episode, k: int, history_steps: int | None) -> str:
  """The policy's user message at step k of an episode."""
  return agent_text.policy_step_text(
    ep.observations[: k + 1], ep.actions[:k], ep.admissible[k], history_steps
  )


def command_response(
  command: str, admissible: Sequence[str], answer_format: str = "choice_line"
) -> str:
  """The reference-format response choosing `command` among the candidates."""
  return agent_text.policy_response_text(
    command, candidate_actions(admissible).index(command), answer_format
  )


def policy_examples(
  episodes: Sequence[Episode],
  history_steps: int | None,
  answer_format: str = "choice_line",
) -> list[TextExample]:
  """One example per visited state with a defined expert command."""
  out = []
  for ep in episodes:
    for k, expert in enumerate(ep.expert):
      if expert is None:
        continue
      out.append(
        TextExample(
          step_prompt(ep, k, history_steps),
          command_response(expert, ep.admissible[k], answer_format),
        )
      )
  return out


def verb_balance_repeats(
  episodes: Sequence[Episode], alpha: float
) -> list[int]:
  """How often each policy example (in `policy_examples` order) enters the
  SFT pool, so that rare decisions are not drowned by "go to":

      r_i = max(1, round((f_max / f_v) ** alpha)),

  f_v = share of examples whose expert command starts with verb v (go, take,
  move, open, clean, cool, heat, use, ...), f_max the largest share.
  alpha = 0 repeats nothing; alpha = 1 equalises the verbs' shares.
  """
  if not 0.0 <= alpha <= 1.0:
    raise ValueError(f"demo_verb_balance must be in [0, 1], got {alpha}")
  verbs = [e.split()[0] for ep in episodes for e in ep.expert if e is not None]
  if not verbs:
    return []
  counts = collections.Counter(verbs)
  top = max(counts.values())
  return [max(1, int(round((top / counts[v]) ** alpha))) for v in verbs]


def judge_examples(
  episodes: Sequence[Episode],
  history_steps: int | None,
  answer_format: str = "choice_line",
) -> list[TextExample]:
  """One judge example per taken step, labelled by expert progress."""
  out = []
  for ep in episodes:
    for k, action in enumerate(ep.actions):
      label = 1 if label_progress(ep.game, ep.actions[:k], action) else -1
      parts = (
        step_prompt(ep, k, history_steps),
        command_response(action, ep.admissible[k], answer_format),
        ep.observations[k + 1],
      )
      out.append(
        TextExample(
          agent_text.judge_step_text(*parts),
          agent_text.judge_response_text(label),
          label,
          parts,
        )
      )
  return out


def balance_and_corrupt(
  examples: Sequence[TextExample],
  num: int,
  label_noise: float,
  rng: np.random.Generator,
  positive_share: float = 0.5,
) -> list[TextExample]:
  """Up to `num` judge examples, floor(num * positive_share) of them +1 by
  expert label and the rest -1 (as far as the pool allows), with a fraction
  `label_noise` of the TRAINING targets flipped (ex.label keeps the true
  label). Output order is shuffled. The share is the judge's prior: a judge
  trained half +1 votes +1 about half the time on a policy whose steps make
  progress far less often."""
  if not 0.0 <= label_noise <= 0.5:
    raise ValueError(f"rm_label_noise must be in [0, 0.5], got {label_noise}")
  if not 0.0 < positive_share < 1.0:
    raise ValueError(
      f"rm_positive_share must be in (0, 1), got {positive_share}"
    )
  pos = [e for e in examples if e.label > 0]
  neg = [e for e in examples if e.label < 0]
  n_pos = min(len(pos), int(num * positive_share))
  n_neg = min(len(neg), num - n_pos)
  n_pos = min(len(pos), num - n_neg)
  chosen = [pos[i] for i in rng.permutation(len(pos))[:n_pos]] + [
    neg[i] for i in rng.permutation(len(neg))[:n_neg]
  ]
  chosen = [chosen[i] for i in rng.permutation(len(chosen))]
  flip = rng.random(len(chosen)) < label_noise
  return [
    TextExample(
      e.prompt_text,
      agent_text.judge_response_text(-e.label if f else e.label),
      e.label,
      e.parts,
    )
    for e, f in zip(chosen, flip, strict=True)
  ]


def transcript_text(ep: Episode) -> str:
  """Plain game transcript (tokenizer / pretraining corpus)."""
  lines = [ep.observations[0]]
  for a, o in zip(ep.actions, ep.observations[1:], strict=True):
    lines += [f"> {a}", o]
  return "\n".join(lines)
