"""Environment models: propose harder/easier
ALFWorld tasks from critic feedback.

Two implementations share one interface, chosen by config:
  * `LLMEnvModel`: prompted like the reference (section 6.2): it first
    summarises why each failed rollout failed (given the steps that all m
    judgements scored -1), then proposes the goal's two type tokens in
    \\boxed{A,B} over several attempts; the first attempt that yields a
    valid, solvable game wins. It is never trained.
  * `RuleBasedEnvModel`: uses the same feedback numerically: it draws
    perturbations (`perturb_game`) and a move one generator level up or
    down (`level_move`), and picks the variant that moves furthest in the
    requested direction, by (game_level, expert plan length), when the
    parent is far outside the [low, high] band (accuracy 0 or 1, or many
    high-risk steps), and the mildest change otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.envs.alfworld import (
  Game,
  apply_goal_tokens,
  describe_game_for_proposal,
  expert_plan,
  game_level,
  level_move,
  perturb_game,
)
from rla_jax.rl import agent_text, prompts
from rla_jax.rl.parsing import last_boxed
from rla_jax.rl.rewards import high_risk_steps


@dataclasses.dataclass
class Feedback:
  """Critic feedback about one task's rollouts at one RL step.

  accuracy: the task's rollout success rate; failed: [(rollout index,
  observations, actions, high-risk step indices)] for failed rollouts;
  summaries: [(rollout index, text)] filled by an LLM critic (may be empty).
  """

  accuracy: float
  failed: list[tuple[int, list[str], list[str], list[int]]]
  summaries: list[tuple[int, str]] = dataclasses.field(default_factory=list)

  @property
  def num_high_risk(self) -> int:
    return sum(len(f[3]) for f in self.failed)


def build_feedback(episodes, scores: np.ndarray) -> Feedback:
  """Feedback of one task from its episodes and their [N, K, m] scores."""
  failed = []
  for j, ep in enumerate(episodes):
    if not ep.won:
      risky = high_risk_steps(scores[j], ep.num_steps)
      failed.append((j, ep.observations, ep.actions, list(risky)))
  acc = float(np.mean([ep.won for ep in episodes])) if episodes else 0.0
  return Feedback(acc, failed)


class RuleBasedEnvModel:
  """Feedback-guided perturbation and level moves without an LLM.

  num_draws: perturbation draws per proposal; low / high: the adaptation
  band; level_moves: whether a game one generator level up / down (same
  type and room where possible, `level_move`) joins the candidates.
  """

  def __init__(
    self,
    num_draws: int = 6,
    low: float = 0.2,
    high: float = 0.8,
    level_moves: bool = True,
  ):
    self.num_draws, self.low, self.high = num_draws, low, high
    self.level_moves = level_moves

  def candidates(
    self, game: Game, direction: str, rng: np.random.Generator
  ) -> list[Game]:
    """Distinct valid variants of `game` for `direction`: `num_draws`
    perturbations, then the level move (in that order of `rng` use)."""
    variants = {}
    for _ in range(self.num_draws):
      v = perturb_game(game, direction, rng)
      if v is not None and v.game_id != game.game_id:
        variants[v.game_id] = v
    if self.level_moves:
      v = level_move(game, direction, rng)
      if v is not None and v.game_id != game.game_id:
        variants[v.game_id] = v
    return list(variants.values())

  def propose(
    self,
    game: Game,
    direction: str,
    feedback: Feedback,
    rng: np.random.Generator,
  ) -> Game | None:
    """One of `candidates`, ranked by (game_level, expert plan length): a
    level move outranks every same-level perturbation in its direction. Far
    outside the band (all fail / all succeed, or every failure has 3+
    all-negative steps) the strongest change, else the mildest."""
    variants = self.candidates(game, direction, rng)
    if not variants:
      return None
    ranked = sorted(
      variants,
      key=lambda v: (game_level(v), len(expert_plan(v) or []), v.game_id),
    )
    if direction == "easier":
      ranked.reverse()  # lowest level, shortest plans last
    extreme = feedback.accuracy in (0.0, 1.0) or (
      feedback.failed and feedback.num_high_risk >= len(feedback.failed) * 3
    )
    return ranked[-1] if extreme else ranked[0]


class LLMEnvModel:
  """The reference's prompted environment model on an rla_jax Sampler."""

  def __init__(
    self,
    sampler,
    tokenizer,
    *,
    attempts: int = 8,
    temperature: float = 0.8,
    top_p: float = 0.95,
    history_steps: int | None = None,
    max_steps: int = 40,
  ):
    self.sampler, self.tokenizer = sampler, tokenizer
    self.attempts, self.temperature, self.top_p = attempts, temperature, top_p
    self.history_steps, self.max_steps = history_steps, max_steps
    self.stats = {"summaries": 0, "attempts": 0, "parsed": 0, "valid": 0}

  def _sample(self, texts: Sequence[str], seed: int) -> list[str]:
    ids = [agent_text.chat_ids(self.tokenizer, t) for t in texts]
    out = self.sampler.generate(
      ids, seed=seed, temperature=self.temperature, top_p=self.top_p
    )
    return [
      self.tokenizer.decode(t, skip_special_tokens=True) for t in out.tokens
    ]

  def summarize(self, game: Game, feedback: Feedback, seed: int) -> None:
    """Fills feedback.summaries (one critic call per failed rollout)."""
    if not feedback.failed:
      return
    texts = [
      prompts.failure_summary_prompt(
        game.task_text,
        obs,
        acts,
        risky,
        self.max_steps,
        history_steps=self.history_steps,
      )
      for _, obs, acts, risky in feedback.failed
    ]
    replies = self._sample(texts, seed)
    feedback.summaries = [
      (f[0], last_boxed(r) or r.strip()[:200])
      for f, r in zip(feedback.failed, replies, strict=True)
    ]
    self.stats["summaries"] += len(replies)

  def propose(
    self,
    game: Game,
    direction: str,
    feedback: Feedback,
    rng: np.random.Generator,
  ) -> Game | None:
    seed = int(rng.integers(2**31 - 1))
    self.summarize(game, feedback, seed)
    texts = [
      prompts.task_proposal_prompt(
        describe_game_for_proposal(game),
        feedback.summaries,
        direction,
        feedback.accuracy,
        k + 1,
        self.attempts,
      )
      for k in range(self.attempts)
    ]
    for reply in self._sample(texts, seed + 1):
      self.stats["attempts"] += 1
      box = last_boxed(reply)
      if not box or "," not in box:
        continue
      a, b = [t.strip() for t in box.split(",", 1)]
      self.stats["parsed"] += 1
      try:
        variant = apply_goal_tokens(game, a, b)
      except ValueError:
        continue
      if variant.game_id != game.game_id:
        self.stats["valid"] += 1
        return variant
    return None
