"""Procedural ALFWorld game generator and the fixed, seeded evaluation splits.

Room templates are ALFRED-style scenes (kitchens 1-30, living rooms 201-230,
bedrooms 301-330, bathrooms 401-430); each scene has a fixed receptacle layout
drawn from its own seed. The last 5 scenes of every room are held out:
``valid_unseen`` uses only them, ``train`` and ``valid_seen`` only the others.
Games are drawn from ``np.random.default_rng([seed, split, index, attempt])``
and iterate only over sorted sequences, so output is byte-identical across runs,
machines and PYTHONHASHSEED values. A game is kept only if its goal is false at
the start and the expert solves it within 50 steps.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rla_jax.envs.alfworld.engine import CompiledGame
from rla_jax.envs.alfworld.expert import verified_plan
from rla_jax.envs.alfworld.game import Game, goal_sentence
from rla_jax.envs.alfworld.levels import LEVELS, Level, check_level
from rla_jax.envs.alfworld.rooms import (
  SPLIT_CODES,
  check_place,
  object_id,
  receptacle_id,
  scene_layout,
  split_scenes,
)
from rla_jax.envs.alfworld.types_tables import (
  CLEANABLE,
  COOLABLE,
  HEATABLE,
  LAMP_HOLDERS,
  OPENABLE_RECEPTACLES,
  ROOM_LAMPS,
  ROOM_OBJECTS,
  SLICEABLE,
  TASK_TYPE_NAMES,
  TOGGLEABLE,
  TREATMENT,
  VALID_ROOMS,
  can_contain,
)

_MAX_ATTEMPTS = 50


def task_text_for(
  task_type: str,
  obj: str,
  parent: str,
  toggle: str,
  template_index: int,
  tip: str = "",
) -> str:
  text = goal_sentence(task_type, obj, parent, toggle, template_index)
  return f"{text}. {tip}" if tip else text


def assemble_game(
  task_type: str,
  obj: str,
  parent: str,
  toggle: str,
  template_index: int,
  receptacles: list[tuple[str, str]],
  placements: list[tuple[str, str, str]],
  room: str,
  scene: int,
  tip: str = "",
) -> Game:
  """Build a Game: receptacles ``(id, type)``, objects
  ``(id, type, receptacle id)``; every receptacle gets its own location, the
  agent starts at ``loc_bar_0`` (no receptacle)."""
  recs = sorted(receptacles)
  loc = {r: f"loc_bar_{k + 1}" for k, (r, _) in enumerate(recs)}
  facts = [("openable", r) for r, t in recs if t in OPENABLE_RECEPTACLES]
  for o, t, r in sorted(placements):
    facts += [("inReceptacle", o, r), ("objectAtLocation", o, loc[r])]
    if t not in TOGGLEABLE:
      facts.append(("pickupable", o))
    for pred, types in (
      ("cleanable", CLEANABLE),
      ("heatable", HEATABLE),
      ("coolable", COOLABLE),
      ("sliceable", SLICEABLE),
      ("toggleable", TOGGLEABLE),
    ):
      if t in types:
        facts.append((pred, o))
  rtypes, otypes = (
    sorted({t for _, t in recs}),
    sorted({t for _, t, _ in placements}),
  )
  cc = tuple((r, o) for r in rtypes for o in otypes if can_contain(r, o))
  return Game(
    task_type=task_type,
    task_text=task_text_for(
      task_type, obj, parent, toggle, template_index, tip
    ),
    object_target=obj,
    parent_target=parent,
    toggle_target=toggle,
    objects=tuple(sorted((o, t) for o, t, _ in placements)),
    receptacles=tuple((r, t, loc[r]) for r, t in recs),
    agent_start="loc_bar_0",
    facts=tuple(sorted(facts)),
    can_contain=cc,
    room=room,
    scene=scene,
  )


class _Retry(Exception):
  """This attempt's draw cannot make a game; `generate_valid_game` tries the
  next attempt."""


def _choose(rng, seq):
  seq = list(seq)
  return seq[int(rng.integers(len(seq)))]


def _task_candidates(
  task_type: str, room: str, types: list[str]
) -> list[tuple[str, str, str]]:
  """Valid (obj, parent, toggle) triples for a room whose receptacle types are
  ``types``."""
  objs = [
    o
    for o in sorted(ROOM_OBJECTS[room])
    if any(can_contain(t, o) for t in types)
  ]
  if task_type == "look_at_obj_in_light":
    lamps = [
      lamp
      for lamp in ROOM_LAMPS[room]
      if any(h in types for h in LAMP_HOLDERS[lamp])
    ]
    return [(o, "", lamp) for lamp in lamps for o in objs]
  appliance, afford = TREATMENT.get(task_type, (None, None))
  if appliance is not None and appliance not in types:
    return []
  out = []
  for o in objs:
    if afford is not None and o not in afford:
      continue
    for p in types:
      sources = [
        t
        for t in types
        if can_contain(t, o)
        and t != p
        and not (task_type.startswith("pick_cool") and t == "Fridge")
      ]
      if can_contain(p, o) and p != appliance and sources:
        out.append((o, p, ""))
  return out


# Rules of games drawn without a level, by room size ("small": 3-6
# receptacles, few objects; anything else: the scene's full layout).
_SMALL_ROOM = Level(TASK_TYPE_NAMES, (3, 6), True, (1, 3))
_FULL_ROOM = Level(TASK_TYPE_NAMES, None, True, (6, 12))


@dataclasses.dataclass(frozen=True)
class _Target:
  """Where a game takes place and what its goal names: room kind, scene, the
  scene's receptacle counts and the goal's object / parent / toggle types."""

  task_type: str
  room: str
  scene: int
  layout: dict[str, int]
  obj: str
  parent: str
  toggle: str


def _seeded_rng(
  split: str, index: int, seed: int, attempt: int, level: int | None
) -> np.random.Generator:
  """The game's generator, seeded with ``[seed, split, index, attempt]`` (plus
  ``level`` when given; ValueError for an unknown level)."""
  material = [seed, SPLIT_CODES[split], index, attempt]
  if level is not None:
    material.append(check_level(level))
  return np.random.default_rng(material)


def _game_rules(task_type: str, room_size: str, level: int | None) -> Level:
  """The rules the game follows: its level's (ValueError if that level has no
  ``task_type`` games), else those of its room size."""
  if level is None:
    return _SMALL_ROOM if room_size == "small" else _FULL_ROOM
  rules = LEVELS[check_level(level)]
  if task_type not in rules.task_types:
    raise ValueError(f"level {level} has no {task_type} games")
  return rules


def _choose_target(
  rng, split: str, task_type: str, room: str | None, scene: int | None
) -> _Target:
  """The room kind and scene (drawn unless given) and goal types drawn among
  those the scene's layout allows (_Retry if there are none)."""
  room = _choose(rng, VALID_ROOMS[task_type]) if room is None else room
  scene = _choose(rng, split_scenes(split, room)) if scene is None else scene
  layout = dict(scene_layout(room, scene))
  cands = _task_candidates(task_type, room, sorted(layout))
  if not cands:
    raise _Retry()
  obj, parent, toggle = _choose(rng, cands)
  return _Target(task_type, room, scene, layout, obj, parent, toggle)


