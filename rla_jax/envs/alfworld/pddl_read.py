"""Read an ALFWorld game back from its ``game.tw-pddl`` file (`load_game`) or
from a PDDL problem text (`parse_problem`), the inverse of
`rla_jax.envs.alfworld.pddl_io`'s writer: the ``:init`` facts give the
objects, receptacles, locations and the agent's start, the ``:goal`` gives the
task type and targets, and the grammar's task rule gives the task sentence.
Anything malformed or unsupported is a ValueError naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

from rla_jax.envs.alfworld.game import KNOWN_PREDICATES, Game
from rla_jax.envs.alfworld.pddl_io import GAME_FILE, TRAJ_FILE
from rla_jax.envs.alfworld.types_tables import TASK_TYPE_NAMES, canonical_type

_CANON_PRED = {p.lower(): p for p in KNOWN_PREDICATES}
_IGNORED_PREDICATES = frozenset(
  {"checked", "examined", "wasinreceptacle", "full", "isreceptacleobjectfull"}
)


def _sexpr(text: str, where: str):
  tokens = re.findall(r"\(|\)|[^\s()]+", re.sub(r";[^\n]*", "", text))
  stack: list[list] = [[]]
  for tok in tokens:
    if tok == "(":
      stack.append([])
    elif tok == ")":
      if len(stack) == 1:
        raise ValueError(f"{where}: unbalanced ')' in PDDL problem")
      done = stack.pop()
      stack[-1].append(done)
    else:
      stack[-1].append(tok)
  if len(stack) != 1 or len(stack[0]) != 1:
    raise ValueError(f"{where}: unbalanced parentheses in PDDL problem")
  return stack[0][0]


def _type_token(tok: str) -> str:
  try:
    return canonical_type(tok)
  except ValueError:
    return tok[:-4] if tok.lower().endswith("type") else tok


def _goal_tokens(goal: list, where: str) -> tuple[str, str, str, str]:
  flat = json.dumps(goal).lower()
  otypes = re.findall(r'"objecttype", "\?\w+", "(\w+)"', flat)
  rtypes = re.findall(r'"receptacletype", "\?\w+", "(\w+)"', flat)
  if not otypes:
    raise ValueError(f"{where}: goal has no objectType condition")
  if "istoggled" in flat:
    lamp = [t for t in otypes if _type_token(t) in ("DeskLamp", "FloorLamp")]
    other = [t for t in otypes if t not in lamp]
    if not lamp or not other:
      raise ValueError(
        f"{where}: look goal needs a lamp type and an object type"
      )
    return (
      "look_at_obj_in_light",
      _type_token(other[0]),
      "",
      _type_token(lamp[0]),
    )
  if not rtypes:
    raise ValueError(f"{where}: goal has no receptacleType condition")
  kind = (
    "pick_two_obj_and_place"
    if '"="' in flat
    else "pick_clean_then_place_in_recep"
    if "isclean" in flat
    else "pick_heat_then_place_in_recep"
    if "ishot" in flat
    else "pick_cool_then_place_in_recep"
    if "iscool" in flat
    else "pick_and_place_simple"
  )
  return kind, _type_token(otypes[0]), _type_token(rtypes[0]), ""


@dataclasses.dataclass
class _InitFacts:
  """What a problem's ``:init`` section says, keyed by (original-case) id."""

  otype: dict = dataclasses.field(default_factory=dict)  # object -> type
  rtype: dict = dataclasses.field(default_factory=dict)  # receptacle -> type
  rloc: dict = dataclasses.field(default_factory=dict)  # receptacle -> loc
  facts: list = dataclasses.field(default_factory=list)  # other known facts
  can_contain: list = dataclasses.field(default_factory=list)  # (rtype, otype)
  start: list = dataclasses.field(default_factory=list)  # agent locations


def _problem_sections(tree: list, where: str) -> dict:
  """``{":objects": [...], ":init": [...], ":goal": [...], ...}`` of a parsed
  problem; ValueError if one of those three is missing."""
  sections = {
    s[0].lower(): s[1:]
    for s in tree
    if isinstance(s, list) and s and isinstance(s[0], str)
  }
  for key in (":objects", ":init", ":goal"):
    if key not in sections:
      raise ValueError(f"{where}: PDDL problem has no {key} section")
  return sections


def _declared_types(toks: list) -> dict:
  """``{name: type}`` (lower-cased) of a typed ``:objects`` list."""
  declared, pending = {}, []
  i = 0
  while i < len(toks):
    if toks[i] == "-":
      for name in pending:
        declared[name.lower()] = toks[i + 1].lower()
      pending, i = [], i + 2
    else:
      pending.append(toks[i])
      i += 1
  return declared


