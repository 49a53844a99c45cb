"""The immutable in-memory ALFWorld game: world (objects, receptacles, init
facts) + task.

A :class:`Game` is what the generator produces, what ``load_game`` parses from a
``game.tw-pddl`` file and what both engines play. It is a frozen dataclass of
tuples and strings, hence hashable, picklable and JSON-serialisable
(``to_dict`` / ``from_dict``); ``game_id`` is a content hash, stable across
runs and machines.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from typing import Any

from rla_jax.envs.alfworld.types_tables import GOAL_TEMPLATES, TASK_TYPE_NAMES

#: Unary/binary init predicates a Game may carry besides types, locations and
#: canContain.
DYNAMIC_PREDICATES = (
  "inReceptacle",
  "objectAtLocation",
  "opened",
  "isClean",
  "isHot",
  "isCool",
  "isSliced",
  "isOn",
  "isToggled",
  "inReceptacleObject",
)
PROPERTY_PREDICATES = (
  "openable",
  "pickupable",
  "cleanable",
  "heatable",
  "coolable",
  "sliceable",
  "toggleable",
  "isReceptacleObject",
  "moveable",
)
KNOWN_PREDICATES = frozenset(DYNAMIC_PREDICATES + PROPERTY_PREDICATES)


@dataclasses.dataclass(frozen=True)
class Game:
  """One ALFWorld text game.

  Fields:
    task_type: one of the 6 ALFWorld task type names.
    task_text: goal sentence shown after ``Your task is to: `` (without the
      final period).
    object_target / parent_target / toggle_target: CamelCase type tokens of the
      goal (``parent_target`` empty for look tasks, ``toggle_target`` empty
      otherwise).
    objects: ``(pddl id, type)`` per object.
    receptacles: ``(pddl id, type, location id)``.
    agent_start: location id where the agent starts (normally one with no
      receptacle).
    facts: other init facts ``(predicate, arg, ...)`` over ids (see
      KNOWN_PREDICATES).
    can_contain: ``(receptacle type, object type)`` pairs allowed by PutObject.
    room / scene: provenance (room kind, ALFRED-style scene number).
  """

  task_type: str
  task_text: str
  object_target: str
  parent_target: str
  toggle_target: str
  objects: tuple[tuple[str, str], ...]
  receptacles: tuple[tuple[str, str, str], ...]
  agent_start: str
  facts: tuple[tuple[str, ...], ...]
  can_contain: tuple[tuple[str, str], ...]
  room: str = ""
  scene: int = 0

  def __post_init__(self):
    if self.task_type not in TASK_TYPE_NAMES:
      raise ValueError(
        f"Game.task_type {self.task_type!r} is not one of {TASK_TYPE_NAMES}"
      )
    for fact in self.facts:
      if fact[0] not in KNOWN_PREDICATES:
        raise ValueError(
          f"Game fact {fact!r} uses unsupported predicate {fact[0]!r}"
        )
    ids = [o for o, _ in self.objects] + [r for r, _, _ in self.receptacles]
    if len({i.lower() for i in ids}) != len(ids):
      raise ValueError(
        "Game has duplicate object/receptacle ids (ids are case-insensitive)"
      )

  @functools.cached_property
  def game_id(self) -> str:
    """Stable 16-hex-digit content hash (independent of dict order /
    PYTHONHASHSEED)."""
    blob = json.dumps(
      self.to_dict(include_id=False), sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

  @property
  def folder_name(self) -> str:
    """ALFWorld folder name ``{task_type}-{Obj}-None-{Parent}-{scene}`` (look:
    Parent = lamp)."""
    parent = (
      self.toggle_target
      if self.task_type == "look_at_obj_in_light"
      else self.parent_target
    )
    return f"{self.task_type}-{self.object_target}-None-{parent}-{self.scene}"

  @property
  def pddl_params(self) -> dict[str, Any]:
    """The ``traj_data.json`` ``pddl_params`` block read by ALFWorld's loader
    and expert."""
    return {
      "object_target": self.object_target,
      "parent_target": self.parent_target,
      "toggle_target": self.toggle_target,
      "mrecep_target": "",
      "object_sliced": False,
    }

  def to_dict(self, include_id: bool = True) -> dict[str, Any]:
    d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
    d = json.loads(json.dumps(d))  # tuples -> lists
    if include_id:
      d["game_id"] = self.game_id
    return d

  @classmethod
  def from_dict(cls, d: dict[str, Any]) -> Game:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - names - {"game_id"}
    if unknown:
      raise ValueError(f"Game.from_dict: unknown keys {sorted(unknown)}")
    game = cls(
      task_type=d["task_type"],
      task_text=d["task_text"],
      object_target=d["object_target"],
      parent_target=d["parent_target"],
      toggle_target=d["toggle_target"],
      objects=tuple(tuple(x) for x in d["objects"]),
      receptacles=tuple(tuple(x) for x in d["receptacles"]),
      agent_start=d["agent_start"],
      facts=tuple(tuple(x) for x in d["facts"]),
      can_contain=tuple(tuple(x) for x in d["can_contain"]),
      room=d.get("room", ""),
      scene=int(d.get("scene", 0)),
    )
    if "game_id" in d and d["game_id"] != game.game_id:
      raise ValueError(
        f"Game.from_dict: game_id {d['game_id']} does not match content "
        f"({game.game_id})"
      )
    return game

  def replace(self, **changes) -> Game:
    return dataclasses.replace(self, **changes)


def goal_sentence(
  task_type: str, obj: str, parent: str, toggle: str, template_index: int
) -> str:
  """ALFWorld templated goal text, e.g. ``put a clean apple in diningtable`` (no
  final period)."""
  template = GOAL_TEMPLATES[task_type][template_index]
  return template.format(
    obj=obj.lower(), recep=parent.lower(), toggle=toggle.lower()
  )
