"""The ALFWorld loop's games (`rla_jax.rl.alfworld_loop`): the training
slots and the two evaluation splits, generated from config.env (room
size, difficulty levels, task types) and the seeds."""

from __future__ import annotations

import ml_collections

from rla_jax.envs.alfworld import Game, generate_split
from rla_jax.envs.alfworld.splits import check_task_types
from rla_jax.errors import ConfigError

# The evaluation splits: in distribution, the training rooms' templates;
# out of distribution, unseen ones.
EVAL_SPLITS = {
  "in_distribution": "valid_seen",
  "out_of_distribution": "valid_unseen",
}


def parse_task_types(value: str) -> tuple[str, ...] | None:
  """config env.task_types: "all" (None: the ALFWorld mix of all six types)
  or comma-separated task-type names; ValueError naming the key otherwise."""
  if not isinstance(value, str):
    raise ConfigError(
      f"config env.task_types={value!r} must be a string: "
      f"'all' or comma-separated task types"
    )
  if value.strip() == "all":
    return None
  try:
    return check_task_types(t.strip() for t in value.split(","))
  except ValueError as e:
    raise ConfigError(f"config env.task_types={value!r}: {e}") from None


def _split(c: ml_collections.ConfigDict, split: str, n: int, seed: int):
  return generate_split(
    split,
    n,
    seed,
    room_size=c.env.room_size,
    task_types=parse_task_types(c.env.task_types),
    levels=list(c.env.levels) or None,
  )


def training_games(c: ml_collections.ConfigDict) -> list[Game]:
  """The env.num_slots games of the adaptive pool (seed c.seed)."""
  return _split(c, "train", c.env.num_slots, c.seed)


def evaluation_games(c: ml_collections.ConfigDict) -> dict[str, list[Game]]:
  """{split name: eval.num_games games (seed eval.seed)} of EVAL_SPLITS."""
  return {
    name: _split(c, split, c.eval.num_games, c.eval.seed)
    for name, split in EVAL_SPLITS.items()
  }