def _read_init(init: list, where: str) -> _InitFacts:
  """Sort the ``:init`` facts by predicate; ValueError on malformed or
  unsupported ones."""
  out = _InitFacts()
  for fact in init:
    if not isinstance(fact, list) or not fact or not isinstance(fact[0], str):
      raise ValueError(f"{where}: malformed init fact {fact!r}")
    pred, args = fact[0].lower(), fact[1:]
    if pred == "=" or any(isinstance(a, list) for a in args):
      # numeric fluents (distance/total-cost) play no part in the text game
      continue
    if pred == "atlocation":
      out.start.append(args[1])
    elif pred == "objecttype":
      out.otype[args[0]] = _type_token(args[1])
    elif pred == "receptacletype":
      out.rtype[args[0]] = _type_token(args[1])
    elif pred == "receptacleatlocation":
      if args[0] in out.rloc:
        raise ValueError(f"{where}: receptacle {args[0]} is at two locations")
      out.rloc[args[0]] = args[1]
    elif pred == "cancontain":
      out.can_contain.append((_type_token(args[0]), _type_token(args[1])))
    elif pred in _CANON_PRED:
      out.facts.append((_CANON_PRED[pred],) + tuple(args))
    elif pred not in _IGNORED_PREDICATES:
      raise ValueError(f"{where}: unsupported init predicate {fact[0]!r}")
  return out


def _check_init(init: _InitFacts, where: str) -> None:
  """ValueError unless the agent has one start and every receptacle both a
  type and a location."""
  if len(init.start) != 1:
    raise ValueError(
      f"{where}: expected exactly one (atLocation agent ...) fact, got "
      f"{len(init.start)}"
    )
  missing = sorted(set(init.rtype) ^ set(init.rloc))
  if missing:
    raise ValueError(
      f"{where}: receptacles without both a type and a location: {missing}"
    )


def parse_problem(
  problem: str, task_text: str, where: str, room: str = "", scene: int = 0
) -> Game:
  """Parse an ALFRED PDDL problem into a Game; ValueError naming ``where`` on
  anything unsupported."""
  sections = _problem_sections(_sexpr(problem, where), where)
  # The declared types are not used, but a malformed declaration list still
  # fails here, as it always has.
  _declared_types(sections[":objects"])
  init = _read_init(sections[":init"], where)
  _check_init(init, where)
  kind, obj, parent, toggle = _goal_tokens(sections[":goal"], where)
  return Game(
    task_type=kind,
    task_text=task_text,
    object_target=obj,
    parent_target=parent,
    toggle_target=toggle,
    objects=tuple(sorted(init.otype.items())),
    receptacles=tuple(
      sorted((r, t, init.rloc[r]) for r, t in init.rtype.items())
    ),
    agent_start=init.start[0],
    facts=tuple(sorted(set(init.facts))),
    can_contain=tuple(sorted(set(init.can_contain))),
    room=room,
    scene=scene,
  )


def task_text_from_grammar(grammar: str, where: str) -> str:
  m = re.search(r'"rhs":\s*"Your task is to: (.*)\."\s*$', grammar, flags=re.M)
  if not m:
    raise ValueError(
      f"{where}: grammar has no 'Your task is to: ...' task rule"
    )
  return m.group(1)


def load_game(path: str | os.PathLike, check_solvable: bool = True) -> Game:
  """Parse a ``game.tw-pddl`` file (or a trial folder holding one) into a
  :class:`Game`.

  Raises ValueError naming the file if it is malformed, marked unsolvable, or
  (with ``check_solvable``) not solvable by the expert.
  """
  p = Path(path)
  if p.is_dir():
    p = p / GAME_FILE
  try:
    data = json.loads(p.read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise ValueError(f"{p}: cannot read game file: {e}") from e
  if not isinstance(data, dict) or not {"pddl_problem", "grammar"} <= set(data):
    raise ValueError(
      f"{p}: not a game.tw-pddl file (needs keys pddl_problem and grammar)"
    )
  if data.get("solvable") is not True:
    raise ValueError(
      f"{p}: game file is not marked solvable "
      f"(solvable={data.get('solvable')!r})"
    )
  room, scene, traj_type = "", 0, None
  traj = p.parent / TRAJ_FILE
  if traj.exists():
    t = json.loads(traj.read_text())
    room, traj_type = t.get("room", ""), t.get("task_type")
    scene = int((t.get("scene") or {}).get("scene_num", 0) or 0)
  game = parse_problem(
    data["pddl_problem"],
    task_text_from_grammar(data["grammar"], str(p)),
    str(p),
    room,
    scene,
  )
  if traj_type is not None and traj_type != game.task_type:
    if traj_type not in TASK_TYPE_NAMES:
      raise ValueError(
        f"{p}: traj_data task_type {traj_type!r} is not supported"
      )
    game = game.replace(task_type=traj_type)
  if check_solvable:
    from rla_jax.envs.alfworld.expert import expert_plan

    if expert_plan(game) is None:
      raise ValueError(f"{p}: game is not solvable (the expert finds no plan)")
  return game
