"""ALFWorld-compatible text environment for rla_jax.

Public API::

    generate_split(split, num_games=None, seed=0, data_dir=None,
                   room_size="full") -> list[Game]
    write_game(game, data_dir, split) -> str
        # path of the written game.tw-pddl
    load_game(path, check_solvable=True) -> Game
        # generated or real ALFWorld game files
    make_env(backend, batch_size, max_steps=50) -> BatchedEnv
        # backend: "native" | "textworld"
    Expert / expert_plan(game) / next_action(game, actions)
        / label_progress(game, actions, action)
    perturb_game(game, direction, rng) / apply_goal_tokens(game, a, b)
        / describe_game_for_proposal(game)
    level_move(game, direction, rng) / level_variant(game, level, rng)
        # a fresh game one difficulty level up / down, same room and scene

Modules: types_tables (ALFRED tables), game (Game), pddl_io (writing game
files), pddl_read (reading them), text (surface strings), engine (native
rules), batched_env (the interface) / env (make_env) / native_env /
textworld_backend (batched envs), expert (oracle planner, progress labels),
rooms (splits, scenes, layouts), generator (tasks, levels), splits (the
games of a split), perturb (adaptation), level_moves (adaptation along the
levels).
"""

from rla_jax.envs.alfworld.env import BACKENDS, MAX_STEPS, BatchedEnv, make_env
from rla_jax.envs.alfworld.expert import (
  Expert,
  expert_plan,
  label_progress,
  next_action,
)
from rla_jax.envs.alfworld.game import Game
from rla_jax.envs.alfworld.level_moves import level_move, level_variant
from rla_jax.envs.alfworld.levels import game_level
from rla_jax.envs.alfworld.pddl_io import write_game
from rla_jax.envs.alfworld.pddl_read import load_game
from rla_jax.envs.alfworld.perturb import (
  apply_goal_tokens,
  describe_game_for_proposal,
  perturb_game,
)
from rla_jax.envs.alfworld.splits import generate_split

__all__ = [
  "BACKENDS",
  "MAX_STEPS",
  "BatchedEnv",
  "Expert",
  "Game",
  "apply_goal_tokens",
  "describe_game_for_proposal",
  "expert_plan",
  "game_level",
  "generate_split",
  "label_progress",
  "level_move",
  "level_variant",
  "load_game",
  "make_env",
  "next_action",
  "perturb_game",
  "write_game",
]