def _may_start_in(rtype: str, closed_sources: bool) -> bool:
  """Whether a target or lamp may start in a ``rtype`` receptacle: a closed
  (openable) one only with ``closed_sources``."""
  return closed_sources or rtype not in OPENABLE_RECEPTACLES


def _source_ok(target: _Target, rtype: str, closed_sources: bool) -> bool:
  """Whether the target object may start in a ``rtype`` receptacle: never a
  goal-type one (goal false at t=0), a closed one only if ``closed_sources``."""
  if not can_contain(rtype, target.obj) or rtype == target.parent:
    return False
  if target.task_type == "pick_cool_then_place_in_recep" and rtype == "Fridge":
    return False
  return _may_start_in(rtype, closed_sources)


def _small_room_counts(rng, target: _Target, rules: Level) -> dict[str, int]:
  """Receptacle types of a small room, one of each: the goal's parent (or a
  lamp holder), its appliance, a target source and drawn extras (_Retry if the
  scene has no allowed holder or source)."""
  types, toggle = sorted(target.layout), target.toggle
  closed = rules.closed_sources
  holders = []
  if toggle:
    holders = [
      h
      for h in LAMP_HOLDERS[toggle]
      if h in target.layout and _may_start_in(h, closed)
    ]
  sources = [t for t in types if _source_ok(target, t, closed)]
  if (toggle and not holders) or not sources:
    raise _Retry()
  need = {target.parent} if target.parent else {_choose(rng, holders)}
  if target.task_type in TREATMENT:
    need.add(TREATMENT[target.task_type][0])
  need.add(_choose(rng, sources))
  lo, hi = rules.receptacles
  n_total = int(rng.integers(lo, hi + 1))
  extra = [t for t in types if t not in need]
  rng.shuffle(extra)
  return {t: 1 for t in sorted(need) + extra[: max(0, n_total - len(need))]}


def _place(rng, recs, placements, otype: str, n: int, allowed) -> None:
  """Appends ``n`` objects of ``otype`` to ``placements``, each in a receptacle
  drawn among those whose type is ``allowed`` (_Retry if none is)."""
  spots = [r for r, t in recs if allowed(t)]
  if not spots:
    raise _Retry()
  base = sum(1 for _, t, _ in placements if t == otype)
  for k in range(n):
    placements.append(
      (object_id(otype, base + k + 1), otype, _choose(rng, spots))
    )


