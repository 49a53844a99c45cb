"""Environment adaptation for ALFWorld: harder/easier variants of a game,
goal-token edits and a compact English dump of a game for an LLM environment
model.

Every returned game is re-validated (goal false at start, expert solves it in <=
50 steps) and its task text is regenerated from the new goal, so the text always
names the new objects (the reference implementation edits only the PDDL goal and
keeps the old text).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from rla_jax.envs.alfworld.engine import CompiledGame
from rla_jax.envs.alfworld.game import Game
from rla_jax.envs.alfworld.generator import assemble_game, validate_game
from rla_jax.envs.alfworld.rooms import object_id
from rla_jax.envs.alfworld.types_tables import (
  GOAL_TEMPLATES,
  ROOM_OBJECTS,
  TOGGLEABLE,
  TREATMENT,
  can_contain,
  canonical_type,
)

DIRECTIONS = ("harder", "easier")
_TIP_MARK = ". Tip: "


def _parts(game: Game):
  """(receptacles [(id, type)], placements [(id, type, receptacle id)], template
  index, tip)."""
  where = defaultdict(list)
  for f in game.facts:
    if f[0] == "inReceptacle":
      where[f[1]].append(f[2])
  otype = dict(game.objects)
  if any(len(where[o]) != 1 for o in otype):
    raise ValueError(
      f"game {game.game_id}: every object must be in exactly one receptacle to "
      "be edited"
    )
  text, _, tip = game.task_text.partition(_TIP_MARK)
  templates = GOAL_TEMPLATES[game.task_type]
  idx = next(
    (k for k, t in enumerate(templates) if text.startswith(t.split("{")[0])), 0
  )
  recs = [(r, t) for r, t, _ in game.receptacles]
  return (
    recs,
    [(o, otype[o], where[o][0]) for o in sorted(otype)],
    idx,
    ("Tip: " + tip if tip else ""),
  )


def _rebuild(
  game: Game, obj=None, parent=None, toggle=None, placements=None, tip=None
) -> Game:
  recs, places, idx, old_tip = _parts(game)
  obj = game.object_target if obj is None else obj
  parent = game.parent_target if parent is None else parent
  toggle = game.toggle_target if toggle is None else toggle
  return assemble_game(
    game.task_type,
    obj,
    parent,
    toggle,
    idx,
    recs,
    places if placements is None else placements,
    game.room,
    game.scene,
    old_tip if tip is None else tip,
  )


def _valid(game: Game) -> int | None:
  """Expert plan length of a valid game, None if invalid/unsolvable."""
  try:
    return len(validate_game(game))
  except ValueError:
    return None


def apply_goal_tokens(game: Game, token_a: str, token_b: str) -> Game:
  """Set the goal's two type tokens, e.g. ``("AppleType", "FridgeType")``.

  ``token_a`` is the object type, ``token_b`` the receptacle type (the lamp type
  for look_at_obj_in_light). Tokens may omit the ``Type`` suffix (it is added)
  and may come in either order: if the receptacle cannot contain the object but
  the swapped pair is valid, they are swapped. Raises ValueError (with the
  reason) if a token is unknown, the pair is invalid for the task type or this
  room, or the new game is unsolvable / already solved.
  """
  a, b = canonical_type(token_a), canonical_type(token_b)
  look = game.task_type == "look_at_obj_in_light"

  def ok(o, r):
    return (r in TOGGLEABLE) if look else can_contain(r, o)

  if not ok(a, b) and ok(b, a):
    a, b = b, a
  if not ok(a, b):
    kind = "lamp" if look else "receptacle able to contain it"
    raise ValueError(
      f"goal tokens ({a}Type, {b}Type): {b} is not a {kind} of {a}"
    )
  present_o = {t for _, t in game.objects}
  present_r = {t for _, t, _ in game.receptacles}
  if a not in present_o:
    raise ValueError(f"goal tokens: no {a} object in game {game.game_id}")
  if (b not in present_o) if look else (b not in present_r):
    raise ValueError(f"goal tokens: no {b} in game {game.game_id}")
  treat = TREATMENT.get(game.task_type)
  if treat and a not in treat[1]:
    raise ValueError(f"goal tokens: {a} cannot be treated for {game.task_type}")
  new = _rebuild(
    game, obj=a, parent="" if look else b, toggle=b if look else "", tip=""
  )
  if _valid(new) is None:
    raise ValueError(
      f"goal tokens ({a}Type, {b}Type): the resulting game is unsolvable or "
      "already solved"
    )
  return new


def _instances(game: Game, t: str) -> int:
  return sum(1 for _, ot in game.objects if ot == t)


def _object_token_swaps(game: Game, direction: str) -> list[Game]:
  """Valid games whose goal object type is another non-lamp type in the room
  with fewer (harder) / more (easier) instances than the current one."""
  look = game.task_type == "look_at_obj_in_light"
  out: list[Game] = []
  n_now = _instances(game, game.object_target)
  for o in sorted({t for _, t in game.objects} - TOGGLEABLE):
    if o == game.object_target:
      continue
    n = _instances(game, o)
    if (direction == "harder" and n <= n_now) or (
      direction == "easier" and n >= n_now
    ):
      try:
        out.append(
          apply_goal_tokens(
            game, o, game.toggle_target if look else game.parent_target
          )
        )
      except ValueError:
        pass
  return out


def _receptacle_token_swaps(game: Game, recs) -> list[Game]:
  """Valid games whose goal receptacle type is another one in the room (none
  for look_at_obj_in_light)."""
  out: list[Game] = []
  if game.task_type == "look_at_obj_in_light":
    return out
  for r in sorted({t for _, t in recs} - {game.parent_target}):
    try:
      out.append(apply_goal_tokens(game, game.object_target, r))
    except ValueError:
      pass
  return out


def _without_some_distractors(
  game: Game, places, rng: np.random.Generator
) -> list[Game]:
  """The game with about half of its distractor objects (neither targets nor
  lamps) dropped, drawn from ``rng``; none if it has no distractors."""
  distractors = [
    p for p in places if p[1] != game.object_target and p[1] not in TOGGLEABLE
  ]
  if not distractors:
    return []
  keep = rng.permutation(len(distractors))[: len(distractors) // 2]
  kept = {distractors[int(k)][0] for k in keep}
  return [
    _rebuild(
      game,
      placements=[p for p in places if p not in distractors or p[0] in kept],
    )
  ]


def _with_target_tip(game: Game, places) -> list[Game]:
  """The game with a tip naming the (first by id) receptacle holding a target
  object; none if it has no target object."""
  cg = CompiledGame(game)
  src = sorted(r for o, t, r in places if t == game.object_target)
  if not src:
    return []
  name = cg.rec_name[cg.ri[src[0].lower()]]
  return [
    _rebuild(
      game,
      tip=f"Tip: you can find a {game.object_target.lower()} in the {name}",
    )
  ]


def _spots(recs, o: str) -> list[str]:
  """Ids of the receptacles in ``recs`` that can contain object type ``o``."""
  return [r for r, t in recs if can_contain(t, o)]


def _with_new_distractors(
  game: Game, recs, places, rng: np.random.Generator
) -> list[Game]:
  """The game with 1-2 copies each of about a third of the room's object types
  not yet in it (drawn from ``rng``); none if no such type fits anywhere."""
  present_o = sorted({t for _, t in game.objects} - TOGGLEABLE)
  pool = [
    o
    for o in sorted(ROOM_OBJECTS.get(game.room, ()))
    if o not in present_o and o != game.object_target
  ]
  pool = [o for o in pool if _spots(recs, o)]
  if not pool:
    return []
  extra = list(places)
  for k in rng.permutation(len(pool))[: max(1, len(pool) // 3)]:
    o = pool[int(k)]
    for j in range(int(rng.integers(1, 3))):
      s = _spots(recs, o)
      extra.append((object_id(o, j + 1), o, s[int(rng.integers(len(s)))]))
  return [_rebuild(game, placements=extra)]


def _candidates(
  game: Game, direction: str, rng: np.random.Generator
) -> list[Game]:
  """Candidate variants of ``game`` in ``direction`` (not yet filtered by plan
  length): goal-token swaps, then distractor / tip edits."""
  recs, places, _, tip = _parts(game)
  out = _object_token_swaps(game, direction)
  out += _receptacle_token_swaps(game, recs)
  if direction == "easier":
    out += _without_some_distractors(game, places, rng)
    if not tip:
      out += _with_target_tip(game, places)
  else:
    out += _with_new_distractors(game, recs, places, rng)
  return out


def perturb_game(
  game: Game, direction: str, rng: np.random.Generator
) -> Game | None:
  """A new valid game keeping the task type: ``harder`` (goal type with fewer
  instances or a longer expert plan, or more distractors) or ``easier`` (more
  common goal type or a shorter plan, a tip naming where a target object is, or
  fewer distractors). Returns None if no such variant exists. The choice among
  variants is drawn from ``rng``."""
  if direction not in DIRECTIONS:
    raise ValueError(f"direction {direction!r} is not one of {DIRECTIONS}")
  base = _valid(game)
  if base is None:
    raise ValueError(
      f"game {game.game_id} is not valid/solvable; cannot perturb it"
    )
  good = []
  for cand in _candidates(game, direction, rng):
    n = _valid(cand)
    if n is None or cand.game_id == game.game_id:
      continue
    more_distractors = len(cand.objects) > len(game.objects)
    fewer_targets = _instances(cand, cand.object_target) < _instances(
      game, game.object_target
    )
    if direction == "harder" and (
      n > base or fewer_targets or (more_distractors and n >= base)
    ):
      good.append(cand)
    elif direction == "easier" and (
      n < base
      or (
        n == base
        and (
          len(cand.objects) < len(game.objects)
          or len(cand.task_text) > len(game.task_text)
          or _instances(cand, cand.object_target)
          > _instances(game, game.object_target)
        )
      )
    ):
      good.append(cand)
  if not good:
    return None
  return good[int(rng.integers(len(good)))]


def _type_instance_lines(game: Game, cg: CompiledGame) -> list[str]:
  """``Object/Receptacle types -> instances`` blocks (sorted by type, then
  name)."""
  by_otype, by_rtype = defaultdict(list), defaultdict(list)
  for o, (_, t) in enumerate(game.objects):
    by_otype[t].append(cg.obj_name[o])
  for r, (_, t, _) in enumerate(game.receptacles):
    by_rtype[t].append(cg.rec_name[r])
  lines = ["Object types -> instances:"]
  lines += [
    f"  {t}Type: {', '.join(sorted(v))}" for t, v in sorted(by_otype.items())
  ]
  lines.append("Receptacle types -> instances:")
  lines += [
    f"  {t}Type: {', '.join(sorted(v))}" for t, v in sorted(by_rtype.items())
  ]
  return lines


def _can_contain_lines(game: Game) -> list[str]:
  """``canContain`` block: receptacle type -> object types, sorted."""
  cc = defaultdict(list)
  for r, o in game.can_contain:
    cc[r].append(o)
  lines = ["canContain (receptacle type: object types):"]
  lines += [
    f"  {r}Type: {', '.join(o + 'Type' for o in sorted(v))}"
    for r, v in sorted(cc.items())
  ]
  return lines


def _in_receptacle_lines(cg: CompiledGame) -> list[str]:
  """``inReceptacle`` block: the initial contents of each non-empty
  receptacle, in game order."""
  st = cg.initial_state()
  lines = ["inReceptacle:"]
  for r in range(len(cg.rec_ids)):
    if st.contents[r]:
      lines.append(
        f"  {cg.rec_name[r]}: "
        f"{', '.join(cg.obj_name[o] for o in cg.sorted_objs(st.contents[r]))}"
      )
  return lines


def _affordance_lines(cg: CompiledGame) -> list[str]:
  """One ``label: names`` line per affordance that some entity has."""
  recs, objs = range(len(cg.rec_ids)), range(len(cg.obj_ids))
  lines = []
  for label, flags in (
    ("openable", [cg.rec_name[r] for r in recs if cg.openable[r]]),
    ("heatable", [cg.obj_name[o] for o in objs if cg.heatable[o]]),
    ("coolable", [cg.obj_name[o] for o in objs if cg.coolable[o]]),
    ("cleanable", [cg.obj_name[o] for o in objs if cg.cleanable[o]]),
    ("toggleable", [cg.obj_name[o] for o in objs if cg.toggleable[o]]),
  ):
    if flags:
      lines.append(f"{label}: {', '.join(sorted(flags))}")
  return lines


def describe_game_for_proposal(game: Game) -> str:
  """Compact English dump of the PDDL init (object/receptacle types ->
  instances, canContain, grouped predicates) plus the current task, for an LLM
  environment model's prompt."""
  cg = CompiledGame(game)
  lines = [
    f"Task type: {game.task_type}",
    f"Task: {game.task_text}",
    f"Goal tokens: ({game.object_target}Type, "
    f"{(game.toggle_target or game.parent_target)}Type)",
  ]
  lines += _type_instance_lines(game, cg)
  lines += _can_contain_lines(game)
  lines += _in_receptacle_lines(cg)
  lines += _affordance_lines(cg)
  return "\n".join(lines)
