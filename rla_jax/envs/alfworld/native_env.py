"""Native backend of the batched ALFWorld env (see env.py): steps every row
in-process."""

from __future__ import annotations

from rla_jax.envs.alfworld.batched_env import BatchedEnv
from rla_jax.envs.alfworld.expert import compiled
from rla_jax.envs.alfworld.game import Game


class NativeBatchedEnv(BatchedEnv):
  backend = "native"

  def _start_reset(self) -> None:
    self._rows = []

  def _reset_row(self, i: int, game: Game):
    cg = compiled(game)
    st = cg.initial_state()
    self._rows.append((cg, st))
    return cg.intro(st), cg.admissible_commands(st), cg.goal_satisfied(st)

  def _step_row(self, i: int, command: str):
    cg, st = self._rows[i]
    feedback, _ = cg.step(st, command)
    return feedback, cg.admissible_commands(st), cg.goal_satisfied(st)
