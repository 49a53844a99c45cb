"""Generator: determinism across processes/hash seeds, split quotas, held-out
scenes, sizes, all evaluation games solved by the expert within 50 steps (native
engine), loader acceptance."""

import hashlib
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

os.environ.setdefault(
  "ALFWORLD_DATA", tempfile.mkdtemp(prefix="rla_alfworld_test_")
)

from rla_jax.envs.alfworld import expert_plan, generate_split, make_env
from rla_jax.envs.alfworld.rooms import split_scenes
from rla_jax.envs.alfworld.types_tables import SPLIT_QUOTAS, TASK_TYPE_NAMES

_GEN = (
  "from rla_jax.envs.alfworld import generate_split; import sys\n"
  "for s in ('valid_seen', 'valid_unseen'):\n"
  "    generate_split(s, None, seed=0, data_dir=sys.argv[1], "
  "room_size=sys.argv[2])\n"
)


def _tree_hashes(root: Path) -> dict[str, str]:
  return {
    str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted(root.rglob("*"))
    if p.is_file()
  }


@pytest.mark.parametrize("room_size", ["full"])
def test_eval_splits_are_byte_identical_across_processes_and_hash_seeds(
  tmp_path, room_size
):
  hashes = []
  for hash_seed in ("1", "987"):
    out = tmp_path / f"run{hash_seed}"
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    subprocess.run(
      [sys.executable, "-c", _GEN, str(out), room_size], check=True, env=env
    )
    hashes.append(_tree_hashes(out))
  assert hashes[0] == hashes[1]
  games = [k for k in hashes[0] if k.endswith("game.tw-pddl")]
  assert (
    sum("/valid_seen/" in k for k in games) == 140
    and sum("/valid_unseen/" in k for k in games) == 134
  )
  # the alfworld loader (AlfredTWEnv.collect_game_files) accepts every game
  alfred_tw_env = pytest.importorskip(
    "alfworld.agents.environment.alfred_tw_env"
  )
  root = tmp_path / "run1" / "json_2.1.1"
  config = {
    "dataset": {
      "data_path": str(root / "train"),
      "eval_id_data_path": str(root / "valid_seen"),
      "eval_ood_data_path": str(root / "valid_unseen"),
      "num_train_games": -1,
      "num_eval_games": -1,
    },
    "env": {"task_types": [1, 2, 3, 4, 5, 6], "goal_desc_human_anns_prob": 0.0},
  }
  for split, n in (
    ("eval_in_distribution", 140),
    ("eval_out_of_distribution", 134),
  ):
    assert alfred_tw_env.AlfredTWEnv(config, train_eval=split).num_games == n


@pytest.mark.parametrize("room_size", ["small", "full"])
def test_eval_splits_quotas_scenes_and_expert(room_size):
  seen = generate_split("valid_seen", None, seed=0, room_size=room_size)
  unseen = generate_split("valid_unseen", None, seed=0, room_size=room_size)
  for games, split in ((seen, "valid_seen"), (unseen, "valid_unseen")):
    counts = Counter(g.task_type for g in games)
    assert [counts[t] for t in TASK_TYPE_NAMES] == list(SPLIT_QUOTAS[split])
    rooms = {g.room for g in games}
    assert (
      all(g.scene in split_scenes(split, g.room) for g in games)
      and len(rooms) == 4
    )
  assert not {g.scene for g in seen} & {g.scene for g in unseen}
  train = generate_split("train", 40, seed=0, room_size=room_size)
  assert not {g.scene for g in train} & {g.scene for g in unseen}
  n_recs = [len(g.receptacles) for g in seen + unseen]
  if room_size == "small":
    assert min(n_recs) >= 3 and max(n_recs) <= 6
  else:
    assert min(n_recs) >= 6 and max(n_recs) >= 20
  assert len({g.game_id for g in seen + unseen}) == 274
  # The expert solves all 274 evaluation games
  # within 50 steps in the native engine.
  env = make_env("native", 274)
  games = seen + unseen
  plans = [expert_plan(g) for g in games]
  assert all(p is not None and 0 < len(p) <= 50 for p in plans)
  obs, infos = env.reset(games)
  assert not any(infos["won"])
  for k in range(max(map(len, plans))):
    done = env.done
    env.step(
      [
        p[k] if k < len(p) and not d else None
        for p, d in zip(plans, done, strict=True)
      ]
    )
  assert all(env._won)
  for g in games:  # the goal text names the goal types
    assert g.object_target.lower() in g.task_text
    assert (g.toggle_target or g.parent_target).lower() in g.task_text


def test_same_seed_same_games_small_and_full_share_tasks():
  a = generate_split("valid_unseen", 20, seed=4, room_size="small")
  b = generate_split("valid_unseen", 20, seed=4, room_size="small")
  c = generate_split("valid_unseen", 20, seed=4, room_size="full")
  assert a == b
  assert [g.task_type for g in a] == [g.task_type for g in c]
  assert generate_split("valid_unseen", 20, seed=5, room_size="small") != a


def test_train_split_covers_all_task_types_and_bad_arguments():
  train = generate_split("train", 60, seed=1, room_size="small")
  assert {g.task_type for g in train} == set(TASK_TYPE_NAMES)
  with pytest.raises(ValueError):
    generate_split("test", 3, seed=0)
  with pytest.raises(ValueError):
    generate_split("train", 3, seed=0, room_size="huge")
  with pytest.raises(ValueError):
    generate_split("train", None, seed=0)


def test_task_types_restrict_the_draw_in_alfworld_proportions():
  keep = ("pick_and_place_simple", "look_at_obj_in_light")
  games = generate_split(
    "valid_seen", 48, seed=2, room_size="small", task_types=keep
  )
  counts = Counter(g.task_type for g in games)
  assert set(counts) == set(keep)
  # valid_seen quotas: simple 35, light 13 of 48 -> exactly 35 / 13
  q = dict(zip(TASK_TYPE_NAMES, SPLIT_QUOTAS["valid_seen"], strict=True))
  assert counts == {t: q[t] * 48 // (q[keep[0]] + q[keep[1]]) for t in keep}
  for g in games[:6]:
    assert expert_plan(g)
  # None is the ALFWorld mix, unchanged by the new argument
  assert generate_split(
    "valid_seen", 12, seed=2, room_size="small"
  ) == generate_split(
    "valid_seen", 12, seed=2, room_size="small", task_types=None
  )
  for bad in (
    (),
    ("pick_and_place_simple", "pick_and_place_simple"),
    ("fly_to_moon",),
  ):
    with pytest.raises(ValueError, match="task_types"):
      generate_split("train", 3, seed=0, task_types=bad)
