"""Native ALFWorld engine: exact strings, rules,
batching, bad input, Game serialisation."""

import json
import os
import pickle
import tempfile

import pytest

os.environ.setdefault(
  "ALFWORLD_DATA", tempfile.mkdtemp(prefix="rla_alfworld_test_")
)

from rla_jax.envs.alfworld import Game, load_game, make_env, write_game
from rla_jax.envs.alfworld.engine import CompiledGame
from rla_jax.envs.alfworld.generator import assemble_game
from rla_jax.envs.alfworld.text import demangle_names, display_list

RECS = [
  ("Cabinet_bar_01", "Cabinet"),
  ("Cabinet_bar_02", "Cabinet"),
  ("Cabinet_bar_03", "Cabinet"),
  ("CounterTop_bar_01", "CounterTop"),
  ("Fridge_bar_01", "Fridge"),
  ("Microwave_bar_01", "Microwave"),
  ("Sink_bar_01_bar_SinkBasin", "SinkBasin"),
  ("Desk_bar_01", "Desk"),
]
PLACES = [
  ("Apple_bar_01", "Apple", "CounterTop_bar_01"),
  ("Apple_bar_02", "Apple", "Fridge_bar_01"),
  ("Knife_bar_01", "Knife", "CounterTop_bar_01"),
  ("Mug_bar_01", "Mug", "Cabinet_bar_02"),
  ("DeskLamp_bar_01", "DeskLamp", "Desk_bar_01"),
  ("Bowl_bar_01", "Bowl", "Cabinet_bar_02"),
]


def kitchen(
  task="pick_heat_then_place_in_recep",
  obj="Apple",
  parent="CounterTop",
  toggle="",
):
  # Apple_bar_02 sits in the fridge; the countertop
  # apple must not already satisfy the goal.
  places = (
    PLACES
    if task != "pick_and_place_simple"
    else [p for p in PLACES if p[0] != "Apple_bar_01"]
  )
  return assemble_game(task, obj, parent, toggle, 1, RECS, places, "kitchen", 1)


def test_names_and_lists_follow_alfworld_demangler():
  names = demangle_names(
    ["Cabinet_bar_01", "Cabinet_bar_02", "Sink_bar_01_bar_SinkBasin", "agent1"]
  )
  # Alphabetically first id gets the largest
  # number; 'basin' ids become sinkbasin.
  assert (
    names["cabinet_bar_01"] == "cabinet 2"
    and names["cabinet_bar_02"] == "cabinet 1"
  )
  assert names["sink_bar_01_bar_sinkbasin"] == "sinkbasin 1"
  assert display_list([]) == "nothing" and display_list(["a x"]) == "a x"
  assert display_list(["a x", "a y"]) == "a x, and a y"
  assert display_list(["a x", "a y", "a z"]) == "a x, a y, and a z"


