"""The coding setting's LLM environment model (reference section 6.3).

The reward model, prompted with a task, its accuracy, the per-test pass
rates of the policy's programs and the generated tests with theirs, writes
a harder or easier variant of the task (`render_task_proposal_prompt`,
`parse_task_proposal`). The rule-based alternative is the offline family's
`propose_variant`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rla_jax.envs.coding import (
  Task,
  parse_task_proposal,
  render_task_proposal_prompt,
)
from rla_jax.rl import agent_text
from rla_jax.rl.coding_rollout import TaskRollout, sample_texts

# The proposal prompts counted per RL step (`CodingLLMEnvModel.counts`).
PROMPT_COUNT_KEYS = ("without_tests", "too_long")


@dataclasses.dataclass(frozen=True)
class ProposalRequest:
  """What the env model is shown of one task group: its rollout (play), the
  task, the task it descends from (root; the task itself for an original),
  the direction ("harder" or "easier") and the group's accuracy."""

  play: TaskRollout
  task: Task
  root: Task
  direction: str
  accuracy: float


class CodingLLMEnvModel:
  """Proposes task variants with the reward model's sampler.

  `counts` tallies, since the last `reset_counts`, the proposal prompts
  that left the generated tests out to fit max_prompt_len
  ("without_tests") and the groups whose prompt did not fit even then
  ("too_long"); both are logged as env/proposal_prompts_<key>.
  """

  def __init__(
    self,
    sampler,
    tokenizer,
    sampling,
    *,
    attempts: int,
    max_prompt_len: int,
    log: Callable[[str], None],
  ):
    self.sampler = sampler
    self.tokenizer = tokenizer
    self.sampling = sampling  # a config section: temperature, top_p, greedy
    self.attempts = attempts
    self.max_prompt_len = max_prompt_len
    self.log = log
    self.reset_counts()

  def reset_counts(self) -> None:
    self.counts = dict.fromkeys(PROMPT_COUNT_KEYS, 0)

  def propose(
    self, request: ProposalRequest, seed_of_attempt: Callable[[int], int]
  ) -> Task | None:
    """A variant of request.task in request.direction, or None: up to
    `attempts` samples (seed `seed_of_attempt(attempt)`), the first that
    parses."""
    ids = self.prompt_ids(request)
    if ids is None:
      return None
    for attempt in range(self.attempts):
      _, texts = sample_texts(
        self.tokenizer,
        self.sampler,
        [ids],
        seed_of_attempt(attempt),
        self.sampling,
      )
      variant = parse_task_proposal(texts[0], request.task)
      if variant is not None:
        return variant
    return None

  def prompt_ids(self, request: ProposalRequest) -> list[int] | None:
    """The proposal prompt's ids: the reference's prompt with every valid
    generated test and its pass rate. When that exceeds max_prompt_len,
    the generated tests are left out; when even that does not fit, None
    (no proposal). Both cases are counted and logged, never silent."""
    ex, tests = request.play.execution, request.play.tests
    generated = [  # (stdin, expected stdout, pass rate) of every valid test
      (*test, float(ex.gen_pass[:, j].mean()))
      for j, test in enumerate(tests)
      if test is not None
    ]
    limit = self.max_prompt_len
    for shown in (generated, []) if generated else ([],):
      text = render_task_proposal_prompt(
        request.root,
        request.task,
        request.direction,
        request.accuracy,
        ex.gt_pass.mean(0).tolist(),
        shown,
      )
      ids = agent_text.chat_ids(self.tokenizer, text)
      if len(ids) <= limit:
        if generated and not shown:
          self.counts["without_tests"] += 1
        return ids
    self.counts["too_long"] += 1
    self.log(
      f"task {request.task.task_id}: the proposal prompt has {len(ids)} tokens "
      f"without generated tests, more than config.rollout.max_prompt_len="
      f"{limit}; no variant proposed"
    )
    return None
