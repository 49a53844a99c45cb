"""Static ALFRED type tables: canContain, affordances, openables, task types,
room templates.

Type tokens use ALFRED's CamelCase spelling without the ``Type`` suffix
(``"Apple"``, ``"SinkBasin"``); the text game shows them lower-cased
(``apple 1``, ``sinkbasin 1``). The canContain and affordance tables follow
ALFRED's ``gen/constants.py`` (``VAL_RECEPTACLE_OBJECTS``,
``VAL_ACTION_OBJECTS``) as summarised in the project spec
(alfworld-and-coding.md section 4), sliced and movable-receptacle variants
omitted.
"""

from __future__ import annotations

OBJECT_TYPES = (
  "AlarmClock",
  "Apple",
  "BaseballBat",
  "BasketBall",
  "Book",
  "Bowl",
  "Box",
  "Bread",
  "ButterKnife",
  "CD",
  "Candle",
  "CellPhone",
  "Cloth",
  "CreditCard",
  "Cup",
  "DeskLamp",
  "DishSponge",
  "Egg",
  "FloorLamp",
  "Fork",
  "GlassBottle",
  "HandTowel",
  "Kettle",
  "KeyChain",
  "Knife",
  "Ladle",
  "Laptop",
  "Lettuce",
  "Mug",
  "Newspaper",
  "Pan",
  "PaperTowel",
  "Pen",
  "Pencil",
  "PepperShaker",
  "Pillow",
  "Plate",
  "Plunger",
  "Pot",
  "Potato",
  "RemoteControl",
  "SaltShaker",
  "SoapBar",
  "SoapBottle",
  "Spatula",
  "Spoon",
  "SprayBottle",
  "Statue",
  "TennisRacket",
  "TissueBox",
  "ToiletPaper",
  "ToiletPaperRoll",
  "Tomato",
  "Towel",
  "Vase",
  "Watch",
  "WateringCan",
  "WineBottle",
)

RECEPTACLE_TYPES = (
  "ArmChair",
  "BathtubBasin",
  "Bed",
  "Cabinet",
  "Cart",
  "CoffeeMachine",
  "CoffeeTable",
  "CounterTop",
  "Desk",
  "DiningTable",
  "Drawer",
  "Dresser",
  "Fridge",
  "GarbageCan",
  "HandTowelHolder",
  "LaundryHamper",
  "Microwave",
  "Ottoman",
  "Safe",
  "Shelf",
  "SideTable",
  "SinkBasin",
  "Sofa",
  "StoveBurner",
  "TVStand",
  "Toaster",
  "Toilet",
  "ToiletPaperHanger",
  "TowelHolder",
)

OPENABLE_RECEPTACLES = frozenset(
  {"Cabinet", "Drawer", "Fridge", "Microwave", "Safe"}
)

HEATABLE = frozenset(
  {"Apple", "Bread", "Cup", "Egg", "Mug", "Plate", "Potato", "Tomato"}
)
COOLABLE = frozenset(
  {
    "Apple",
    "Bowl",
    "Bread",
    "Cup",
    "Egg",
    "Lettuce",
    "Mug",
    "Pan",
    "Plate",
    "Pot",
    "Potato",
    "Tomato",
    "WineBottle",
  }
)
CLEANABLE = frozenset(
  {
    "Apple",
    "Bowl",
    "ButterKnife",
    "Cloth",
    "Cup",
    "DishSponge",
    "Egg",
    "Fork",
    "Kettle",
    "Knife",
    "Ladle",
    "Lettuce",
    "Mug",
    "Pan",
    "Plate",
    "Pot",
    "Potato",
    "SoapBar",
    "Spatula",
    "Spoon",
    "Tomato",
  }
)
SLICEABLE = frozenset({"Apple", "Bread", "Egg", "Lettuce", "Potato", "Tomato"})
TOGGLEABLE = frozenset({"DeskLamp", "FloorLamp"})
KNIVES = frozenset({"Knife", "ButterKnife"})

_TABLETOP = (
  "AlarmClock Apple BaseballBat BasketBall Book Bowl Box Bread ButterKnife CD "
  "Candle CellPhone Cloth CreditCard Cup DishSponge Egg Fork GlassBottle "
  "HandTowel Kettle KeyChain Knife Ladle Laptop Lettuce Mug Newspaper Pan "
  "PaperTowel Pen Pencil PepperShaker Plate Pot Potato RemoteControl "
  "SaltShaker SoapBar SoapBottle Spatula Spoon SprayBottle Statue TennisRacket "
  "TissueBox ToiletPaper ToiletPaperRoll Tomato Vase Watch WateringCan "
  "WineBottle"
)
_SEAT = (
  "BasketBall Book Box CellPhone Cloth CreditCard KeyChain Laptop Newspaper "
  "Pillow RemoteControl"
)