def test_transcript_strings():
  """Strings of the spec's TextWorld transcripts
  (alfworld-and-coding.md 2, machine-and-packages.md 5)."""
  env = make_env("native", 1)
  obs, infos = env.reset([kitchen()])
  assert obs[0] == (
    "-= Welcome to TextWorld, ALFRED! =-\n\n"
    "You are in the middle of a room. Looking quickly around you, you see a "
    "cabinet 3, a cabinet 2, a cabinet 1, a countertop 1, a desk 1, a "
    "fridge 1, a microwave 1, and a sinkbasin 1.\n\n"
    "Your task is to: heat some apple and put it in countertop."
  )
  assert infos["admissible_commands"][0] == sorted(
    infos["admissible_commands"][0]
  )
  assert (
    "help" in infos["admissible_commands"][0]
    and "look" in infos["admissible_commands"][0]
  )
  expect = [
    (
      "look",
      "You are in the middle of a room. Looking quickly around you, you see "
      "nothing.",
    ),
    (
      "go to countertop 1",
      "You arrive at countertop 1. On the countertop 1, you see a apple 2, and "
      "a knife 1.",
    ),
    ("look", "You are facing the countertop 1. Next to it, you see nothing."),
    ("inventory", "You are not carrying anything."),
    ("go to cabinet 2", "You arrive at cabinet 2. The cabinet 2 is closed."),
    (
      "open cabinet 2",
      "You open the cabinet 2. The cabinet 2 is open. In it, you see a bowl 1, "
      "and a mug 1.",
    ),
    ("take mug 1 from cabinet 2", "You pick up the mug 1 from the cabinet 2."),
    ("inventory", "You are carrying: a mug 1."),
    (
      "go to microwave 1",
      "You arrive at microwave 1. The microwave 1 is closed.",
    ),
    (
      "heat mug 1 with microwave 1",
      "You heat the mug 1 using the microwave 1.",
    ),
    ("examine mug 1", "This is a hot mug 1."),
    ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
    ("cool mug 1 with fridge 1", "You cool the mug 1 using the fridge 1."),
    ("examine mug 1", "This is a cold mug 1."),
    (
      "go to sinkbasin 1",
      "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
    ),
    (
      "clean mug 1 with sinkbasin 1",
      "You clean the mug 1 using the sinkbasin 1.",
    ),
    ("examine mug 1", "This is a cool and clean mug 1."),
    ("move mug 1 to sinkbasin 1", "You move the mug 1 to the sinkbasin 1."),
    (
      "go to desk 1",
      "You arrive at desk 1. On the desk 1, you see a desklamp 1.",
    ),
    ("use desklamp 1", "You turn on the desklamp 1."),
    ("jump around", "Nothing happens."),
    ("close cabinet 2", "Nothing happens."),  # not at cabinet 2 any more
  ]
  for cmd, text in expect:
    obs, won, done, infos = env.step([cmd])
    assert obs[0] == text, cmd
    assert won == [False] and done == [False]
  env.step(["go to cabinet 2"])
  obs, *_ = env.step(["close cabinet 2"])
  assert obs[0] == "You close the cabinet 2."
  obs, *_ = env.step(["help"])
  assert obs[0].startswith("Available commands:\n  look:") and obs[0].endswith(
    "sharp object\n"
  )


def test_rules_admissible_and_win():
  cg = CompiledGame(kitchen())
  st = cg.initial_state()
  cg.step(st, "go to countertop 1")
  adm = cg.admissible_commands(st)
  assert "go to countertop 1" not in adm  # no self-loop go to
  assert {
    "take apple 2 from countertop 1",
    "take knife 1 from countertop 1",
    "examine countertop 1",
  } <= set(adm)
  assert "examine apple 2" not in adm  # only held objects can be examined
  cg.step(st, "take knife 1 from countertop 1")
  adm = cg.admissible_commands(st)
  assert (
    "slice apple 2 with knife 1" in adm
    and "take apple 2 from countertop 1" not in adm
  )  # hands full
  assert "examine knife 1" in adm
  cg.step(
    st, "go to fridge 1"
  )  # closed fridge: its apple can still be sliced (objectAtLocation)
  assert "slice apple 1 with knife 1" in cg.admissible_commands(st)
  assert "move knife 1 to fridge 1" not in cg.admissible_commands(
    st
  )  # closed and cannot contain knives
  env = make_env("native", 1)
  env.reset([kitchen()])
  for cmd in [
    "go to fridge 1",
    "open fridge 1",
    "take apple 1 from fridge 1",
    "go to microwave 1",
    "heat apple 1 with microwave 1",
    "go to countertop 1",
  ]:
    _, won, done, _ = env.step([cmd])
    assert won == [False]
  obs, won, done, _ = env.step(["move apple 1 to countertop 1"])
  assert won == [True] and done == [True]


def test_unknown_command_changes_nothing_and_finished_rows_are_refused():
  env = make_env("native", 2)
  games = [kitchen(), kitchen("pick_cool_then_place_in_recep")]
  obs0, infos0 = env.reset(games)
  obs, won, done, infos = env.step(["fly to the moon", "  go to desk 1  "])
  assert (
    obs[0] == "Nothing happens."
    and infos["admissible_commands"][0] == infos0["admissible_commands"][0]
  )
  assert obs[1].startswith("You arrive at desk 1.")  # commands are stripped
  with pytest.raises(ValueError):
    env.step(["look"])  # wrong number of rows
  env2 = make_env("native", 1, max_steps=2)
  env2.reset([kitchen()])
  env2.step(["look"])
  _, _, done, _ = env2.step(["look"])
  assert done == [True]
  with pytest.raises(ValueError, match="has ended"):
    env2.step(["look"])
  env2.step([None])  # None for a finished row is fine
  with pytest.raises(ValueError):
    make_env("nonsense", 1)


