"""TextWorld backend of the batched ALFWorld env: runs games through the
installed alfworld 0.4.2 / textworld 1.7.0 engine (``PddlEnv`` wrapped in
ALFWorld's ``AlfredDemangler`` and ``AlfredInfos``, exactly the stack
``AlfredTWEnv`` uses), one env per row, stepped in turn.

Games are written as ALFWorld folders under a private temporary
``$ALFWORLD_DATA`` (set before alfworld is imported, so it does not create
``~/.cache/alfworld``). Slow: seconds per reset, ~50-170 ms per step
(perf-anchors section 3).
"""

from __future__ import annotations

import os
import tempfile

from rla_jax.envs.alfworld.batched_env import BatchedEnv
from rla_jax.envs.alfworld.game import Game
from rla_jax.envs.alfworld.pddl_io import write_game

_DATA_DIR: str | None = None


def _import_textworld():
  global _DATA_DIR
  if _DATA_DIR is None:
    _DATA_DIR = os.environ.get("ALFWORLD_DATA") or tempfile.mkdtemp(
      prefix="rla_alfworld_"
    )
    os.environ["ALFWORLD_DATA"] = _DATA_DIR
  try:
    import textworld
    from alfworld.agents.environment.alfred_tw_env import (
      AlfredDemangler,
      AlfredInfos,
    )
    from textworld.envs.pddl import PddlEnv
  except ImportError as e:  # optional dependency
    raise ImportError(
      "the 'textworld' ALFWorld backend needs `pip install alfworld==0.4.2 "
      "textworld==1.7.0`"
    ) from e
  return textworld, PddlEnv, AlfredDemangler, AlfredInfos


class TextWorldBatchedEnv(BatchedEnv):
  backend = "textworld"

  def __init__(self, batch_size: int, max_steps: int):
    super().__init__(batch_size, max_steps)
    self._tw = _import_textworld()
    self._envs: list = [None] * batch_size
    self._paths: dict[str, str] = {}

  def game_path(self, game: Game) -> str:
    if game.game_id not in self._paths:
      self._paths[game.game_id] = write_game(
        game, os.path.join(_DATA_DIR, "rla_games"), "train"
      )
    return self._paths[game.game_id]

  def _reset_row(self, i: int, game: Game):
    textworld, PddlEnv, AlfredDemangler, AlfredInfos = self._tw
    infos = textworld.EnvInfos(
      admissible_commands=True, won=True, extras=["gamefile"]
    )
    env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
    env.load(self.game_path(game))
    self._envs[i] = env
    state = env.reset()
    return (
      state.feedback,
      list(state["admissible_commands"]),
      bool(state["won"]),
    )

  def _step_row(self, i: int, command: str):
    state, _, _ = self._envs[i].step(command)
    return (
      state.feedback,
      list(state["admissible_commands"]),
      bool(state["won"]),
    )
