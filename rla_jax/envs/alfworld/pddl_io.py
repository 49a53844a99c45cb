"""Write ALFWorld game folders (``game.tw-pddl`` + ``traj_data.json``); reading
them back is `rla_jax.envs.alfworld.pddl_read`.

Layout written (the one ``alfworld.agents.environment.AlfredTWEnv`` walks)::

    {data_dir}/json_2.1.1/{split}/
      {task_type}-{Obj}-None-{Parent}-{scene}/
        trial_T{game_id}/
          game.tw-pddl   JSON {pddl_domain, grammar, pddl_problem, solvable,
                               walkthrough}
          traj_data.json JSON {task_type, pddl_params, scene, ...}

The PDDL domain and the text grammar are the ALFRED logic files shipped by the
``alfworld`` package (found without importing it, or in
``$RLA_ALFWORLD_LOGIC_DIR``); the grammar gets the task sentence substituted for
``UNKNOWN GOAL`` exactly as ALFWorld's ``add_task_to_grammar``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from rla_jax.envs.alfworld.game import Game
from rla_jax.envs.alfworld.types_tables import (
  OBJECT_TYPES,
  RECEPTACLE_TYPES,
)

GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
DATA_VERSION_DIR = "json_2.1.1"
_FORBIDDEN_TASK_CHARS = set('"\\#[]{}|\n')


def logic_dir() -> Path:
  """Directory holding ``alfred.pddl`` and ``alfred.twl2`` (alfworld package
  data)."""
  env = os.environ.get("RLA_ALFWORLD_LOGIC_DIR")
  if env:
    return Path(env)
  spec = importlib.util.find_spec("alfworld")
  if spec is None or not spec.submodule_search_locations:
    raise RuntimeError(
      "writing ALFWorld game files needs the ALFRED domain/grammar files of "
      "the 'alfworld' package (pip install alfworld==0.4.2) or "
      "$RLA_ALFWORLD_LOGIC_DIR"
    )
  return Path(list(spec.submodule_search_locations)[0]) / "data"


def read_logic() -> tuple[str, str]:
  """``(pddl_domain, grammar_template)`` texts."""
  d = logic_dir()
  return (d / "alfred.pddl").read_text(), (d / "alfred.twl2").read_text()


def _goal_pddl(game: Game) -> str:
  obj, tt = f"{game.object_target}Type", game.task_type
  if tt == "look_at_obj_in_light":
    return (
      "(:goal (and (exists (?ot - object ?r - receptacle ?a - agent ?l - "
      f"location) (and (objectType ?ot {game.toggle_target}Type) (toggleable "
      "?ot) (isToggled ?ot) (receptacleAtLocation ?r ?l) (atLocation ?a ?l) "
      "(inReceptacle ?ot ?r))) (exists (?o - object ?a - agent) (and "
      f"(objectType ?o {obj}) (holds ?a ?o)))))"
    )
  rec = f"{game.parent_target}Type"
  if tt == "pick_two_obj_and_place":
    return (
      "(:goal (and (exists (?r - receptacle) (exists (?o1 - object) (and "
      f"(objectType ?o1 {obj}) (receptacleType ?r {rec}) (inReceptacle ?o1 ?r) "
      f"(exists (?o2 - object) (and (not (= ?o1 ?o2)) (objectType ?o2 {obj}) "
      f"(receptacleType ?r {rec}) (inReceptacle ?o2 ?r))))))))"
    )
  extra = {
    "pick_clean_then_place_in_recep": "(cleanable ?o) (isClean ?o) ",
    "pick_heat_then_place_in_recep": "(heatable ?o) (isHot ?o) ",
    "pick_cool_then_place_in_recep": "(coolable ?o) (isCool ?o) ",
  }.get(tt, "")
  return (
    "(:goal (and (exists (?r - receptacle) (exists (?o - object) (and "
    f"{extra}(objectType ?o {obj}) (receptacleType ?r {rec}) (inReceptacle ?o "
    "?r))))))"
  )


def problem_pddl(game: Game) -> str:
  """The PDDL problem text of a game (deterministic: fixed declaration and fact
  order)."""
  locs = sorted(
    {game.agent_start}
    | {loc for _, _, loc in game.receptacles}
    | {f[2] for f in game.facts if f[0] == "objectAtLocation"}
  )
  otypes = sorted(
    set(OBJECT_TYPES)
    | {t for _, t in game.objects}
    | {o for _, o in game.can_contain}
  )
  rtypes = sorted(
    set(RECEPTACLE_TYPES)
    | {t for _, t, _ in game.receptacles}
    | {r for r, _ in game.can_contain}
  )
  lines = [
    f"(define (problem plan_trial_{game.game_id})",
    "(:domain alfred)",
    "(:objects",
    "agent1 - agent",
  ]
  lines += [f"{t}Type - otype" for t in otypes] + [
    f"{t}Type - rtype" for t in rtypes
  ]
  lines += [f"{o} - object" for o, _ in game.objects] + [
    f"{r} - receptacle" for r, _, _ in game.receptacles
  ]
  lines += [f"{loc} - location" for loc in locs] + [
    ")",
    "(:init",
    f"(atLocation agent1 {game.agent_start})",
  ]
  lines += [f"(receptacleType {r} {t}Type)" for r, t, _ in game.receptacles]
  lines += [
    f"(receptacleAtLocation {r} {loc})" for r, _, loc in game.receptacles
  ]
  lines += [f"(objectType {o} {t}Type)" for o, t in game.objects]
  lines += ["(" + " ".join(f) + ")" for f in game.facts]
  lines += [f"(canContain {r}Type {o}Type)" for r, o in game.can_contain]
  lines += [")", _goal_pddl(game), ")"]
  return "\n".join(lines) + "\n"


def check_task_text(text: str) -> None:
  bad = sorted(set(text) & _FORBIDDEN_TASK_CHARS)
  if bad or not text.strip():
    raise ValueError(
      f"task text {text!r} is empty or has characters the TextWorld grammar "
      f"cannot hold: {bad}"
    )


def game_file_json(game: Game, walkthrough: list[str]) -> dict:
  domain, grammar = read_logic()
  check_task_text(game.task_text)
  return {
    "pddl_domain": domain,
    "grammar": grammar.replace("UNKNOWN GOAL", game.task_text),
    "pddl_problem": problem_pddl(game),
    "solvable": True,
    "walkthrough": list(walkthrough),
  }


def write_game(game: Game, data_dir: str | os.PathLike, split: str) -> str:
  """Write ``game`` as an ALFWorld game folder under ``data_dir``; returns the
  game.tw-pddl path.

  The game must be solvable by :func:`rla_jax.envs.alfworld.expert.expert_plan`
  (checked here; ValueError otherwise). Writing is byte-deterministic.
  """
  from rla_jax.envs.alfworld.expert import (
    verified_plan,
  )  # local: expert imports the engine

  plan = verified_plan(game)
  folder = (
    Path(data_dir)
    / DATA_VERSION_DIR
    / split
    / game.folder_name
    / f"trial_T{game.game_id}"
  )
  folder.mkdir(parents=True, exist_ok=True)
  traj = {
    "task_type": game.task_type,
    "pddl_params": game.pddl_params,
    "scene": {"scene_num": game.scene},
    "room": game.room,
    "task_id": game.game_id,
    "game": game.to_dict(),
  }
  (folder / TRAJ_FILE).write_text(json.dumps(traj, indent=1) + "\n")
  (folder / GAME_FILE).write_text(
    json.dumps(game_file_json(game, plan), indent=1) + "\n"
  )
  return str(folder / GAME_FILE)