_CAN_CONTAIN_TEXT = {
  "ArmChair": _SEAT,
  "BathtubBasin": "Cloth DishSponge HandTowel SoapBar",
  "Bed": (
    "BaseballBat BasketBall Book CellPhone Laptop Newspaper Pillow TennisRacket"
  ),
  "Cabinet": (
    "Book Bowl Box CD Candle Cloth Cup DishSponge GlassBottle HandTowel Kettle "
    "Ladle Mug Newspaper Pan PepperShaker Plate Plunger Pot SaltShaker SoapBar "
    "SoapBottle SprayBottle TissueBox ToiletPaper ToiletPaperRoll Vase "
    "WateringCan WineBottle"
  ),
  "Cart": (
    "Candle Cloth DishSponge HandTowel Mug PaperTowel Plunger SoapBar "
    "SoapBottle SprayBottle Statue TissueBox ToiletPaper ToiletPaperRoll Vase"
  ),
  "CoffeeMachine": "Mug",
  "CoffeeTable": _TABLETOP,
  "CounterTop": _TABLETOP,
  "Desk": (
    "AlarmClock BasketBall Book Bowl Box CD Candle CellPhone Cloth CreditCard "
    "Cup GlassBottle KeyChain Laptop Mug Newspaper Pen Pencil Plate "
    "RemoteControl SoapBottle SprayBottle Statue TennisRacket TissueBox "
    "ToiletPaper ToiletPaperRoll Vase Watch WateringCan WineBottle"
  ),
  "DiningTable": _TABLETOP,
  "Drawer": (
    "Book ButterKnife CD Candle CellPhone Cloth CreditCard DishSponge Fork "
    "HandTowel KeyChain Knife Ladle Newspaper Pen Pencil PepperShaker "
    "RemoteControl SaltShaker SoapBar SoapBottle Spatula Spoon SprayBottle "
    "TissueBox ToiletPaper ToiletPaperRoll Watch WateringCan"
  ),
  "Dresser": (
    "AlarmClock BasketBall Book Bowl Box CD Candle CellPhone Cloth CreditCard "
    "Cup GlassBottle KeyChain Laptop Mug Newspaper Pen Pencil Plate "
    "RemoteControl SprayBottle Statue TennisRacket TissueBox ToiletPaper "
    "ToiletPaperRoll Vase Watch WateringCan WineBottle"
  ),
  "Fridge": (
    "Apple Bowl Bread Cup Egg GlassBottle Lettuce Mug Pan Plate Pot Potato "
    "Tomato WineBottle"
  ),
  "GarbageCan": (
    "Apple Bread CD Cloth DishSponge Egg HandTowel Lettuce Newspaper "
    "PaperTowel Pen Pencil Potato SoapBar SoapBottle SprayBottle TissueBox "
    "ToiletPaper ToiletPaperRoll Tomato WineBottle"
  ),
  "HandTowelHolder": "HandTowel",
  "LaundryHamper": "Cloth",
  "Microwave": "Apple Bowl Bread Cup Egg GlassBottle Mug Plate Potato Tomato",
  "Ottoman": _SEAT,
  "Safe": "CD CellPhone CreditCard KeyChain Statue Vase Watch",
  "Shelf": (
    "AlarmClock Book Bowl Box CD Candle CellPhone Cloth CreditCard Cup "
    "DishSponge GlassBottle HandTowel Kettle KeyChain Mug Newspaper PaperTowel "
    "Pen Pencil PepperShaker Plate Pot RemoteControl SaltShaker SoapBar "
    "SoapBottle SprayBottle Statue TissueBox ToiletPaper ToiletPaperRoll Vase "
    "Watch WateringCan WineBottle"
  ),
  "SideTable": _TABLETOP,
  "SinkBasin": (
    "Apple Bowl ButterKnife Cloth Cup DishSponge Egg Fork GlassBottle "
    "HandTowel Kettle Knife Ladle Lettuce Mug Pan Plate Pot Potato SoapBar "
    "Spatula Spoon Tomato"
  ),
  "Sofa": _SEAT,
  "StoveBurner": "Kettle Pan Pot",
  "TVStand": "TissueBox",
  "Toaster": "",
  "Toilet": (
    "Candle Cloth DishSponge HandTowel Newspaper PaperTowel SoapBar SoapBottle "
    "SprayBottle TissueBox ToiletPaper ToiletPaperRoll"
  ),
  "ToiletPaperHanger": "ToiletPaper ToiletPaperRoll",
  "TowelHolder": "Towel",
}

