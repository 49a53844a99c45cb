"""Environment adaptation along the generator's difficulty levels (`LEVELS`).

The level counterpart of `perturb_game`: instead of editing a game, it draws
a fresh game one level up or down, of the same task type where that level
has it, in the same room kind and, where the split may use it, the same scene
(room template). Levels are measured by `game_level` (the lowest level whose
rules admit a game), so a move always changes that measure: a level whose
games of a type are all admitted by a lower level (level 3's pick-and-place
and look-at-light games, 4-7 receptacles, are level-2 games) is skipped.
Everything is drawn from the ``rng`` passed in.
"""

from __future__ import annotations

import numpy as np

from rla_jax.envs.alfworld.game import Game
from rla_jax.envs.alfworld.generator import generate_valid_game
from rla_jax.envs.alfworld.levels import LEVELS, check_level, game_level
from rla_jax.envs.alfworld.perturb import DIRECTIONS
from rla_jax.envs.alfworld.rooms import SPLITS, split_scenes
from rla_jax.envs.alfworld.types_tables import VALID_ROOMS

#: Scenes of the room kind drawn from the split after the game's own scene.
PLACE_TRIES = 4


def classifies_at(task_type: str, level: int) -> bool:
  """Whether a `task_type` game generated at `level` can have that
  `game_level`: the level has the type and no lower level with the type
  admits every receptacle count and closed start the level allows."""
  rules = LEVELS[check_level(level)]
  if task_type not in rules.task_types:
    return False
  if rules.receptacles is None:
    return True
  return not any(
    task_type in low.task_types
    and low.receptacles is not None
    and low.receptacles[1] >= rules.receptacles[1]
    and (low.closed_sources or not rules.closed_sources)
    for k, low in LEVELS.items()
    if k < level
  )


def _level_task_type(game: Game, level: int, rng: np.random.Generator) -> str:
  """The game's type if `level` has it, else one of the level's types drawn
  among those with games in the game's room kind (any, if none has), those
  that classify at the level first."""
  types = LEVELS[level].task_types
  if game.task_type in types:
    return game.task_type
  fits = [t for t in types if game.room in VALID_ROOMS[t]] or list(types)
  fits = [t for t in fits if classifies_at(t, level)] or fits
  return fits[int(rng.integers(len(fits)))]


def level_variant(
  game: Game, level: int, rng: np.random.Generator, split: str = "train"
) -> Game | None:
  """A fresh valid game generated at `level` (`generate_valid_game`) in
  `game`'s room kind (when its task type has games there, else drawn).

  Task type: `_level_task_type`. Scene: `game`'s own when `split` may use it
  (`split_scenes`: a held-out scene never enters the train split), then up
  to PLACE_TRIES scenes of the room kind drawn from the split. The first
  game whose `game_level` is `level` wins; where none is (or the type never
  classifies at the level, `classifies_at`), the first valid game, which
  classifies lower; None if no place yields a valid game. Seed material
  comes from ``rng.integers``.
  """
  level = check_level(level)
  if split not in SPLITS:
    raise ValueError(f"split {split!r} is not one of {SPLITS}")
  task_type = _level_task_type(game, level, rng)
  room = game.room if game.room in VALID_ROOMS[task_type] else None
  own = room is not None and game.scene in split_scenes(split, room)
  scenes = ([game.scene] if own else []) + [None] * PLACE_TRIES
  seeds = rng.integers(2**31 - 1, size=len(scenes))
  exact = classifies_at(task_type, level)
  fallback = None
  for scene, seed in zip(scenes, seeds, strict=True):
    try:
      variant = generate_valid_game(
        split, 0, int(seed), task_type, level=level, room=room, scene=scene
      )
    except RuntimeError:
      continue
    if not exact or game_level(variant) == level:
      return variant
    if fallback is None:
      fallback = variant
  return fallback


def level_target(game: Game, direction: str) -> int | None:
  """The level a `direction` move of `game` aims at, None if none.

  harder: the lowest level above ``game_level(game)`` at which its type
  classifies (`classifies_at`; 2 -> 4 for the simple types), None at the
  top. easier: the highest such level below it, else the level just below
  (where a type of that level is drawn), None at level 1.
  """
  if direction not in DIRECTIONS:
    raise ValueError(f"direction {direction!r} is not one of {DIRECTIONS}")
  now = game_level(game)
  if direction == "harder":
    up = [k for k in sorted(LEVELS) if k > now]
    return next((k for k in up if classifies_at(game.task_type, k)), None)
  down = [k for k in sorted(LEVELS, reverse=True) if k < now]
  same = (k for k in down if classifies_at(game.task_type, k))
  return next(same, down[0] if down else None)


def level_move(
  game: Game, direction: str, rng: np.random.Generator, split: str = "train"
) -> Game | None:
  """`game` moved one level `direction` (`level_target`) as a fresh
  same-room game (`level_variant`); None at the end of the scale or when no
  variant's `game_level` lies above (harder) / below (easier) the game's."""
  target = level_target(game, direction)
  if target is None:
    return None
  variant = level_variant(game, target, rng, split)
  if variant is None:
    return None
  moved = game_level(variant) - game_level(game)
  ok = moved > 0 if direction == "harder" else moved < 0
  return variant if ok else None