def _place_targets_and_lamp(
  rng, target: _Target, recs, rules: Level
) -> list[tuple[str, str, str]]:
  """Placements ``(id, type, receptacle id)`` of the target objects (2-4 for
  pick_two, else 1-3; fewer in a small room) and of one lamp, if any fits."""
  small, closed = rules.receptacles is not None, rules.closed_sources
  if target.task_type == "pick_two_obj_and_place":
    lo, hi = (2, 3) if small else (2, 4)
  else:
    lo, hi = (1, 2) if small else (1, 3)
  placements = []
  n_targets = int(rng.integers(lo, hi + 1))
  _place(
    rng,
    recs,
    placements,
    target.obj,
    n_targets,
    lambda t: _source_ok(target, t, closed),
  )
  # The goal's lamp, else the room's first lamp that has a holder here.
  rtypes = sorted({t for _, t in recs})
  lamps = (
    [target.toggle]
    if target.toggle
    else [
      lamp
      for lamp in ROOM_LAMPS[target.room]
      if any(h in rtypes for h in LAMP_HOLDERS[lamp])
    ][:1]
  )
  for lamp in lamps:
    _place(
      rng,
      recs,
      placements,
      lamp,
      1,
      lambda t, lamp=lamp: t in LAMP_HOLDERS[lamp] and _may_start_in(t, closed),
    )
  return placements


def _place_distractors(rng, target: _Target, recs, rules: Level, placements):
  """Appends distractors to ``placements``: 1-2 (small room) or 1-3 objects of
  each of a drawn number of shuffled non-target types the room can hold."""
  small = rules.receptacles is not None
  rtypes = sorted({t for _, t in recs})
  pool = [
    o
    for o in sorted(ROOM_OBJECTS[target.room])
    if o != target.obj and any(can_contain(t, o) for t in rtypes)
  ]
  rng.shuffle(pool)
  lo, hi = rules.distractor_types
  n_types = int(rng.integers(lo, hi + 1))
  for o in pool[:n_types]:
    # A distractor never completes the goal by itself (it is not of the target
    # type).
    n_copies = int(rng.integers(1, 3 if small else 4))
    _place(rng, recs, placements, o, n_copies, lambda t, o=o: can_contain(t, o))


def generate_game(
  split: str,
  index: int,
  seed: int,
  task_type: str,
  room_size: str = "full",
  attempt: int = 0,
  level: int | None = None,
  room: str | None = None,
  scene: int | None = None,
) -> Game:
  """One game (not yet validated) from the seed material
  ``[seed, split, index, attempt]`` (``[..., attempt, level]`` with a level).

  ``level`` (a key of LEVELS) overrides ``room_size``: its receptacle count,
  distractors and whether targets may start in closed receptacles. ``room``
  / ``scene`` fix the room kind / scene (`check_place`) instead of drawing
  them.
  """
  check_place(split, task_type, room, scene)
  rng = _seeded_rng(split, index, seed, attempt, level)
  rules = _game_rules(task_type, room_size, level)
  target = _choose_target(rng, split, task_type, room, scene)
  template_index = int(rng.integers(2))
  if rules.receptacles is None:
    counts = target.layout
  else:
    counts = _small_room_counts(rng, target, rules)
  recs = [
    (receptacle_id(t, k + 1), t)
    for t in sorted(counts)
    for k in range(counts[t])
  ]
  placements = _place_targets_and_lamp(rng, target, recs, rules)
  _place_distractors(rng, target, recs, rules, placements)
  return assemble_game(
    task_type,
    target.obj,
    target.parent,
    target.toggle,
    template_index,
    recs,
    placements,
    target.room,
    target.scene,
  )


def validate_game(game: Game) -> list[str]:
  """Expert plan of a game whose goal is false at start and solvable in <= 50
  steps (else ValueError)."""
  cg = CompiledGame(game)
  if cg.goal_satisfied(cg.initial_state()):
    raise ValueError(
      f"game {game.game_id}: goal already satisfied at the start"
    )
  return verified_plan(game)


def generate_valid_game(
  split: str,
  index: int,
  seed: int,
  task_type: str,
  room_size: str = "full",
  level: int | None = None,
  room: str | None = None,
  scene: int | None = None,
) -> Game:
  """First attempt (0, 1, ...) that yields a valid, expert-solvable game
  (``room`` / ``scene``: as in `generate_game`)."""
  check_place(split, task_type, room, scene)
  for attempt in range(_MAX_ATTEMPTS):
    try:
      game = generate_game(
        split, index, seed, task_type, room_size, attempt, level, room, scene
      )
      validate_game(game)
      return game
    except (_Retry, ValueError):
      continue
  raise RuntimeError(
    f"no valid {task_type} game for split={split} index={index} seed={seed}"
    f" level={level} room={room} scene={scene}"
  )