CAN_CONTAIN: dict[str, frozenset[str]] = {
  r: frozenset(v.split()) for r, v in _CAN_CONTAIN_TEXT.items()
}

#: Receptacles that may hold a lamp so that ``use {lamp}`` works (spec 4.4 lamp
#: caveat).
LAMP_HOLDERS = {
  "DeskLamp": ("Desk", "SideTable", "Dresser"),
  "FloorLamp": ("SideTable", "Dresser", "ArmChair", "Sofa"),
}

TASK_TYPES = {
  1: "pick_and_place_simple",
  2: "look_at_obj_in_light",
  3: "pick_clean_then_place_in_recep",
  4: "pick_heat_then_place_in_recep",
  5: "pick_cool_then_place_in_recep",
  6: "pick_two_obj_and_place",
}
TASK_TYPE_NAMES = tuple(TASK_TYPES[i] for i in sorted(TASK_TYPES))

#: Goal templates (ALFWorld goal_library): {obj}/{recep}/{toggle} are lower-case
#: type names.
GOAL_TEMPLATES = {
  "pick_and_place_simple": (
    "put a {obj} in {recep}",
    "put some {obj} on {recep}",
  ),
  "look_at_obj_in_light": (
    "look at {obj} under the {toggle}",
    "examine the {obj} with the {toggle}",
  ),
  "pick_clean_then_place_in_recep": (
    "put a clean {obj} in {recep}",
    "clean some {obj} and put it in {recep}",
  ),
  "pick_heat_then_place_in_recep": (
    "put a hot {obj} in {recep}",
    "heat some {obj} and put it in {recep}",
  ),
  "pick_cool_then_place_in_recep": (
    "put a cool {obj} in {recep}",
    "cool some {obj} and put it in {recep}",
  ),
  "pick_two_obj_and_place": (
    "put two {obj} in {recep}",
    "find two {obj} and put them in {recep}",
  ),
}

#: Appliance receptacle type and object affordance needed by each treatment
#: task.
TREATMENT = {
  "pick_clean_then_place_in_recep": ("SinkBasin", CLEANABLE),
  "pick_heat_then_place_in_recep": ("Microwave", HEATABLE),
  "pick_cool_then_place_in_recep": ("Fridge", COOLABLE),
}

#: Rooms in which ALFRED allows each task type (ALFRED GOALS_VALID).
VALID_ROOMS = {
  "pick_and_place_simple": ("kitchen", "livingroom", "bedroom", "bathroom"),
  "look_at_obj_in_light": ("livingroom", "bedroom"),
  "pick_clean_then_place_in_recep": ("kitchen", "bathroom"),
  "pick_heat_then_place_in_recep": ("kitchen",),
  "pick_cool_then_place_in_recep": ("kitchen",),
  "pick_two_obj_and_place": ("kitchen", "livingroom", "bedroom", "bathroom"),
}

#: Per-task-type game counts (ALFWorld data README / ReAct table), order of
#: TASK_TYPE_NAMES.
SPLIT_QUOTAS = {
  "train": (790, 308, 650, 459, 533, 813),
  "valid_seen": (35, 13, 27, 16, 25, 24),
  "valid_unseen": (24, 18, 31, 23, 21, 17),
}
DEFAULT_SPLIT_SIZES = {"valid_seen": 140, "valid_unseen": 134}

#: ALFRED scene numbers per room; the last 5 scenes of each room are held out
#: for valid_unseen.
ROOM_SCENES = {
  "kitchen": tuple(range(1, 31)),
  "livingroom": tuple(range(201, 231)),
  "bedroom": tuple(range(301, 331)),
  "bathroom": tuple(range(401, 431)),
}
HELD_OUT_SCENES_PER_ROOM = 5

