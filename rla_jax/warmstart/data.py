"""The warm start's data: seeded games, demonstrations and examples.

Everything is a deterministic function of the resolved warm-start config, so
a resumed build regenerates exactly the data its saved stages were trained
on.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from rla_jax.envs.alfworld import Game, describe_game_for_proposal
from rla_jax.envs.alfworld.splits import generate_split
from rla_jax.rl import agent_text, prompts
from rla_jax.warmstart import demos, drills


@dataclasses.dataclass
class WarmStartData:
  """Games and examples of one build.

  games: train games (demonstrations and the tokenizer corpus);
  select_games: valid_seen games probed during policy SFT (early stop);
  judge_games: valid_unseen games the SFT'd policy plays, whose steps probe
    the judge (as the loop scores it on the base policy's OOD episodes);
  eval_games: valid_seen games of the final report;
  demo_eps / rm_eps / extra_eps: noisy demonstrations (policy SFT, judge
    SFT, tokenizer and drills only); heldout_eps: noisy demonstrations of
    eval_games (choice accuracy, held-out judge steps);
  pol_ex: policy examples; judge_pool: every judge example of rm_eps;
    judge_ex: the balanced, label-noised judge SFT set; heldout_judge: a
    balanced, noise-free judge set from heldout_eps.
  """

  games: list[Game]
  select_games: list[Game]
  judge_games: list[Game]
  eval_games: list[Game]
  demo_eps: list[demos.Episode]
  rm_eps: list[demos.Episode]
  extra_eps: list[demos.Episode]
  heldout_eps: list[demos.Episode]
  pol_ex: list[demos.TextExample]
  judge_pool: list[demos.TextExample]
  judge_ex: list[demos.TextExample]
  heldout_judge: list[demos.TextExample]

  def summary(self) -> dict:
    """Counts for the report (games, episodes, examples, expert verbs)."""
    verbs = collections.Counter(
      e.split()[0] for ep in self.demo_eps for e in ep.expert if e is not None
    )
    return {
      "train_games": len(self.games),
      "select_games": len(self.select_games),
      "judge_games": len(self.judge_games),
      "eval_games": len(self.eval_games),
      "demo_episodes": len(self.demo_eps),
      "rm_episodes": len(self.rm_eps),
      "policy_examples": len(self.pol_ex),
      "judge_examples": len(self.judge_ex),
      "judge_positive_share": float(
        np.mean([e.label > 0 for e in self.judge_pool])
      )
      if self.judge_pool
      else 0.0,
      "demo_verbs": dict(sorted(verbs.items())),
    }


def _split(cfg, split, num, seed) -> list[Game]:
  return generate_split(
    split,
    num,
    seed=seed,
    room_size=cfg["room_size"],
    levels=cfg["levels"] or None,
  )


def make_data(cfg: dict) -> WarmStartData:
  """All games and examples of a resolved warm-start config."""
  seed, H = int(cfg["seed"]), cfg["history_steps"]
  n_demo, n_rm = int(cfg["num_demo_episodes"]), int(cfg["num_rm_episodes"])
  ev = cfg["eval"]
  games = _split(
    cfg, "train", max(int(cfg["num_pretrain_games"]), n_demo + n_rm), seed
  )
  select_games = _split(
    cfg, "valid_seen", int(cfg["policy_sft"]["eval_games"]), seed + 101
  )
  judge_games = _split(cfg, "valid_unseen", int(ev["judge_games"]), seed + 202)
  eval_games = _split(cfg, "valid_seen", int(ev["num_games"]), seed)
  rng = np.random.default_rng([seed, 0xDE30])
  expert, cap = cfg["demo_expert"], cfg["max_demo_steps"]

  def rollouts(part, epsilon):
    return demos.noisy_expert_rollouts(part, epsilon, rng, cap, expert)

  demo_eps = rollouts(games[:n_demo], cfg["demo_epsilon"])
  rm_eps = rollouts(games[n_demo : n_demo + n_rm], cfg["rm_epsilon"])
  extra_eps = rollouts(games[n_demo + n_rm :], cfg["demo_epsilon"])
  heldout_eps = rollouts(eval_games, cfg["demo_epsilon"])
  answer = cfg["policy_answer"]
  judge_pool = demos.judge_examples(rm_eps, H, answer)
  judge_ex = demos.balance_and_corrupt(
    judge_pool,
    int(cfg["num_rm_examples"]),
    float(cfg["rm_label_noise"]),
    rng,
    float(cfg["rm_positive_share"]),
  )
  heldout_judge = demos.balance_and_corrupt(
    demos.judge_examples(heldout_eps, H, answer),
    int(ev["rm_max_steps"]),
    0.0,
    rng,
  )
  return WarmStartData(
    games=games,
    select_games=select_games,
    judge_games=judge_games,
    eval_games=eval_games,
    demo_eps=demo_eps,
    rm_eps=rm_eps,
    extra_eps=extra_eps,
    heldout_eps=heldout_eps,
    pol_ex=demos.policy_examples(demo_eps, H, answer),
    judge_pool=judge_pool,
    judge_ex=judge_ex,
    heldout_judge=heldout_judge,
  )


def tokenizer_corpus(data: WarmStartData) -> list[str]:
  """Tokenizer training texts: every prompt/response rendered for training,
  transcripts, and a few critic / task-proposal prompts (used by the loop)."""
  texts = [
    e.prompt_text + "\n" + e.response_text
    for e in data.pol_ex + data.judge_pool
  ]
  texts += [
    demos.transcript_text(ep)
    for ep in data.demo_eps + data.extra_eps + data.rm_eps
  ]
  for ep in data.rm_eps[:20]:
    texts.append(
      prompts.failure_summary_prompt(
        ep.game.task_text, ep.observations, ep.actions, [0], 50, 2
      )
    )
  for k, g in enumerate(data.games[:20]):
    texts.append(
      prompts.task_proposal_prompt(
        describe_game_for_proposal(g),
        [
          (0, "It looped."),
        ],
        ("harder", "easier")[k % 2],
        0.5,
        1,
        2,
      )
    )
  texts += [agent_text.judge_response_text(s) for s in (1, -1)]
  return texts


def policy_samples(tok, data: WarmStartData, cfg) -> list[tuple]:
  """Policy SFT samples; each example enters the pool `repeats` times."""
  weight = float(cfg["policy_sft"]["answer_weight"])
  repeats = demos.verb_balance_repeats(
    data.demo_eps, float(cfg["demo_verb_balance"])
  )
  out = []
  for e, r in zip(data.pol_ex, repeats, strict=True):
    sample = drills.boxed_answer_sample(
      tok, e.prompt_text, e.response_text, weight
    )
    out += [sample] * r
  return out
