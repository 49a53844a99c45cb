"""Warm-start configuration: defaults, validation and a stable hash.

Fields (all have working defaults, see `default_warmstart_config`):

  seed                 master seed (games, noise, init, batches, sampling)
  room_size            "small" | "full" (ALFWorld generator room size)
  levels               generator difficulty levels of the games (a list of
                       LEVELS keys; [] = room_size's games)
  history_steps        H of the policy prompt's history window (the RL loop
                       must use the same value)
  max_demo_steps       step cap of demonstration rollouts
  vocab_size           BPE vocabulary size (incl. 3 specials and 256 bytes)
  num_pretrain_games   train games whose noisy rollouts feed the tokenizer
                       corpus and the copy drills' candidate lists
  num_demo_episodes    noisy-expert episodes (one per train game) whose
                       expert targets form the policy SFT set
  demo_epsilon         probability of a random admissible action in demos
  demo_verb_balance    alpha in [0, 1]: policy SFT examples are repeated
                       (f_max / f_verb) ** alpha times, f_verb the share of
                       the expert's verb (go, take, clean, ...); 0 = off
  policy_answer        the policy's SFT answer: "choice_line" ("I choose k)
                       <command>. \\boxed{k}"), "index" ("\\boxed{k}" only) or
                       "command_index" ("I will <command>. \\boxed{k}"; its
                       copy drills teach the command -> index lookup)
  demo_expert          the demonstrator: "search" (searches for hidden objects
                       through the room listing, so every choice can be read
                       off the prompt), "search_lowest" (search, and ties
                       between equal objects or receptacles go to the lowest
                       instance number, not the oracle's hidden order) or
                       "oracle" (knows where everything is)
  model.*              Qwen3 shapes (hidden_size, intermediate_size,
                       num_layers, num_heads, num_kv_heads, head_dim,
                       rope_theta, tie_word_embeddings)
  drill.*              copy-drill pretraining of the policy base:
                       steps, batch_size, learning_rate, num_queries
                       (steps = 0 disables it)
  policy_sft.*         steps, batch_size, learning_rate, prompt_weight,
                       answer_weight (loss weight of the boxed index tokens),
                       length_multiple (padded lengths: fewer compiles vs
                       less padding); eval_every > 0 probes success on
                       eval_games valid_seen games every eval_every steps
                       and stops once it reaches target_success;
                       stop_after > 0 stops after that many steps of the
                       `steps`-step schedule
  num_rm_episodes      noisy episodes providing judge examples
  rm_epsilon           their random-action probability
  num_rm_examples      judge SFT examples
  rm_positive_share    their share of +1 (progress) steps before the label
                       noise: the judge's prior, 0.5 = balanced
  rm_label_noise       fraction of judge training targets flipped
  rm_init              "policy" (start from the SFT'd policy, which already
                       reads the game text), "drill" (the drill-pretrained
                       base) or "scratch" (random init)
  rm_sft.*             as policy_sft; eval_every > 0 probes the judge on the
                       policy's steps in eval.judge_games valid_unseen games
                       and stops once its balanced accuracy is within
                       target_balanced [lo, hi] and its +1 vote rate within
                       0.15 of the +1 label share
  eval.*               num_games (valid_seen), max_steps, temperature,
                       greedy, batch_size, rm_max_steps (judge eval cap),
                       judge_games (valid_unseen games whose policy steps
                       probe and score the judge)
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from rla_jax.envs.alfworld.levels import check_level
from rla_jax.errors import ConfigError
from rla_jax.rl import agent_text
from rla_jax.warmstart.demos import EXPERTS

_DEFAULTS: dict[str, Any] = {
  "seed": 0,
  "room_size": "small",
  "levels": [],
  "history_steps": 2,
  "max_demo_steps": 40,
  "vocab_size": 1024,
  "num_pretrain_games": 150,
  "num_demo_episodes": 120,
  "demo_epsilon": 0.3,
  "demo_verb_balance": 0.0,
  "demo_expert": "oracle",
  "policy_answer": "choice_line",
  "model": {
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_layers": 4,
    "num_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 32,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
  },
  "drill": {
    "steps": 300,
    "batch_size": 16,
    "learning_rate": 3e-3,
    "num_queries": 8,
    "length_multiple": 128,
  },
  "policy_sft": {
    "steps": 200,
    "batch_size": 16,
    "learning_rate": 2e-3,
    "prompt_weight": 0.1,
    "answer_weight": 3.0,
    "length_multiple": 128,
    "eval_every": 0,
    "eval_games": 32,
    "target_success": 1.0,
    "stop_after": 0,
  },
  "num_rm_episodes": 120,
  "rm_epsilon": 0.5,
  "num_rm_examples": 400,
  "rm_positive_share": 0.5,
  "rm_label_noise": 0.1,
  "rm_init": "drill",
  "rm_sft": {
    "steps": 100,
    "batch_size": 8,
    "learning_rate": 2e-3,
    "prompt_weight": 0.05,
    "answer_weight": 3.0,
    "length_multiple": 128,
    "eval_every": 0,
    "target_balanced": [0.0, 1.0],
  },
  "eval": {
    "num_games": 16,
    "max_steps": 50,
    "temperature": 0.8,
    "greedy": False,
    "batch_size": 16,
    "rm_max_steps": 96,
    "judge_games": 16,
  },
}


def default_warmstart_config() -> dict[str, Any]:
  """The tuned defaults (a fresh nested dict; edit freely)."""
  return copy.deepcopy(_DEFAULTS)


def _plain(cfg) -> dict:
  if hasattr(cfg, "to_dict"):  # ml_collections.ConfigDict
    cfg = cfg.to_dict()
  if not isinstance(cfg, dict):
    raise TypeError(
      f"warm-start config must be a dict or ConfigDict, got "
      f"{type(cfg).__name__}"
    )
  return cfg


def resolve_config(cfg=None) -> dict[str, Any]:
  """Defaults overridden by `cfg` (nested dicts merge key by key).

  Unknown keys and bad values raise ConfigError naming the key (catches
  typos early).
  """
  out = _merge_overrides(default_warmstart_config(), _plain(cfg or {}))
  _check_room_size(out)
  out["levels"] = _checked_levels(out["levels"])
  _check_choices(out)
  _check_shares(out)
  _check_counts(out)
  return out


def _merge_overrides(out: dict[str, Any], overrides: dict) -> dict[str, Any]:
  """`out` updated in place by `overrides`, nested dicts key by key;
  ConfigError for a key `out` lacks."""
  for key, value in overrides.items():
    if key not in out:
      raise ConfigError(
        f"warm-start config: unknown key {key!r}; known: {sorted(out)}"
      )
    if isinstance(out[key], dict):
      _merge_section(out[key], key, _plain(value))
    else:
      out[key] = value
  return out


def _merge_section(section: dict, name: str, overrides: dict) -> None:
  """Nested field `name`'s dict updated in place by `overrides`; ConfigError
  for a sub-key it lacks."""
  for sub, value in overrides.items():
    if sub not in section:
      raise ConfigError(
        f"warm-start config: unknown key {name}.{sub}; known: {sorted(section)}"
      )
    section[sub] = value


def _check_room_size(out: dict[str, Any]) -> None:
  """ConfigError unless room_size is "small" or "full"."""
  if out["room_size"] not in ("small", "full"):
    raise ConfigError(
      f"warm-start config: room_size must be 'small' or "
      f"'full', got {out['room_size']!r}"
    )


def _checked_levels(levels) -> list:
  """The levels, each checked by `check_level`; ConfigError for a bad one."""
  try:
    return [check_level(level) for level in levels]
  except (TypeError, ValueError) as e:
    raise ConfigError(f"warm-start config: levels: {e}") from e


def _check_choices(out: dict[str, Any]) -> None:
  """ConfigError unless demo_expert, policy_answer and rm_init each name
  one of their known options."""
  if out["demo_expert"] not in EXPERTS:
    raise ConfigError(
      f"warm-start config: demo_expert must be one of "
      f"{sorted(EXPERTS)}, got {out['demo_expert']!r}"
    )
  if out["policy_answer"] not in agent_text.ANSWER_FORMATS:
    raise ConfigError(
      f"warm-start config: policy_answer must be one of "
      f"{agent_text.ANSWER_FORMATS}, got {out['policy_answer']!r}"
    )
  if out["rm_init"] not in ("policy", "drill", "scratch"):
    raise ConfigError(
      f"warm-start config: rm_init must be 'policy', 'drill' "
      f"or 'scratch', got {out['rm_init']!r}"
    )


def _check_shares(out: dict[str, Any]) -> None:
  """ConfigError unless rm_positive_share is in (0, 1) and
  demo_verb_balance in [0, 1]."""
  if not 0.0 < float(out["rm_positive_share"]) < 1.0:
    raise ConfigError(
      f"warm-start config: rm_positive_share must be in (0, 1), "
      f"got {out['rm_positive_share']!r}"
    )
  if not 0.0 <= float(out["demo_verb_balance"]) <= 1.0:
    raise ConfigError(
      f"warm-start config: demo_verb_balance must be in [0, 1], "
      f"got {out['demo_verb_balance']!r}"
    )


_COUNT_FIELDS = (
  "num_pretrain_games",
  "num_demo_episodes",
  "num_rm_episodes",
  "num_rm_examples",
)


def _check_counts(out: dict[str, Any]) -> None:
  """ConfigError unless every _COUNT_FIELDS field is at least 1."""
  for key in _COUNT_FIELDS:
    if int(out[key]) < 1:
      raise ConfigError(
        f"warm-start config: {key} must be >= 1, got {out[key]}"
      )


def text_formats() -> dict[str, str]:
  """The prompt and answer formats the warm start trains on, rendered for a
  toy step: part of the cache key, so a format change rebuilds the cache."""
  step = agent_text.policy_step_text(["o0", "o1"], ["a0"], ["a1", "b 2"], 1)
  answer = agent_text.policy_response_text("b 2", 1)
  return {
    "policy_prompt": step,
    "policy_answer": answer,
    "judge_prompt": agent_text.judge_step_text(step, answer, "o2"),
    "judge_answer": agent_text.judge_response_text(-1),
  }


def config_hash(cfg: dict[str, Any]) -> str:
  """sha256 of the resolved config's canonical JSON and the text formats."""
  key = {"config": cfg, "formats": text_formats()}
  return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


# The settings only the judge stage (and the final judge measurements) read:
# the data's judge set is drawn after every demonstration, and the judge's
# probe games are a split of their own, so these change neither the
# tokenizer nor the drill and policy stages.
JUDGE_FIELDS = (
  "rm_init",
  "num_rm_examples",
  "rm_positive_share",
  "rm_label_noise",
  "rm_sft",
)
JUDGE_EVAL_FIELDS = ("rm_max_steps", "judge_games")


def policy_stages_hash(cfg: dict[str, Any]) -> str:
  """The key of the stages before the judge's (drill, policy SFT): the
  config hash of `cfg` without JUDGE_FIELDS and eval's JUDGE_EVAL_FIELDS."""
  rest = {k: v for k, v in cfg.items() if k not in JUDGE_FIELDS}
  rest["eval"] = {
    k: v for k, v in cfg["eval"].items() if k not in JUDGE_EVAL_FIELDS
  }
  return config_hash(rest)
