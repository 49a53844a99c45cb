"""A searching expert: the oracle's plan, except that hidden objects are
searched for.

The oracle (``expert.shortest_plan``) knows where every object lies, so its
first move in most games, ``go to <the receptacle holding the object>``, cannot
be inferred from what the agent has seen. A policy imitating it learns to guess.
The searching expert acts only on what the policy's prompt shows (the room
listing of o_0, the task, where the agent stands and what it just saw):

* if the oracle's next command is a *blind fetch* (``go to R`` whose plan
  continues, after an optional ``open R``, with ``take ... from R`` or
  ``use <lamp>``), the expert searches instead: it opens the receptacle it
  stands at if that is closed, else goes to the next receptacle of the room
  listing (cyclic, from the one it stands at; from the first when it stands at
  none);
* otherwise (take what is in view, open, clean / heat / cool at a listed
  appliance, go to or put into the listed goal receptacle) it follows the
  oracle.

The rule is memoryless (a function of the current state and the room listing),
so one cycle of the listing opens every closed receptacle and the search always
ends. It is the warm-start demonstrator (``warmstart`` config
``demo_expert="search"``); progress labels (``expert.label_progress``) stay the
oracle's.
"""

from __future__ import annotations

import re

from rla_jax.envs.alfworld.engine import CompiledGame, WorldState
from rla_jax.envs.alfworld.expert import replay, shortest_plan
from rla_jax.envs.alfworld.game import Game


def is_blind_fetch(plan: list[str]) -> bool:
  """True iff ``plan`` starts with ``go to R`` only to fetch something from R:
  ``go to R`` [``open R``] then ``take X from R`` or ``use X``."""
  if not plan or not plan[0].startswith("go to "):
    return False
  rec = plan[0][len("go to ") :]
  rest = plan[1:]
  if rest and rest[0] == f"open {rec}":
    rest = rest[1:]
  return bool(rest) and (
    rest[0].endswith(f" from {rec}")
    and rest[0].startswith("take ")
    or rest[0].startswith("use ")
  )


def search_move(cg: CompiledGame, st: WorldState) -> str:
  """Open the closed receptacle here, else go to the next one of the room
  listing."""
  here = cg.recs_at_loc[st.agent_loc]
  for r in here:
    if cg.openable[r] and r not in st.opened:
      return f"open {cg.rec_name[r]}"
  order = cg.all_recs_sorted
  k = order.index(here[0]) + 1 if here else 0
  return f"go to {cg.rec_name[order[k % len(order)]]}"


def search_next_action(
  game: Game, actions_so_far: list[str], readable_ties: bool = False
) -> str | None:
  """The searching expert's next command (None if the game is won or
  unsolvable); with readable_ties, where it follows the oracle it takes the
  lowest-numbered of equally short choices (`lowest_equivalent`)."""
  cg, st, won = replay(game, actions_so_far)
  plan = None if won else shortest_plan(cg, st)
  if not plan:
    return None
  if is_blind_fetch(plan):
    return search_move(cg, st)
  return lowest_equivalent(cg, st, plan) if readable_ties else plan[0]


_NUMBER = re.compile(r"\d+")


def lowest_equivalent(cg: CompiledGame, st: WorldState, plan: list[str]) -> str:
  """plan[0], or the admissible command of the same words with the lowest
  instance numbers that also starts a shortest plan.

  The oracle breaks ties between equal objects or receptacles ("take apple 2"
  or "take apple 1", "go to countertop 2" or "countertop 1") by its internal
  order, which the prompt does not show; the lowest number is a rule the
  policy can read off its candidates.
  """
  first = plan[0]
  shape = _NUMBER.sub("#", first)
  same_shape = [
    c for c in cg.admissible_commands(st) if _NUMBER.sub("#", c) == shape
  ]
  for cmd in sorted(
    same_shape, key=lambda c: [int(n) for n in _NUMBER.findall(c)]
  ):
    if cmd == first:
      return first
    after = st.copy()
    cg.step(after, cmd)
    rest = [] if cg.goal_satisfied(after) else shortest_plan(cg, after)
    if rest is not None and len(rest) == len(plan) - 1:
      return cmd
  return first


def search_lowest_next_action(
  game: Game, actions_so_far: list[str]
) -> str | None:
  """`search_next_action` with readable ties."""
  return search_next_action(game, actions_so_far, readable_ties=True)