def test_game_serialisation_and_files(tmp_path):
  g = kitchen()
  assert pickle.loads(pickle.dumps(g)) == g
  d = json.loads(json.dumps(g.to_dict()))
  assert Game.from_dict(d) == g and d["game_id"] == g.game_id
  path = write_game(g, str(tmp_path), "train")
  assert (
    "/json_2.1.1/train/pick_heat_then_place_in_recep-Apple-None-CounterTop-1/trial_T"
    in path
  )
  assert load_game(path) == g
  traj = json.loads(
    (tmp_path / path.rsplit("/", 1)[0] / "traj_data.json").read_text()
  )
  assert (
    traj["task_type"] == g.task_type
    and traj["pddl_params"]["object_target"] == "Apple"
  )


def test_bad_game_files_give_clear_errors(tmp_path):
  bad = tmp_path / "broken.tw-pddl"
  bad.write_text("{not json")
  with pytest.raises(ValueError, match="broken.tw-pddl"):
    load_game(bad)
  good = json.loads(open(write_game(kitchen(), str(tmp_path), "train")).read())
  unsolvable = dict(good, solvable=False)
  (tmp_path / "u.tw-pddl").write_text(json.dumps(unsolvable))
  with pytest.raises(ValueError, match="u.tw-pddl.*solvable"):
    load_game(tmp_path / "u.tw-pddl")
  # A goal that cannot be reached (no fridge can ever
  # hold a knife) is refused by the expert check.
  impossible = dict(
    good,
    pddl_problem=good["pddl_problem"].replace(
      "(objectType ?o AppleType)", "(objectType ?o KnifeType)"
    ),
  )
  (tmp_path / "i.tw-pddl").write_text(json.dumps(impossible))
  with pytest.raises(ValueError, match="i.tw-pddl.*not solvable"):
    load_game(tmp_path / "i.tw-pddl")
  truncated = dict(good, pddl_problem=good["pddl_problem"][:-40])
  (tmp_path / "t.tw-pddl").write_text(json.dumps(truncated))
  with pytest.raises(ValueError, match="t.tw-pddl"):
    load_game(tmp_path / "t.tw-pddl")


