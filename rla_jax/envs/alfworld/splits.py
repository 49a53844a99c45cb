"""The games of a split: how many of each ALFWorld task type (and level) a
split holds, drawn in a seeded order, and generated (`generate_split`).

Each game itself comes from `rla_jax.envs.alfworld.generator`
(`generate_valid_game`); the task-type counts follow ALFWorld's split
proportions (`types_tables.SPLIT_QUOTAS`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rla_jax.envs.alfworld.game import Game
from rla_jax.envs.alfworld.generator import generate_valid_game
from rla_jax.envs.alfworld.levels import LEVELS, check_level
from rla_jax.envs.alfworld.rooms import ROOM_SIZES, SPLIT_CODES, SPLITS
from rla_jax.envs.alfworld.types_tables import (
  DEFAULT_SPLIT_SIZES,
  SPLIT_QUOTAS,
  TASK_TYPE_NAMES,
)


def check_task_types(task_types) -> tuple[str, ...] | None:
  """``None`` (all six ALFWorld task types) or a non-empty tuple of known names,
  else ValueError."""
  if task_types is None:
    return None
  names = tuple(task_types)
  unknown = [t for t in names if t not in TASK_TYPE_NAMES]
  if not names or unknown or len(set(names)) != len(names):
    raise ValueError(
      f"task_types {names!r}: need distinct names from {TASK_TYPE_NAMES}"
    )
  return names


def split_task_types(
  split: str,
  num_games: int,
  seed: int,
  task_types: tuple[str, ...] | None = None,
) -> list[str]:
  """Task type of each game: exact ALFWorld proportions (largest remainder) in a
  seeded order.

  With ``task_types``, only those types are drawn, in their ALFWorld proportions
  among themselves (``None``: all six, the ALFWorld mix).
  """
  keep = check_task_types(task_types)
  quotas = np.asarray(
    [
      q if keep is None or t in keep else 0
      for t, q in zip(TASK_TYPE_NAMES, SPLIT_QUOTAS[split], strict=True)
    ],
    dtype=np.float64,
  )
  exact = quotas / quotas.sum() * num_games
  counts = np.floor(exact).astype(int)
  order = sorted(range(len(counts)), key=lambda i: (-(exact[i] - counts[i]), i))
  for i in order[: num_games - int(counts.sum())]:
    counts[i] += 1
  types = [
    t
    for t, c in zip(TASK_TYPE_NAMES, counts, strict=True)
    for _ in range(int(c))
  ]
  perm = np.random.default_rng([seed, SPLIT_CODES[split], 0x7A5C]).permutation(
    len(types)
  )
  return [types[int(i)] for i in perm]


def _leveled_types(split, num_games, seed, task_types, levels):
  """(task type, level) of each game of a split drawn from ``levels``."""
  levels = [check_level(level) for level in levels]
  if not levels:
    raise ValueError("levels must name at least one level")
  allowed = {t for level in levels for t in LEVELS[level].task_types}
  keep = check_task_types(task_types)
  names = tuple(
    t for t in TASK_TYPE_NAMES if t in allowed and (keep is None or t in keep)
  )
  if not names:
    raise ValueError(
      f"levels {levels} have none of the task types {task_types!r}"
    )
  types = split_task_types(split, num_games, seed, names)
  out = []
  for i, task_type in enumerate(types):
    order = levels[i % len(levels) :] + levels[: i % len(levels)]
    out.append(next(lv for lv in order if task_type in LEVELS[lv].task_types))
  return types, out


def generate_split(
  split: str,
  num_games: int | None = None,
  seed: int = 0,
  data_dir: str | None = None,
  room_size: str = "full",
  task_types: tuple[str, ...] | None = None,
  levels: Sequence[int] | None = None,
) -> list[Game]:
  """Generate ``num_games`` games of a split (defaults: valid_seen 140,
  valid_unseen 134).

  ``split`` in {"train", "valid_seen", "valid_unseen"}; ``room_size`` in
  {"small" (3-6 receptacles, few objects), "full" (ALFRED-like counts)}.
  Per-task-type counts follow ALFWorld's split proportions. With ``data_dir``
  the games are also written as ALFWorld folders (``write_game``).
  ``task_types`` restricts the draw to those types (``split_task_types``).
  ``levels`` (keys of LEVELS; overrides ``room_size``): game i has level
  ``levels[i % len(levels)]``, raised to the first later listed level that has
  its task type; task types are drawn among the listed levels' types (and
  ``task_types``, if given). Deterministic in all arguments.
  """
  if split not in SPLITS:
    raise ValueError(f"split {split!r} is not one of {SPLITS}")
  if room_size not in ROOM_SIZES:
    raise ValueError(f"room_size {room_size!r} is not one of {ROOM_SIZES}")
  if num_games is None:
    if split not in DEFAULT_SPLIT_SIZES:
      raise ValueError("num_games is required for the train split")
    num_games = DEFAULT_SPLIT_SIZES[split]
  if num_games < 0:
    raise ValueError(f"num_games must be >= 0, got {num_games}")
  if levels is None:
    types = split_task_types(split, num_games, seed, task_types)
    game_levels = [None] * len(types)
  else:
    types, game_levels = _leveled_types(
      split, num_games, seed, task_types, levels
    )
  games = [
    generate_valid_game(split, i, seed, t, room_size, level)
    for i, (t, level) in enumerate(zip(types, game_levels, strict=True))
  ]
  if data_dir is not None:
    from rla_jax.envs.alfworld.pddl_io import write_game

    for g in games:
      write_game(g, data_dir, split)
  return games
