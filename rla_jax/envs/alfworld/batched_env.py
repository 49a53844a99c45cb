"""The batched ALFWorld env base class (API in env.py), in its own module so
that the backends (native_env, textworld_backend) subclass it without
importing env.py, whose make_env imports them."""

from __future__ import annotations

from rla_jax.envs.alfworld.game import Game

MAX_STEPS = 50


class BatchedEnv:
  """Base class: per-row bookkeeping; subclasses implement ``_reset_row`` /
  ``_step_row`` returning ``(observation, admissible_commands, won)``."""

  backend = "base"

  def __init__(self, batch_size: int, max_steps: int = MAX_STEPS):
    if batch_size < 1:
      raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    self.batch_size, self.max_steps = batch_size, max_steps
    self.games: list[Game] = []
    self._obs: list[str] = []
    self._adm: list[list[str]] = []
    self._won: list[bool] = []
    self._steps: list[int] = []

  def _start_reset(self) -> None:
    """Hook called once per reset before the rows are reset."""

  def _reset_row(self, i: int, game: Game) -> tuple[str, list[str], bool]:
    raise NotImplementedError

  def _step_row(self, i: int, command: str) -> tuple[str, list[str], bool]:
    raise NotImplementedError

  def _infos(self) -> dict:
    return {
      "admissible_commands": [list(a) for a in self._adm],
      "won": list(self._won),
      "extra.gamefile": list(self._gamefiles),
      "steps": list(self._steps),
    }

  @property
  def done(self) -> list[bool]:
    return [
      w or s >= self.max_steps
      for w, s in zip(self._won, self._steps, strict=True)
    ]

  def reset(self, games: list[Game]) -> tuple[list[str], dict]:
    games = list(games)
    if not 1 <= len(games) <= self.batch_size:
      raise ValueError(
        f"reset needs 1..{self.batch_size} games, got {len(games)}"
      )
    for g in games:
      if not isinstance(g, Game):
        raise TypeError(f"reset expects Game objects, got {type(g).__name__}")
    self.games = games
    self._gamefiles = [f"{g.folder_name}/trial_T{g.game_id}" for g in games]
    self._start_reset()
    rows = [self._reset_row(i, g) for i, g in enumerate(games)]
    self._obs = [r[0] for r in rows]
    self._adm = [r[1] for r in rows]
    self._won = [r[2] for r in rows]
    self._steps = [0] * len(games)
    return list(self._obs), self._infos()

  def step(
    self, commands: list[str | None]
  ) -> tuple[list[str], list[bool], list[bool], dict]:
    if not self.games:
      raise RuntimeError("step called before reset")
    if len(commands) != len(self.games):
      raise ValueError(
        f"step needs {len(self.games)} commands (None for finished rows), "
        f"got {len(commands)}"
      )
    done = self.done
    for i, cmd in enumerate(commands):
      if cmd is not None and done[i]:
        raise ValueError(
          f"row {i}: episode of game {self.games[i].game_id} has ended "
          f"(won={self._won[i]}, steps={self._steps[i]}); pass None for it"
        )
      if cmd is not None and not isinstance(cmd, str):
        raise TypeError(
          f"row {i}: command must be a str or None, got {type(cmd).__name__}"
        )
    for i, cmd in enumerate(commands):
      if cmd is None:
        continue
      self._obs[i], self._adm[i], self._won[i] = self._step_row(i, cmd)
      self._steps[i] += 1
    return list(self._obs), list(self._won), self.done, self._infos()
