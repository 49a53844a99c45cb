"""The judge's m votes per policy step, sampled in batched sampler calls:
what the ALFWorld and GUI judges share (their prompts differ)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.metrics.progress import ProgressFn
from rla_jax.rl.parsing import parse_boxed_score
from rla_jax.rl.seeds import derive_seed


@dataclasses.dataclass(frozen=True)
class Votes:
  """scores: [N, K, m] in {+1, -1, 0} (0 = unparseable; steps not judged
  are 0); response_ids / response_texts / logprobs: [n][k][j] (None where
  step k of episode n was not judged)."""

  scores: np.ndarray
  response_ids: list
  logprobs: list
  response_texts: list


def judged_steps(
  num_steps: Sequence[int],
  include: Sequence[bool] | None = None,
  chosen: np.ndarray | None = None,
) -> tuple[list[tuple[int, int]], np.ndarray]:
  """The steps to judge: jobs (n, k) for every step k of every episode n
  with include[n] (every episode where include is None) and chosen[n, k]
  (every step where chosen is None), episode by episode, and their mask
  [N, K] (K = the most steps, at least 1)."""
  mask = np.zeros((len(num_steps), max(list(num_steps) + [1])), bool)
  for n, steps in enumerate(num_steps):
    if include is None or include[n]:
      mask[n, :steps] = True
  if chosen is not None:
    mask &= np.asarray(chosen, bool)[:, : mask.shape[1]]
  jobs = [(int(n), int(k)) for n, k in zip(*np.nonzero(mask), strict=True)]
  return jobs, mask


def draw_step_columns(
  rows: Sequence[Sequence[int]],
  num_steps: Sequence[int],
  per_task: int,
  rng: np.random.Generator,
) -> np.ndarray:
  """[N, K] bool, the steps an RL step judges and trains on: for each task
  group (rows[i]: its episodes' indices), up to per_task step indices k
  drawn uniformly without replacement from 0..K_i - 1 (K_i its longest
  episode), marked for every episode of the group that reached k; every
  step when per_task is 0. Whole columns keep the step-index groups of
  `standardize_by_step_index` intact (K = the most steps, at least 1)."""
  mask = np.zeros((len(num_steps), max(list(num_steps) + [1])), bool)
  for group in rows:
    longest = max([num_steps[n] for n in group] + [0])
    if per_task == 0 or longest <= per_task:
      columns = np.arange(longest)
    else:
      columns = rng.choice(longest, size=per_task, replace=False)
    for n in group:
      mask[n, columns[columns < num_steps[n]]] = True
  return mask


def sample_votes(
  sampler,
  tokenizer,
  prompts: Sequence[Sequence],
  jobs: Sequence[tuple[int, int]],
  num_steps: Sequence[int],
  *,
  m: int,
  seed: int,
  params,
  batch_size: int,
  images: Sequence[Sequence] | None = None,
  progress: ProgressFn | None = None,
) -> Votes:
  """m votes of every job (n, k), in the order given: prompts[n][k] holds
  its prompt ids (and images[n][k] its images, where given); num_steps[n]
  is episode n's step count (N episodes, K = the most steps).

  Each sampler call takes max(1, batch_size // m) prompts, prefills each
  once and decodes its m votes from the shared cache, seeded
  derive_seed(seed, first job's index); `progress` is told after every call
  how many jobs are done."""
  N, K = len(num_steps), max(list(num_steps) + [1])
  scores = np.zeros((N, K, m), np.int32)
  resp_ids = [[[None] * m for _ in range(s)] for s in num_steps]
  resp_txt = [[[None] * m for _ in range(s)] for s in num_steps]
  lps = [[[None] * m for _ in range(s)] for s in num_steps]
  per_call = max(1, batch_size // m)
  for start in range(0, len(jobs), per_call):
    chunk = jobs[start : start + per_call]
    extra = (
      {} if images is None else {"images": [images[n][k] for n, k in chunk]}
    )
    out = sampler.generate(
      [prompts[n][k] for n, k in chunk],
      seed=derive_seed(seed, start),
      num_samples=m,
      **extra,
      **dataclasses.asdict(params),
    )
    for i, (n, k) in enumerate(chunk):
      for j in range(m):
        toks, lp = out.tokens[i * m + j], out.logprobs[i * m + j]
        text = tokenizer.decode(toks, skip_special_tokens=True)
        scores[n, k, j] = parse_boxed_score(text)
        resp_ids[n][k][j], resp_txt[n][k][j], lps[n][k][j] = toks, text, lp
    if progress is not None:
      progress("judge", start + len(chunk), len(jobs), "steps judged")
  return Votes(scores, resp_ids, lps, resp_txt)
