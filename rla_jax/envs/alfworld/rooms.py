"""ALFRED-style room templates: the three splits and the scenes each may use
(the last scenes of every room kind are held out for ``valid_unseen``), each
scene's fixed receptacle layout (drawn from its own seed, so a scene is the
same room in every game and split), and the ALFRED object / receptacle id
format the game files use."""

from __future__ import annotations

import numpy as np

from rla_jax.envs.alfworld.types_tables import (
  HELD_OUT_SCENES_PER_ROOM,
  ROOM_RECEPTACLES,
  ROOM_SCENES,
  VALID_ROOMS,
)

SPLITS = ("train", "valid_seen", "valid_unseen")
ROOM_SIZES = ("small", "full")
SPLIT_CODES = {"train": 0, "valid_seen": 1, "valid_unseen": 2}


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
