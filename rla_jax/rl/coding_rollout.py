"""The coding loop's rollout records (`rla_jax.rl.coding_loop`): sampled
responses, their sandbox execution and one task's rollout."""

from __future__ import annotations

import dataclasses

import numpy as np

from rla_jax.rl.samples import Sample
from rla_jax.sampling.rows import SampleOutput


def sample_texts(
  tokenizer, sampler, prompt_ids, seed, section, num_samples=1
) -> tuple[SampleOutput, list[str]]:
  """(the sampler's output, num_samples decoded texts per prompt: row
  i * num_samples + j), sampled with a config section's temperature,
  top_p and greedy."""
  out = sampler.generate(
    prompt_ids,
    seed=seed,
    temperature=section.temperature,
    top_p=section.top_p,
    greedy=section.greedy,
    num_samples=num_samples,
  )
  texts = [tokenizer.decode(t, skip_special_tokens=True) for t in out.tokens]
  return out, texts


@dataclasses.dataclass(frozen=True)
class Response:
  """One sampled response: the prompt ids, the response token ids and
  their behaviour log-probs [len(tokens)]."""

  prompt_ids: list[int]
  tokens: list[int]
  logprobs: np.ndarray

  def sample(self, advantage: float) -> Sample:
    return Sample(self.prompt_ids, self.tokens, self.logprobs, advantage)


@dataclasses.dataclass(frozen=True)
class Execution:
  """One task's sandbox results: gt_pass bool [P, T] (program p passes
  ground-truth test t), gen_pass bool [P, U] (passes generated test u;
  False for invalid tests) and valid_tests bool [U] (test u parsed)."""

  gt_pass: np.ndarray
  gen_pass: np.ndarray
  valid_tests: np.ndarray


@dataclasses.dataclass(frozen=True)
class TaskRollout:
  """One task's rollout: programs [P] (None: no code found), generated
  tests [U] ((stdin, expected stdout), None: unparseable), the responses
  they were parsed from ([P], and [U] or [] without tests) and their
  execution."""

  programs: list[str | None]
  tests: list[tuple[str, str] | None]
  program_responses: list[Response]
  test_responses: list[Response]
  execution: Execution
