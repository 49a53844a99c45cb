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

from collections.abc import Sequence

import numpy as np

from rla_jax.envs.alfworld.engine import CompiledGame
from rla_jax.envs.alfworld.expert import verified_plan
from rla_jax.envs.alfworld.game import Game, goal_sentence
from rla_jax.envs.alfworld.levels import LEVELS, check_level
from rla_jax.envs.alfworld.types_tables import (
  CLEANABLE,
  COOLABLE,
  DEFAULT_SPLIT_SIZES,
  HEATABLE,
  HELD_OUT_SCENES_PER_ROOM,
  LAMP_HOLDERS,
  OPENABLE_RECEPTACLES,
  ROOM_LAMPS,
  ROOM_OBJECTS,
  ROOM_RECEPTACLES,
  ROOM_SCENES,
  SLICEABLE,
  SPLIT_QUOTAS,
  TASK_TYPE_NAMES,
  TOGGLEABLE,
  TREATMENT,
  VALID_ROOMS,
  can_contain,
)

SPLITS = ("train", "valid_seen", "valid_unseen")
ROOM_SIZES = ("small", "full")
_SPLIT_CODE = {"train": 0, "valid_seen": 1, "valid_unseen": 2}
_MAX_ATTEMPTS = 50


def split_scenes(split: str, room: str) -> tuple[int, ...]:
  """Scenes (room templates) a split may use; valid_unseen's are never used by
  the others."""
  scenes = ROOM_SCENES[room]
  return (
    scenes[-HELD_OUT_SCENES_PER_ROOM:]
    if split == "valid_unseen"
    else scenes[:-HELD_OUT_SCENES_PER_ROOM]
  )


def check_place(
  split: str, task_type: str, room: str | None, scene: int | None
) -> None:
  """ValueError unless ``room`` (None: drawn) is a room kind of
  ``task_type`` and ``scene`` (None: drawn) a scene of it that ``split``
  may use."""
  if room is None:
    if scene is not None:
      raise ValueError(f"scene {scene} needs a room")
    return
  if room not in VALID_ROOMS[task_type]:
    raise ValueError(
      f"room {room!r} has no {task_type} games (rooms: "
      f"{VALID_ROOMS[task_type]})"
    )
  if scene is not None and scene not in split_scenes(split, room):
    raise ValueError(f"scene {scene} is not a {split} scene of the {room}")


def scene_layout(room: str, scene: int) -> tuple[tuple[str, int], ...]:
  """Fixed receptacle multiset ``((type, count), ...)`` of a scene (sorted by
  type)."""
  rng = np.random.default_rng([0xA1F, scene])
  counts = [
    (t, int(rng.integers(lo, hi + 1)))
    for t, (lo, hi) in sorted(ROOM_RECEPTACLES[room].items())
  ]
  return tuple((t, n) for t, n in counts if n > 0)


def object_id(type_: str, k: int) -> str:
  return f"{type_}_bar_{k:02d}"


def receptacle_id(type_: str, k: int) -> str:
  if type_ in (
    "SinkBasin",
    "BathtubBasin",
  ):  # ALFRED ids: the Demangler appends 'basin'
    return f"{type_[:-5]}_bar_{k:02d}_bar_{type_}"
  return f"{type_}_bar_{k:02d}"


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