ALFRED_STYLE_PROBLEM = """(define (problem plan_trial_T20190908_000001_000001)
(:domain alfred)
(:objects
agent1 - agent
AppleType - otype
KnifeType - otype
ButterKnifeType - otype
CounterTopType - rtype
FridgeType - rtype
MicrowaveType - rtype
SinkBasinType - rtype
Apple_bar__plus_01_dot_00_bar__plus_00_dot_90_bar__minus_01_dot_20 - object
Apple_bar__minus_00_dot_47_bar__plus_01_dot_15_bar__plus_00_dot_48 - object
CounterTop_bar__minus_00_dot_08_bar__plus_01_dot_15_bar_00_dot_00 - receptacle
Fridge_bar__minus_02_dot_10_bar__plus_00_dot_00_bar__plus_01_dot_07 - receptacle
Sink_bar__minus_01_dot_99_bar__plus_01_dot_14_bar__minus_00_dot_44_bar_\
SinkBasin - receptacle
loc_bar__minus_4_bar_0_bar_3_bar_45 - location
loc_bar_4_bar_1_bar_0_bar_45 - location
loc_bar_2_bar_2_bar_1_bar_60 - location
loc_bar__minus_6_bar_4_bar_1_bar_30 - location
)
(:init
(atLocation agent1 loc_bar__minus_6_bar_4_bar_1_bar_30)
(= (distance loc_bar_4_bar_1_bar_0_bar_45 loc_bar_2_bar_2_bar_1_bar_60) 3)
(receptacleType \
CounterTop_bar__minus_00_dot_08_bar__plus_01_dot_15_bar_00_dot_00 \
CounterTopType)
(receptacleType \
Fridge_bar__minus_02_dot_10_bar__plus_00_dot_00_bar__plus_01_dot_07 FridgeType)
(receptacleType \
Sink_bar__minus_01_dot_99_bar__plus_01_dot_14_bar__minus_00_dot_44_bar_\
SinkBasin SinkBasinType)
(receptacleAtLocation \
CounterTop_bar__minus_00_dot_08_bar__plus_01_dot_15_bar_00_dot_00 \
loc_bar_4_bar_1_bar_0_bar_45)
(receptacleAtLocation \
Fridge_bar__minus_02_dot_10_bar__plus_00_dot_00_bar__plus_01_dot_07 \
loc_bar__minus_4_bar_0_bar_3_bar_45)
(receptacleAtLocation \
Sink_bar__minus_01_dot_99_bar__plus_01_dot_14_bar__minus_00_dot_44_bar_\
SinkBasin loc_bar_2_bar_2_bar_1_bar_60)
(openable Fridge_bar__minus_02_dot_10_bar__plus_00_dot_00_bar__plus_01_dot_07)
(objectType Apple_bar__plus_01_dot_00_bar__plus_00_dot_90_bar__minus_01_dot_20 \
AppleType)
(objectType Apple_bar__minus_00_dot_47_bar__plus_01_dot_15_bar__plus_00_dot_48 \
AppleType)
(inReceptacle \
Apple_bar__plus_01_dot_00_bar__plus_00_dot_90_bar__minus_01_dot_20 \
Fridge_bar__minus_02_dot_10_bar__plus_00_dot_00_bar__plus_01_dot_07)
(inReceptacle \
Apple_bar__minus_00_dot_47_bar__plus_01_dot_15_bar__plus_00_dot_48 \
Sink_bar__minus_01_dot_99_bar__plus_01_dot_14_bar__minus_00_dot_44_bar_\
SinkBasin)
(objectAtLocation \
Apple_bar__plus_01_dot_00_bar__plus_00_dot_90_bar__minus_01_dot_20 \
loc_bar__minus_4_bar_0_bar_3_bar_45)
(objectAtLocation \
Apple_bar__minus_00_dot_47_bar__plus_01_dot_15_bar__plus_00_dot_48 \
loc_bar_2_bar_2_bar_1_bar_60)
(pickupable Apple_bar__plus_01_dot_00_bar__plus_00_dot_90_bar__minus_01_dot_20)
(pickupable Apple_bar__minus_00_dot_47_bar__plus_01_dot_15_bar__plus_00_dot_48)
(coolable Apple_bar__plus_01_dot_00_bar__plus_00_dot_90_bar__minus_01_dot_20)
(coolable Apple_bar__minus_00_dot_47_bar__plus_01_dot_15_bar__plus_00_dot_48)
(isCool Apple_bar__plus_01_dot_00_bar__plus_00_dot_90_bar__minus_01_dot_20)
(canContain CounterTopType AppleType)
(canContain FridgeType AppleType)
(canContain SinkBasinType AppleType)
)
(:goal (and (exists (?r # receptacle) (exists (?o # object) (and (coolable ?o) \
(objectType ?o AppleType)
  (receptacleType ?r CounterTopType) (isCool ?o) (inReceptacle ?o ?r))))))
)
""".replace(" # ", " - ")


def alfred_style_file(tmp_path) -> str:
  from rla_jax.envs.alfworld.pddl_io import read_logic

  domain, grammar = read_logic()
  path = tmp_path / "game.tw-pddl"
  path.write_text(
    json.dumps(
      {
        "pddl_domain": domain,
        "pddl_problem": ALFRED_STYLE_PROBLEM,
        "solvable": True,
        "grammar": grammar.replace(
          "UNKNOWN GOAL", "cool some apple and put it in countertop"
        ),
      }
    )
  )
  return str(path)


def test_loads_alfred_style_problem(tmp_path):
  g = load_game(alfred_style_file(tmp_path))
  assert (
    g.task_type == "pick_cool_then_place_in_recep"
    and g.parent_target == "CounterTop"
  )
  env = make_env("native", 1)
  obs, _ = env.reset([g])
  assert "you see a countertop 1, a fridge 1, and a sinkbasin 1." in obs[0]
  # The apple in the fridge starts cool (ALFRED quirk): fetch it and place it.
  for cmd in ["go to fridge 1", "open fridge 1"]:
    obs, won, _, _ = env.step([cmd])
  # ids sort '_minus' < '_plus', so the sink apple
  # (first id) is apple 2, the fridge apple apple 1
  assert (
    obs[0]
    == "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1."
  )
  for cmd in [
    "take apple 1 from fridge 1",
    "go to countertop 1",
    "move apple 1 to countertop 1",
  ]:
    obs, won, _, _ = env.step([cmd])
  assert won == [True]
