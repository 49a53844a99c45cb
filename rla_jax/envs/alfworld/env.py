"""Batched ALFWorld environment API shared by the native and the TextWorld
backends.

``make_env(backend, batch_size)`` -> :class:`BatchedEnv` with

* ``reset(games) -> (obs, infos)``: ``obs[i]`` is the intro text of
  ``games[i]``; ``infos = {"admissible_commands": [[str]], "won": [bool],
  "extra.gamefile": [str]}``.
* ``step(commands) -> (obs, won, done, infos)``: one command per row.
  ``done = won or steps >= max_steps`` (50, ALFWorld's episode cap). A row whose
  episode has ended must get ``None``: a command for it raises ValueError.
  ``None`` on a live row skips it (its observation and infos are repeated, its
  step count does not advance).
"""

from __future__ import annotations

from rla_jax.envs.alfworld.batched_env import MAX_STEPS, BatchedEnv

__all__ = ["BACKENDS", "MAX_STEPS", "BatchedEnv", "make_env"]

BACKENDS = ("native", "textworld")


def make_env(
  backend: str, batch_size: int, max_steps: int = MAX_STEPS
) -> BatchedEnv:
  """Batched env of the given backend name: ``"native"`` (pure Python, fast) or
  ``"textworld"`` (the installed alfworld/textworld engine; optional
  dependency)."""
  if backend == "native":
    from rla_jax.envs.alfworld.native_env import NativeBatchedEnv

    return NativeBatchedEnv(batch_size, max_steps)
  if backend == "textworld":
    from rla_jax.envs.alfworld.textworld_backend import TextWorldBatchedEnv

    return TextWorldBatchedEnv(batch_size, max_steps)
  raise ValueError(
    f"unknown ALFWorld backend {backend!r}; expected one of {BACKENDS}"
  )
