"""The judge's pass over finished ALFWorld episodes (the paper's step-wise
judgements S_{i,j}, j = 1..m, of every policy step i).

`judge_episodes` builds one judge prompt per step of every trajectory (the
agent's prompt, its reply and the observation that followed) and samples m
judgements for all of them in batched sampler calls. Multi-process: it takes
the GLOBAL episode list `rollout_episodes` returns and makes the same global
sampler calls on every process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.metrics.progress import ProgressFn
from rla_jax.rl import agent_text
from rla_jax.rl.alfworld_rollout import Episode
from rla_jax.rl.judge_votes import judged_steps, sample_votes
from rla_jax.sampling.sampler import Sampler
from rla_jax.sampling.settings import SamplingParams


@dataclasses.dataclass
class Judgements:
  """m judgements of every step. scores: [N, K, m] in {+1, -1, 0}
  (0 = unparseable; padded steps are 0); mask: [N, K] real steps.
  prompt_ids / response_ids / logprobs are indexed [n][k][j]."""

  scores: np.ndarray
  mask: np.ndarray
  prompt_ids: list[list[list[int]]]
  response_ids: list[list[list[list[int]]]]
  logprobs: list[list[list[np.ndarray]]]
  response_texts: list[list[list[str]]]


def judge_episodes(
  episodes: Sequence[Episode],
  sampler: Sampler,
  tokenizer,
  *,
  m: int,
  seed: int,
  params: SamplingParams,
  batch_size: int = 64,
  include: Sequence[bool] | None = None,
  chosen: np.ndarray | None = None,
  progress: ProgressFn | None = None,
) -> Judgements:
  """Samples m judgements for every step of every episode (or of the
  episodes with include[n] true, and only their steps with chosen[n, k]
  true; the others get mask False and score 0); progress, if given, is
  told after every sampler call how many of the judged steps are done."""
  if include is not None and len(include) != len(episodes):
    raise ValueError(
      f"judge_episodes: {len(include)} include flags for "
      f"{len(episodes)} episodes"
    )
  num_steps = [e.num_steps for e in episodes]
  jobs, mask = judged_steps(num_steps, include, chosen)
  prompt_ids = [[None] * s for s in num_steps]
  for n, k in jobs:
    e = episodes[n]
    text = agent_text.judge_step_text(
      e.prompt_texts[k], e.response_texts[k], e.observations[k + 1]
    )
    prompt_ids[n][k] = agent_text.chat_ids(tokenizer, text)
  # Similar lengths share a call (less padding).
  jobs.sort(key=lambda nk: len(prompt_ids[nk[0]][nk[1]]))
  votes = sample_votes(
    sampler,
    tokenizer,
    prompt_ids,
    jobs,
    num_steps,
    m=m,
    seed=seed,
    params=params,
    batch_size=batch_size,
    progress=progress,
  )
  return Judgements(
    votes.scores,
    mask,
    prompt_ids,
    votes.response_ids,
    votes.logprobs,
    votes.response_texts,
  )
