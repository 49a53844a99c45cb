"""Oracle expert for ALFWorld games: exact shortest plans from any state.

Every action costs one step and ``go to`` reaches any receptacle in one step, so
a shortest plan is a short sequence of *errands* (free the hands, fetch an
object, treat it with an appliance, deliver it, use a lamp) whose cost only
depends on where the agent stands and which receptacles are already open.
``shortest_plan`` enumerates every choice of put-down receptacle, target
instance(s), appliance, lamp and goal receptacle instance, simulates the command
sequence of each and keeps the shortest (ties broken by enumeration order, which
is deterministic). Its length is the exact distance-to-goal d(s) (checked
against brute-force BFS on small games in tests/test_alfworld_expert.py).

Progress label (reward-model evaluation): an action a taken in state s *makes
progress* iff d(s') = d(s) - 1 for the successor s', i.e. a lies on some
shortest path to the goal. Non-admissible commands leave s unchanged and never
make progress; so does any action once the game is won.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import permutations

from rla_jax.envs.alfworld.engine import CompiledGame, WorldState
from rla_jax.envs.alfworld.game import Game
from rla_jax.envs.alfworld.types_tables import TREATMENT

MAX_EPISODE_STEPS = 50
_VERB = {
  "pick_clean_then_place_in_recep": "clean",
  "pick_heat_then_place_in_recep": "heat",
  "pick_cool_then_place_in_recep": "cool",
}


class _Sim:
  """Command-sequence builder tracking only what step costs depend on (agent
  location, opened)."""

  def __init__(
    self, cg: CompiledGame, loc: int, opened: frozenset, cmds: tuple = ()
  ):
    self.cg, self.loc, self.opened, self.cmds = cg, loc, opened, list(cmds)

  def fork(self) -> _Sim:
    return _Sim(self.cg, self.loc, self.opened, tuple(self.cmds))

  def goto(self, r: int) -> None:
    if self.cg.rec_loc[r] != self.loc:
      self.cmds.append(f"go to {self.cg.rec_name[r]}")
      self.loc = self.cg.rec_loc[r]

  def access(self, r: int) -> None:
    self.goto(r)
    if self.cg.openable[r] and r not in self.opened:
      self.cmds.append(f"open {self.cg.rec_name[r]}")
      self.opened = self.opened | {r}

  def take(self, o: int, r: int) -> None:
    self.access(r)
    self.cmds.append(f"take {self.cg.obj_name[o]} from {self.cg.rec_name[r]}")

  def put(self, o: int, r: int) -> None:
    self.access(r)
    self.cmds.append(f"move {self.cg.obj_name[o]} to {self.cg.rec_name[r]}")

  def treat(self, verb: str, o: int, r: int) -> None:
    self.goto(r)
    self.cmds.append(f"{verb} {self.cg.obj_name[o]} with {self.cg.rec_name[r]}")

  def use(self, lamp: int, r: int) -> None:
    self.goto(r)
    self.cmds.append(f"use {self.cg.obj_name[lamp]}")


def _targets(cg: CompiledGame) -> list[int]:
  ok = {
    "pick_clean_then_place_in_recep": cg.cleanable,
    "pick_heat_then_place_in_recep": cg.heatable,
    "pick_cool_then_place_in_recep": cg.coolable,
  }.get(cg.game.task_type)
  return [
    o
    for o in range(len(cg.obj_ids))
    if cg.obj_type[o] == cg.target and (ok is None or ok[o])
  ]


def _hand_options(cg: CompiledGame, st: WorldState, targets: list[int]):
  """Ways to start: (sim, object kept in hand or None, {object: receptacle}
  relocations)."""
  sim = _Sim(cg, st.agent_loc, frozenset(st.opened))
  if not st.held:
    return [(sim, None, {})]
  if len(st.held) > 1:
    return []
  h = st.held[0]
  opts = [(sim, h, {})] if h in targets else []
  for x in range(len(cg.rec_ids)):
    if (cg.rec_type[x], cg.obj_type[h]) in cg.can_contain:
      s = sim.fork()
      s.put(h, x)
      opts.append((s, None, {h: x}))
  return opts


def _sources(
  cg: CompiledGame, st: WorldState, o: int, moved: dict
) -> list[int]:
  if o in moved:
    return [moved[o]]
  return sorted(st.obj_recs[o]) if cg.pickupable[o] else []


def _best(plans):
  best = None
  for cmds in plans:
    if best is None or len(cmds) < len(best):
      best = cmds
  return best


def _single_plans(cg: CompiledGame, st: WorldState):
  targets, goals = (
    _targets(cg),
    [r for r in range(len(cg.rec_ids)) if cg.rec_type[r] == cg.parent],
  )
  treat = TREATMENT.get(cg.game.task_type)
  flag = {
    "pick_clean_then_place_in_recep": st.clean,
    "pick_heat_then_place_in_recep": st.hot,
    "pick_cool_then_place_in_recep": st.cool,
  }.get(cg.game.task_type)
  apps = [
    r
    for r in range(len(cg.rec_ids))
    if treat and cg.rec_type[r] == treat[0].lower()
  ]
  for sim0, kept, moved in _hand_options(cg, st, targets):
    fetches = []
    if kept is not None:
      fetches.append((sim0, kept))
    else:
      for o in targets:
        for r in _sources(cg, st, o, moved):
          s = sim0.fork()
          s.take(o, r)
          fetches.append((s, o))
    for s1, o in fetches:
      treated = [s1] if (flag is None or o in flag) else []
      for a in [] if (flag is None or o in flag) else apps:
        s2 = s1.fork()
        s2.treat(_VERB[cg.game.task_type], o, a)
        treated.append(s2)
      for s2 in treated:
        for g in goals:
          if (cg.rec_type[g], cg.obj_type[o]) in cg.can_contain:
            s3 = s2.fork()
            s3.put(o, g)
            yield s3.cmds


def _two_plans(cg: CompiledGame, st: WorldState):
  targets, goals = (
    _targets(cg),
    [r for r in range(len(cg.rec_ids)) if cg.rec_type[r] == cg.parent],
  )
  for sim0, kept, moved in _hand_options(cg, st, targets):
    for g in goals:
      if (cg.rec_type[g], cg.target) not in cg.can_contain:
        continue
      inside = {
        o
        for o in targets
        if (moved.get(o) == g) or (o not in moved and g in st.obj_recs[o])
      }
      need = max(0, 2 - len(inside))
      s = sim0.fork()
      if kept is not None and need > 0:
        s.put(kept, g)
        need -= 1
      pool = [o for o in targets if o not in inside and o != kept]
      for seq in permutations(pool, need):
        partial = [s]
        for o in seq:
          nxt = []
          for p in partial:
            for r in _sources(cg, st, o, moved):
              q = p.fork()
              q.take(o, r)
              q.put(o, g)
              nxt.append(q)
          partial = nxt
        for p in partial:
          yield p.cmds


def _look_plans(cg: CompiledGame, st: WorldState):
  targets = _targets(cg)
  lamps = [
    lamp
    for lamp in range(len(cg.obj_ids))
    if cg.obj_type[lamp] == cg.toggle and cg.toggleable[lamp]
  ]
  for sim0, kept, moved in _hand_options(cg, st, targets):
    fetches = [(sim0, kept)] if kept is not None else []
    if kept is None:
      for o in targets:
        for r in _sources(cg, st, o, moved):
          s = sim0.fork()
          s.take(o, r)
          fetches.append((s, o))
    for s1, _o in fetches:
      for lamp in lamps:
        for q in sorted(st.obj_recs[lamp]):
          s2 = s1.fork()
          if lamp in st.toggled:
            if s2.loc == cg.rec_loc[q]:
              yield s2.cmds
              continue
            s2.goto(q)
          else:
            s2.use(lamp, q)
          yield s2.cmds


def shortest_plan(cg: CompiledGame, st: WorldState) -> list[str] | None:
  """Shortest command list reaching the goal from ``st`` ([] if already won,
  None if impossible)."""
  if cg.goal_satisfied(st):
    return []
  tt = cg.game.task_type
  gen = (
    _look_plans
    if tt == "look_at_obj_in_light"
    else _two_plans
    if tt == "pick_two_obj_and_place"
    else _single_plans
  )
  return _best(gen(cg, st))


def distance(cg: CompiledGame, st: WorldState) -> float:
  """d(s): number of steps of a shortest plan to the goal (inf if
  unreachable)."""
  plan = shortest_plan(cg, st)
  return float("inf") if plan is None else float(len(plan))


@lru_cache(maxsize=4096)
def compiled(game: Game) -> CompiledGame:
  return CompiledGame(game)


def replay(
  game: Game, actions: list[str]
) -> tuple[CompiledGame, WorldState, bool]:
  """Native-engine state after ``actions`` from the initial state; also whether
  it was won."""
  cg = compiled(game)
  st = cg.initial_state()
  won = cg.goal_satisfied(st)
  for a in actions:
    if won:
      raise ValueError(
        f"action {a!r} comes after the episode of game {game.game_id} was won"
      )
    cg.step(st, a)
    won = cg.goal_satisfied(st)
  return cg, st, won


def expert_plan(game: Game) -> list[str] | None:
  """Full shortest solution from the initial state (None if the game is
  unsolvable)."""
  cg = compiled(game)
  return shortest_plan(cg, cg.initial_state())


def next_action(game: Game, actions_so_far: list[str]) -> str | None:
  """The expert's next command after ``actions_so_far`` (None if won or
  unsolvable)."""
  cg, st, won = replay(game, actions_so_far)
  plan = None if won else shortest_plan(cg, st)
  return plan[0] if plan else None


def label_progress(game: Game, actions_so_far: list[str], action: str) -> bool:
  """True iff ``action`` makes progress: d(s') == d(s) - 1 with s the state
  after ``actions_so_far`` and s' after also taking ``action`` (i.e. ``action``
  is the first step of some shortest plan from s). False if s is already won, if
  s is a dead end, or if ``action`` is not admissible (it changes nothing)."""
  cg, st, won = replay(game, actions_so_far)
  if won:
    return False
  before = distance(cg, st)
  _, executed = cg.step(st, action)
  return executed and before != float("inf") and distance(cg, st) == before - 1


def verified_plan(game: Game, max_steps: int = MAX_EPISODE_STEPS) -> list[str]:
  """Expert plan checked by execution in the native engine; ValueError if the
  game is not solvable within ``max_steps``."""
  plan = expert_plan(game)
  if plan is None:
    raise ValueError(
      f"game {game.game_id} ({game.task_type}: {game.task_text}) is not "
      "solvable"
    )
  cg, st, won = replay(game, plan)
  if not won or len(plan) > max_steps:
    raise ValueError(
      f"game {game.game_id}: expert plan of {len(plan)} steps does not win "
      f"within {max_steps}"
    )
  return plan


class Expert:
  """Object wrapper of the module functions (``plan``, ``next_action``,
  ``label_progress``)."""

  plan = staticmethod(expert_plan)
  next_action = staticmethod(next_action)
  label_progress = staticmethod(label_progress)
  distance = staticmethod(
    lambda game, actions_so_far=(): distance(
      *replay(game, list(actions_so_far))[:2]
    )
  )
