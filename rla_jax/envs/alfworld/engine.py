"""Native ALFWorld engine: the ALFRED PDDL domain (alfworld ``alfred.pddl``) +
grammar (``alfred.twl2``) semantics re-implemented in plain Python.

``CompiledGame`` holds a game's static data (names, types, affordances,
canContain), a ``WorldState`` its dynamic facts. ``admissible_commands`` grounds
every applicable action and renders it (sorted, de-duplicated, as TextWorld's
PddlEnv); ``apply_command`` executes a command only if it exactly equals an
admissible one (after ``strip()``), else the feedback is ``Nothing happens.``
and the state is unchanged. ``goal_satisfied`` evaluates the PDDL goal.
"""

from __future__ import annotations

import copy
import dataclasses

from rla_jax.envs.alfworld.game import PROPERTY_PREDICATES, Game
from rla_jax.envs.alfworld.text import (
  HELP_TEXT,
  INTRO_HEADER,
  NOTHING_HAPPENS,
  demangle_names,
  display_list,
  examine_object_text,
  with_article,
)


class CompiledGame:
  """Static, index-based view of a Game (objects 0..O-1, receptacles 0..R-1,
  locations 0..L-1)."""

  def __init__(self, game: Game):
    self.game = game
    locs = self._index_entities(game)
    self._name_entities(locs)
    self._order_listings(locs)
    self._read_affordances(game)
    self.can_contain = {(r.lower(), o.lower()) for r, o in game.can_contain}
    self.target = game.object_target.lower()
    self.parent = game.parent_target.lower()
    self.toggle = game.toggle_target.lower()
    self.intro_task = f"Your task is to: {game.task_text}."

  def _index_entities(self, game: Game) -> list[str]:
    """Lower-cased ids, types and index maps of objects, receptacles and
    locations; returns the sorted location ids."""
    self.obj_ids = [o.lower() for o, _ in game.objects]
    self.obj_type = [t.lower() for _, t in game.objects]
    self.rec_ids = [r.lower() for r, _, _ in game.receptacles]
    self.rec_type = [t.lower() for _, t, _ in game.receptacles]
    locs = sorted(
      {game.agent_start.lower()}
      | {loc.lower() for _, _, loc in game.receptacles}
      | {f[2].lower() for f in game.facts if f[0] == "objectAtLocation"}
    )
    self.loc_index = {loc: i for i, loc in enumerate(locs)}
    self.rec_loc = [
      self.loc_index[loc.lower()] for _, _, loc in game.receptacles
    ]
    self.oi = {o: i for i, o in enumerate(self.obj_ids)}
    self.ri = {r: i for i, r in enumerate(self.rec_ids)}
    return locs

  def _name_entities(self, locs: list[str]) -> None:
    """Display names of objects and receptacles (demangled ids)."""
    names = demangle_names(self.obj_ids + self.rec_ids + locs)
    self.obj_name = [names[o] for o in self.obj_ids]
    self.rec_name = [names[r] for r in self.rec_ids]

  def _order_listings(self, locs: list[str]) -> None:
    """Listing orders of TextWorld queries: sorted by entity id."""
    self.obj_rank = {
      o: k
      for k, o in enumerate(
        sorted(range(len(self.obj_ids)), key=self.obj_ids.__getitem__)
      )
    }
    self.recs_at_loc = [
      sorted(
        (r for r in range(len(self.rec_ids)) if self.rec_loc[r] == loc_idx),
        key=self.rec_ids.__getitem__,
      )
      for loc_idx in range(len(locs))
    ]
    self.all_recs_sorted = sorted(
      range(len(self.rec_ids)),
      key=lambda r: (self.rec_ids[r], locs[self.rec_loc[r]]),
    )

  def _read_affordances(self, game: Game) -> None:
    """Per-entity affordance flags (openable, pickupable, ...) from the
    game's unary facts."""
    props = {p: set() for p in PROPERTY_PREDICATES}
    for f in game.facts:
      if f[0] in props:
        props[f[0]].add(f[1].lower())
    self.openable = [r in props["openable"] for r in self.rec_ids]
    self.pickupable = [o in props["pickupable"] for o in self.obj_ids]
    self.cleanable = [o in props["cleanable"] for o in self.obj_ids]
    self.heatable = [o in props["heatable"] for o in self.obj_ids]
    self.coolable = [o in props["coolable"] for o in self.obj_ids]
    self.sliceable = [o in props["sliceable"] for o in self.obj_ids]
    self.toggleable = [o in props["toggleable"] for o in self.obj_ids]
    self.recep_object = [o in props["isReceptacleObject"] for o in self.obj_ids]
    self.is_knife = [t in ("knife", "butterknife") for t in self.obj_type]

  def initial_state(self) -> WorldState:
    g, n_o = self.game, len(self.obj_ids)
    st = WorldState(
      agent_loc=self.loc_index[g.agent_start.lower()],
      held=[],
      contents=[set() for _ in self.rec_ids],
      obj_recs=[set() for _ in range(n_o)],
      obj_at=[set() for _ in range(n_o)],
      inner=[set() for _ in range(n_o)],
    )
    flag_sets = {
      "opened": st.opened,
      "isClean": st.clean,
      "isHot": st.hot,
      "isCool": st.cool,
      "isSliced": st.sliced,
      "isOn": st.on,
      "isToggled": st.toggled,
    }
    for f in g.facts:
      if f[0] == "inReceptacle":
        o, r = self.oi[f[1].lower()], self.ri[f[2].lower()]
        st.contents[r].add(o)
        st.obj_recs[o].add(r)
      elif f[0] == "objectAtLocation":
        st.obj_at[self.oi[f[1].lower()]].add(self.loc_index[f[2].lower()])
      elif f[0] == "inReceptacleObject":
        st.inner[self.oi[f[2].lower()]].add(self.oi[f[1].lower()])
      elif f[0] == "opened":
        st.opened.add(self.ri[f[1].lower()])
      elif f[0] in flag_sets:
        flag_sets[f[0]].add(self.oi[f[1].lower()])
    return st

  # ---------------------------------------------------------------- text pieces
  def sorted_objs(self, objs) -> list[int]:
    return sorted(objs, key=self.obj_rank.__getitem__)

  def examine_receptacle(self, st: WorldState, r: int) -> str:
    name = self.rec_name[r]
    if self.openable[r]:
      if r not in st.opened:
        return f"The {name} is closed."
      items = with_article(
        [self.obj_name[o] for o in self.sorted_objs(st.contents[r])]
      )
      return f"The {name} is open. In it, you see {display_list(items)}."
    items = with_article(
      [self.obj_name[o] for o in self.sorted_objs(st.contents[r])]
    )
    return f"On the {name}, you see {display_list(items)}."

  def look(self, st: WorldState, intro: bool = False) -> str:
    here = self.recs_at_loc[st.agent_loc]
    if here:
      names = display_list([self.rec_name[r] for r in here])
      return f"You are facing the {names}. Next to it, you see nothing."
    recs = self.all_recs_sorted if intro else here
    return (
      "You are in the middle of a room. Looking quickly around you, you see "
      f"{display_list(with_article([self.rec_name[r] for r in recs]))}."
    )

  def intro(self, st: WorldState) -> str:
    return f"{INTRO_HEADER}\n\n{self.look(st, intro=True)}\n\n{self.intro_task}"

  def examine_object(self, st: WorldState, o: int) -> str:
    return examine_object_text(
      self.obj_name[o],
      receptacle_object=self.recep_object[o],
      inner=[self.obj_name[i] for i in self.sorted_objs(st.inner[o])],
      clean=o in st.clean,
      hot=o in st.hot,
      cool=o in st.cool,
      sliced=o in st.sliced,
      toggleable=self.toggleable[o],
      toggled=o in st.toggled,
      sliceable=self.sliceable[o],
    )

  # ------------------------------------------------------------------ actions
  def actions(self, st: WorldState) -> dict[str, tuple]:
    """All applicable grounded actions, keyed by their command text."""
    acts: dict[str, tuple] = {
      "help": ("help",),
      "inventory": ("inventory",),
      "look": ("look",),
    }
    loc, held = st.agent_loc, st.held
    for r in range(len(self.rec_ids)):
      if (
        self.rec_loc[r] != loc
      ):  # Fast Downward drops GotoLocation with lStart == lEnd
        acts.setdefault(f"go to {self.rec_name[r]}", ("goto", r))
    for r in self.recs_at_loc[loc]:
      rn, rtype = self.rec_name[r], self.rec_type[r]
      acts.setdefault(f"examine {rn}", ("examine_r", r))
      accessible = (not self.openable[r]) or r in st.opened
      if self.openable[r]:
        if r in st.opened:
          acts.setdefault(f"close {rn}", ("close", r))
        else:
          acts.setdefault(f"open {rn}", ("open", r))
      for o in st.contents[r]:
        on = self.obj_name[o]
        if accessible and self.pickupable[o] and not held:
          acts.setdefault(f"take {on} from {rn}", ("take", o, r))
        if self.toggleable[o]:
          acts.setdefault(f"use {on}", ("use", o))
      for h in held:
        hn = self.obj_name[h]
        if accessible and (rtype, self.obj_type[h]) in self.can_contain:
          acts.setdefault(f"move {hn} to {rn}", ("put", h, r))
        if rtype == "sinkbasin" and self.cleanable[h]:
          acts.setdefault(f"clean {hn} with {rn}", ("clean", h, r))
        if rtype == "microwave" and self.heatable[h]:
          acts.setdefault(f"heat {hn} with {rn}", ("heat", h, r))
        if rtype == "fridge" and self.coolable[h]:
          acts.setdefault(f"cool {hn} with {rn}", ("cool", h, r))
    # Only the held object can be examined: the engine never grounds
    # examineObject's "object in an open receptacle here" disjunct (checked
    # against TextWorld).
    for h in held:
      acts.setdefault(f"examine {self.obj_name[h]}", ("examine_o", h))
      if self.is_knife[h]:
        for co in range(len(self.obj_ids)):
          if self.sliceable[co] and loc in st.obj_at[co]:
            acts.setdefault(
              f"slice {self.obj_name[co]} with {self.obj_name[h]}",
              ("slice", co, h),
            )
    return acts

  def admissible_commands(self, st: WorldState) -> list[str]:
    return sorted(self.actions(st))

  def apply(self, st: WorldState, action: tuple) -> str:
    """Apply one grounded action in place; returns its feedback text."""
    handler = self._ACTION_HANDLERS.get(action[0])
    if handler is None:
      raise ValueError(f"unknown action kind {action[0]!r}")
    return handler(self, st, action)

  # One handler per action kind: ``(self, st, action) -> feedback``, mutating
  # ``st`` in place (dispatched through ``_ACTION_HANDLERS`` below).
  def _apply_goto(self, st: WorldState, action: tuple) -> str:
    """Walk to receptacle ``action[1]`` and describe it."""
    r = action[1]
    st.agent_loc = self.rec_loc[r]
    return f"You arrive at {self.rec_name[r]}. {self.examine_receptacle(st, r)}"

  def _apply_open(self, st: WorldState, action: tuple) -> str:
    """Open receptacle ``action[1]`` and describe it."""
    st.opened.add(action[1])
    return (
      f"You open the {self.rec_name[action[1]]}. "
      f"{self.examine_receptacle(st, action[1])}"
    )

  def _apply_close(self, st: WorldState, action: tuple) -> str:
    """Close receptacle ``action[1]``."""
    st.opened.discard(action[1])
    return f"You close the {self.rec_name[action[1]]}."

  def _apply_take(self, st: WorldState, action: tuple) -> str:
    """Pick object ``action[1]`` up from receptacle ``action[2]``."""
    o, r = action[1], action[2]
    st.contents[r].discard(o)
    st.obj_recs[o].discard(r)
    st.obj_at[o].discard(st.agent_loc)
    st.held = self.sorted_objs(set(st.held) | {o})
    return f"You pick up the {self.obj_name[o]} from the {self.rec_name[r]}."

  def _apply_put(self, st: WorldState, action: tuple) -> str:
    """Put held object ``action[1]`` into receptacle ``action[2]``."""
    o, r = action[1], action[2]
    st.contents[r].add(o)
    st.obj_recs[o].add(r)
    st.obj_at[o].add(st.agent_loc)
    st.held = []
    return f"You move the {self.obj_name[o]} to the {self.rec_name[r]}."

  def _apply_heat(self, st: WorldState, action: tuple) -> str:
    """Heat object ``action[1]`` with receptacle ``action[2]`` (un-cools it)."""
    o = action[1]
    st.hot.add(o)
    st.cool.discard(o)
    return (
      f"You heat the {self.obj_name[o]} using the {self.rec_name[action[2]]}."
    )

  def _apply_cool(self, st: WorldState, action: tuple) -> str:
    """Cool object ``action[1]`` with receptacle ``action[2]`` (un-heats it)."""
    o = action[1]
    st.cool.add(o)
    st.hot.discard(o)
    return (
      f"You cool the {self.obj_name[o]} using the {self.rec_name[action[2]]}."
    )

  def _apply_clean(self, st: WorldState, action: tuple) -> str:
    """Clean object ``action[1]`` with receptacle ``action[2]``."""
    o = action[1]
    st.clean.add(o)
    return (
      f"You clean the {self.obj_name[o]} using the {self.rec_name[action[2]]}."
    )

  def _apply_use(self, st: WorldState, action: tuple) -> str:
    """Toggle object ``action[1]`` (the text always says it turns on)."""
    o = action[1]
    if o in st.on:
      st.on.discard(o)
    else:
      st.on.add(o)
    st.toggled.add(o)
    return f"You turn on the {self.obj_name[o]}."

  def _apply_slice(self, st: WorldState, action: tuple) -> str:
    """Slice object ``action[1]`` with knife ``action[2]``."""
    st.sliced.add(action[1])
    return (
      f"You sliced the {self.obj_name[action[1]]} with the "
      f"{self.obj_name[action[2]]}."
    )

  def _apply_examine_r(self, st: WorldState, action: tuple) -> str:
    """Describe receptacle ``action[1]``."""
    return self.examine_receptacle(st, action[1])

  def _apply_examine_o(self, st: WorldState, action: tuple) -> str:
    """Describe held object ``action[1]``."""
    return self.examine_object(st, action[1])

  def _apply_inventory(self, st: WorldState, action: tuple) -> str:
    """List the held objects."""
    if not st.held:
      return "You are not carrying anything."
    return (
      "You are carrying: "
      f"{display_list(with_article([self.obj_name[o] for o in st.held]))}."
    )

  def _apply_look(self, st: WorldState, action: tuple) -> str:
    """Describe the agent's surroundings."""
    return self.look(st)

  def _apply_help(self, st: WorldState, action: tuple) -> str:
    """The fixed help text."""
    return HELP_TEXT

  _ACTION_HANDLERS = {
    "goto": _apply_goto,
    "open": _apply_open,
    "close": _apply_close,
    "take": _apply_take,
    "put": _apply_put,
    "heat": _apply_heat,
    "cool": _apply_cool,
    "clean": _apply_clean,
    "use": _apply_use,
    "slice": _apply_slice,
    "examine_r": _apply_examine_r,
    "examine_o": _apply_examine_o,
    "inventory": _apply_inventory,
    "look": _apply_look,
    "help": _apply_help,
  }

  def goal_satisfied(self, st: WorldState) -> bool:
    """The PDDL goal of the game's task type evaluated on ``st``."""
    tt, ot = self.game.task_type, self.obj_type
    if tt == "look_at_obj_in_light":
      if not any(ot[o] == self.target for o in st.held):
        return False
      return any(
        ot[lamp] == self.toggle and self.toggleable[lamp] and lamp in st.toggled
        for r in self.recs_at_loc[st.agent_loc]
        for lamp in st.contents[r]
      )
    need = {
      "pick_clean_then_place_in_recep": (self.cleanable, st.clean),
      "pick_heat_then_place_in_recep": (self.heatable, st.hot),
      "pick_cool_then_place_in_recep": (self.coolable, st.cool),
    }.get(tt)
    for r in range(len(self.rec_ids)):
      if self.rec_type[r] != self.parent:
        continue
      hits = [
        o
        for o in st.contents[r]
        if ot[o] == self.target
        and (need is None or (need[0][o] and o in need[1]))
      ]
      if len(hits) >= (2 if tt == "pick_two_obj_and_place" else 1):
        return True
    return False

  def step(self, st: WorldState, command: str) -> tuple[str, bool]:
    """Execute ``command`` on ``st`` in place; returns (feedback, executed)."""
    action = self.actions(st).get(command.strip())
    if action is None:
      return NOTHING_HAPPENS, False
    return self.apply(st, action), True


@dataclasses.dataclass
class WorldState:
  """Dynamic facts of one game (mutable; ``copy`` before branching)."""

  agent_loc: int
  held: list
  contents: list  # receptacle -> set of objects (inReceptacle)
  obj_recs: list  # object -> set of receptacles
  obj_at: list  # object -> set of locations (objectAtLocation)
  inner: list  # object -> set of objects inside it (inReceptacleObject)
  opened: set = dataclasses.field(default_factory=set)
  clean: set = dataclasses.field(default_factory=set)
  hot: set = dataclasses.field(default_factory=set)
  cool: set = dataclasses.field(default_factory=set)
  sliced: set = dataclasses.field(default_factory=set)
  on: set = dataclasses.field(default_factory=set)
  toggled: set = dataclasses.field(default_factory=set)

  def copy(self) -> WorldState:
    return copy.deepcopy(self)