def _source_ok(task_type: str, parent: str, rtype: str, obj: str) -> bool:
  """Where a target object may start: never in a goal-type receptacle (goal
  false at t=0)."""
  if not can_contain(rtype, obj) or rtype == parent:
    return False
  return not (
    task_type == "pick_cool_then_place_in_recep" and rtype == "Fridge"
  )


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
  material = [seed, _SPLIT_CODE[split], index, attempt]
  rules = None
  if level is not None:
    rules = LEVELS[check_level(level)]
    if task_type not in rules.task_types:
      raise ValueError(f"level {level} has no {task_type} games")
    material.append(int(level))
    room_size = "full" if rules.receptacles is None else "small"
  rng = np.random.default_rng(material)
  room = _choose(rng, VALID_ROOMS[task_type]) if room is None else room
  scene = _choose(rng, split_scenes(split, room)) if scene is None else scene
  layout = dict(scene_layout(room, scene))
  cands = _task_candidates(task_type, room, sorted(layout))
  if not cands:
    raise _Retry()
  obj, parent, toggle = _choose(rng, cands)
  template_index = int(rng.integers(2))
  small = room_size == "small"
  open_ok = rules is None or rules.closed_sources

  def source_ok(t: str) -> bool:
    return _source_ok(task_type, parent, t, obj) and (
      open_ok or t not in OPENABLE_RECEPTACLES
    )

  def holder_ok(lamp: str, t: str) -> bool:
    return t in LAMP_HOLDERS[lamp] and (
      open_ok or t not in OPENABLE_RECEPTACLES
    )

  if small:
    holders = [h for h in LAMP_HOLDERS[toggle] if h in layout] if toggle else []
    if toggle and not open_ok:
      holders = [h for h in holders if holder_ok(toggle, h)]
    sources = [t for t in sorted(layout) if source_ok(t)]
    if (toggle and not holders) or not sources:
      raise _Retry()
    need = {parent} if parent else {_choose(rng, holders)}
    if task_type in TREATMENT:
      need.add(TREATMENT[task_type][0])
    need.add(_choose(rng, sources))
    lo, hi = (3, 6) if rules is None else rules.receptacles
    n_total = int(rng.integers(lo, hi + 1))
    extra = [t for t in sorted(layout) if t not in need]
    rng.shuffle(extra)
    counts = {t: 1 for t in sorted(need) + extra[: max(0, n_total - len(need))]}
  else:
    counts = layout
  recs = [
    (receptacle_id(t, k + 1), t)
    for t in sorted(counts)
    for k in range(counts[t])
  ]
  rtypes = sorted(counts)
  placements = []

  def place(otype: str, n: int, allowed) -> None:
    spots = [r for r, t in recs if allowed(t)]
    if not spots:
      raise _Retry()
    base = sum(1 for _, t, _ in placements if t == otype)
    for k in range(n):
      placements.append(
        (object_id(otype, base + k + 1), otype, _choose(rng, spots))
      )

  lo_hi = (
    ((2, 3) if small else (2, 4))
    if task_type == "pick_two_obj_and_place"
    else ((1, 2) if small else (1, 3))
  )
  place(obj, int(rng.integers(lo_hi[0], lo_hi[1] + 1)), source_ok)
  lamp_types = (
    [toggle]
    if toggle
    else [
      lamp
      for lamp in ROOM_LAMPS[room]
      if any(h in rtypes for h in LAMP_HOLDERS[lamp])
    ][:1]
  )
  for lamp in lamp_types:
    place(lamp, 1, lambda t, lamp=lamp: holder_ok(lamp, t))
  pool = [
    o
    for o in sorted(ROOM_OBJECTS[room])
    if o != obj and any(can_contain(t, o) for t in rtypes)
  ]
  rng.shuffle(pool)
  if rules is not None:
    n_distract = int(
      rng.integers(rules.distractor_types[0], rules.distractor_types[1] + 1)
    )
  else:
    n_distract = int(rng.integers(1, 4)) if small else int(rng.integers(6, 13))
  for o in pool[:n_distract]:
    # A distractor never completes the goal by itself (it is not of the target
    # type).
    place(
      o,
      int(rng.integers(1, 3 if small else 4)),
      lambda t, o=o: can_contain(t, o),
    )
  return assemble_game(
    task_type,
    obj,
    parent,
    toggle,
    template_index,
    recs,
    placements,
    room,
    scene,
  )


class _Retry(Exception):
  pass


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
  perm = np.random.default_rng([seed, _SPLIT_CODE[split], 0x7A5C]).permutation(
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
