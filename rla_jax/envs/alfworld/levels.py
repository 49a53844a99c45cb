"""Difficulty levels of generated ALFWorld games.

A level fixes which task types a game may have, how many receptacles its
room holds, whether its targets may start inside closed receptacles and how
many kinds of distractor objects lie around. The generator draws games at a
level (`generator.generate_game(level=...)`); `game_level` classifies any
game, generated, perturbed or loaded, so adaptation can move tasks along
this axis (`level_moves`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rla_jax.envs.alfworld.game import Game
from rla_jax.envs.alfworld.types_tables import (
  OPENABLE_RECEPTACLES,
  TASK_TYPE_NAMES,
)

_SIMPLE_TYPES = ("look_at_obj_in_light", "pick_and_place_simple")
_TREATMENT_TYPES = (
  "pick_clean_then_place_in_recep",
  "pick_cool_then_place_in_recep",
  "pick_heat_then_place_in_recep",
)


@dataclasses.dataclass(frozen=True)
class Level:
  """A difficulty level of generated games (`LEVELS`).

  task_types: the ALFWorld task types a game of this level may have.
  receptacles: (lo, hi) receptacles in the room (one of each type), or None
    for the scene's full ALFRED-like layout.
  closed_sources: whether the target object (and the lamp) may start inside
    a closed (openable) receptacle.
  distractor_types: (lo, hi) kinds of distractor objects.
  """

  task_types: tuple[str, ...]
  receptacles: tuple[int, int] | None
  closed_sources: bool
  distractor_types: tuple[int, int]


#: Difficulty levels, easiest first. Each level's types include the lower
#: levels' types, so a game can move one level up or down and keep its type
#: where that level has it.
LEVELS = {
  1: Level(_SIMPLE_TYPES, (3, 4), False, (1, 2)),
  2: Level(_SIMPLE_TYPES, (5, 7), True, (2, 3)),
  3: Level(_SIMPLE_TYPES + _TREATMENT_TYPES, (4, 7), True, (2, 3)),
  4: Level(TASK_TYPE_NAMES, None, True, (6, 12)),
}


def check_level(level) -> int:
  """`level` as a key of LEVELS, else ValueError naming the known levels."""
  if isinstance(level, bool) or not isinstance(level, (int, np.integer)):
    raise ValueError(f"level {level!r} must be one of {sorted(LEVELS)}")
  if int(level) not in LEVELS:
    raise ValueError(f"level {level!r} must be one of {sorted(LEVELS)}")
  return int(level)


def game_level(game: Game) -> int:
  """The lowest level whose rules admit `game` (its type, receptacle count and
  whether a target starts in a closed receptacle); 4 if none smaller does.

  Perturbed and loaded games have a level too, so adaptation can move any
  task along this axis.
  """
  n_recs = len(game.receptacles)
  rec_type = {r: t for r, t, _ in game.receptacles}
  wanted = {game.object_target, game.toggle_target} - {""}
  obj_type = dict(game.objects)
  closed_start = any(
    fact[0] == "inReceptacle"
    and obj_type.get(fact[1]) in wanted
    and rec_type.get(fact[2]) in OPENABLE_RECEPTACLES
    for fact in game.facts
  )
  for number in sorted(LEVELS):
    rules = LEVELS[number]
    if rules.receptacles is None:
      return number
    lo, hi = rules.receptacles
    if (
      game.task_type in rules.task_types
      and n_recs <= hi
      and (rules.closed_sources or not closed_start)
    ):
      return number
  return max(LEVELS)