#: Receptacle count ranges (min, max) per room (spec 4.4 / 6); one-of-a-kind
#: entries are (1, 1).
ROOM_RECEPTACLES = {
  "kitchen": {
    "Cabinet": (4, 12),
    "CounterTop": (1, 3),
    "Drawer": (0, 6),
    "StoveBurner": (2, 4),
    "Shelf": (0, 3),
    "DiningTable": (0, 1),
    "SideTable": (0, 1),
    "CoffeeMachine": (1, 1),
    "Fridge": (1, 1),
    "GarbageCan": (1, 1),
    "Microwave": (1, 1),
    "SinkBasin": (1, 1),
    "Toaster": (1, 1),
  },
  "bathroom": {
    "Toilet": (1, 1),
    "ToiletPaperHanger": (1, 1),
    "TowelHolder": (1, 1),
    "HandTowelHolder": (1, 2),
    "SinkBasin": (1, 2),
    "GarbageCan": (1, 1),
    "CounterTop": (0, 1),
    "BathtubBasin": (0, 1),
    "Cabinet": (0, 4),
    "Drawer": (0, 4),
    "Shelf": (0, 2),
    "Cart": (0, 1),
  },
  "bedroom": {
    "Bed": (1, 1),
    "GarbageCan": (1, 1),
    "Drawer": (1, 6),
    "Shelf": (0, 4),
    "Desk": (0, 2),
    "SideTable": (0, 2),
    "Dresser": (0, 1),
    "LaundryHamper": (0, 1),
    "ArmChair": (0, 1),
    "Safe": (0, 1),
    "Cabinet": (0, 2),
  },
  "livingroom": {
    "Sofa": (1, 1),
    "GarbageCan": (1, 1),
    "ArmChair": (0, 2),
    "CoffeeTable": (0, 1),
    "SideTable": (1, 2),
    "Drawer": (0, 6),
    "DiningTable": (0, 1),
    "TVStand": (0, 1),
    "Shelf": (0, 4),
    "Dresser": (0, 1),
    "Ottoman": (0, 1),
    "Cabinet": (0, 4),
    "Safe": (0, 1),
  },
}

ROOM_OBJECTS = {
  "kitchen": (
    "Apple",
    "Bread",
    "ButterKnife",
    "Bowl",
    "Cup",
    "DishSponge",
    "Egg",
    "Fork",
    "Knife",
    "Lettuce",
    "Mug",
    "Pan",
    "PepperShaker",
    "Plate",
    "Pot",
    "Potato",
    "SaltShaker",
    "SoapBottle",
    "Spatula",
    "Spoon",
    "Tomato",
    "Kettle",
    "Ladle",
    "WineBottle",
    "GlassBottle",
    "PaperTowel",
    "Vase",
    "Statue",
    "CellPhone",
    "CreditCard",
  ),
  "bathroom": (
    "Candle",
    "Cloth",
    "HandTowel",
    "Plunger",
    "SoapBar",
    "SoapBottle",
    "SprayBottle",
    "ToiletPaper",
    "Towel",
    "TissueBox",
    "DishSponge",
    "PaperTowel",
  ),
  "bedroom": (
    "AlarmClock",
    "Book",
    "CD",
    "CellPhone",
    "CreditCard",
    "KeyChain",
    "Laptop",
    "Pen",
    "Pencil",
    "Pillow",
    "Mug",
    "Bowl",
    "BaseballBat",
    "BasketBall",
    "Box",
    "TennisRacket",
    "Cloth",
    "TissueBox",
    "Statue",
    "Vase",
  ),
  "livingroom": (
    "Box",
    "CreditCard",
    "KeyChain",
    "Laptop",
    "Pillow",
    "RemoteControl",
    "Statue",
    "Vase",
    "Newspaper",
    "Watch",
    "WateringCan",
    "Plate",
    "TissueBox",
    "Book",
    "CellPhone",
    "Pen",
    "Pencil",
    "Bowl",
    "Candle",
  ),
}
ROOM_LAMPS = {
  "kitchen": (),
  "bathroom": (),
  "bedroom": ("DeskLamp",),
  "livingroom": ("FloorLamp", "DeskLamp"),
}


def can_contain(recep_type: str, obj_type: str) -> bool:
  """True if ALFRED allows an object of ``obj_type`` in a receptacle of
  ``recep_type``."""
  return obj_type in CAN_CONTAIN.get(recep_type, frozenset())


def canonical_type(token: str) -> str:
  """Map a type token in any case, with or without the ``Type`` suffix, to its
  CamelCase name.

  ``"appletype" -> "Apple"``, ``"FridgeType" -> "Fridge"``,
  ``"sinkbasin" -> "SinkBasin"``. Raises ValueError naming the token if it is
  not a known ALFRED object or receptacle type.
  """
  low = token.strip().lower()
  if low.endswith("type"):
    low = low[:-4]
  name = _LOWER_TO_CAMEL.get(low)
  if name is None:
    raise ValueError(f"unknown ALFRED type token {token!r}")
  return name


_LOWER_TO_CAMEL = {t.lower(): t for t in OBJECT_TYPES + RECEPTACLE_TYPES}
