"""Tests for rla_jax.rl.adaptation: direction,
acceptance rule, TaskPool state machine."""

import json

import pytest

from rla_jax.rl.adaptation import (
  TaskPool,
  accept_candidate,
  adaptation_direction,
)


@pytest.mark.parametrize(
  "acc, expected",
  [
    (1.0, "harder"),
    (0.8, "harder"),
    (0.875, "harder"),
    (0.79, None),
    (0.5, None),
    (0.21, None),
    (0.2, "easier"),
    (0.125, "easier"),
    (0.0, "easier"),
  ],
)
def test_adaptation_direction(acc, expected):
  assert adaptation_direction(acc) == expected


def test_adaptation_direction_custom_thresholds_and_errors():
  assert adaptation_direction(0.6, low=0.4, high=0.6) == "harder"
  assert adaptation_direction(0.5, low=0.4, high=0.6) is None
  with pytest.raises(ValueError):
    adaptation_direction(0.5, low=0.8, high=0.2)


def test_adaptation_direction_strict_low_is_the_coding_rule():
  # AlfWorld: acc <= low -> easier; coding (low_inclusive=False): acc < low
  assert adaptation_direction(0.2, low=0.2, high=0.8) == "easier"
  assert (
    adaptation_direction(0.2, low=0.2, high=0.8, low_inclusive=False) is None
  )
  assert (
    adaptation_direction(0.19, low=0.2, high=0.8, low_inclusive=False)
    == "easier"
  )
  assert (
    adaptation_direction(0.8, low=0.2, high=0.8, low_inclusive=False)
    == "harder"
  )
  pool = TaskPool(["g0", "g1", "g2"], low=0.2, high=0.8)
  accs = {"0": 0.2, "1": 0.0, "2": 0.8}
  assert pool.proposal_directions(accs) == {
    "0": "easier",
    "1": "easier",
    "2": "harder",
  }
  assert pool.proposal_directions(accs, low_inclusive=False) == {
    "1": "easier",
    "2": "harder",
  }


@pytest.mark.parametrize(
  "parent, cand, direction, expected",
  [
    # harder: 0 < cand < parent and cand >= 0.2
    (1.0, 0.5, "harder", True),
    (1.0, 0.2, "harder", True),  # bound inclusive
    (1.0, 0.125, "harder", False),  # became too hard
    (1.0, 0.0, "harder", False),  # unsolved -> never accepted
    (0.875, 0.875, "harder", False),  # not harder
    (0.875, 1.0, "harder", False),
    # easier: cand > parent and cand <= 0.8
    (0.0, 0.5, "easier", True),
    (0.0, 0.8, "easier", True),  # bound inclusive
    (0.0, 0.875, "easier", False),  # became too easy
    (0.125, 0.125, "easier", False),
    (0.2, 0.0, "easier", False),
    (0.0, 0.0, "easier", False),
  ],
)
def test_accept_candidate(parent, cand, direction, expected):
  assert accept_candidate(parent, cand, direction) is expected


def test_accept_candidate_rejects_unknown_direction():
  with pytest.raises(ValueError, match="direction"):
    accept_candidate(0.5, 0.5, "sideways")


def test_task_pool_lifecycle():
  pool = TaskPool(["g0", "g1", "g2"])
  assert pool.active_tasks() == [("0", "g0"), ("1", "g1"), ("2", "g2")]
  assert pool.pending_candidates() == []

  # Step 1: slot 0 too easy, slot 1 in band, slot 2 too hard.
  dirs = pool.proposal_directions({"0": 1.0, "1": 0.5, "2": 0.0})
  assert dirs == {"0": "harder", "2": "easier"}
  pool.propose("0", "g0-syn1", "harder", 1.0)
  pool.propose("2", "g2-syn1", "easier", 0.0)
  assert [s for s, _ in pool.pending_candidates()] == ["0", "2"]
  assert pool.pending_candidates()[0][1] == {
    "candidate_id": "g0-syn1",
    "direction": "harder",
    "parent_id": "g0",
    "parent_acc": 1.0,
  }
  # A slot with a pending candidate gets no new direction.
  assert pool.proposal_directions({"0": 1.0}) == {}
  with pytest.raises(ValueError, match="already has pending"):
    pool.propose("0", "other", "harder", 1.0)

  # Step 2: slot 0's candidate is accepted, slot 2's rejected (still unsolved).
  results = pool.resolve({"2": 0.0, "0": 0.5}, step=2)
  assert results == [("0", True), ("2", False)]
  assert pool.active_tasks() == [("0", "g0-syn1"), ("1", "g1"), ("2", "g2")]
  assert pool.pending_candidates() == []
  assert (
    pool.accepted_total,
    pool.rejected_total,
    pool.accepted_accuracies,
  ) == (1, 1, [0.5])
  assert pool.root_id("0") == "g0"
  hist = pool.slots["0"]["history"]
  assert (
    len(hist) == 1
    and hist[0]["event"] == "accept"
    and hist[0]["parent_id"] == "g0"
  )
  assert hist[0]["candidate_acc"] == 0.5 and hist[0]["step"] == 2
  assert pool.slots["2"]["history"][0]["event"] == "reject"

  # Step 3: the accepted variant is now the parent of the next candidate.
  pool.propose("0", "g0-syn2", "harder", 0.875)
  assert pool.pending_candidates()[0][1]["parent_id"] == "g0-syn1"
  assert pool.resolve({"0": 0.25}) == [("0", True)]
  assert pool.active_tasks()[0] == ("0", "g0-syn2")
  assert pool.accepted_accuracies == [0.5, 0.25]


def test_resolve_partial_and_errors():
  pool = TaskPool({"a": "ta", "b": "tb"})
  pool.propose("a", "ta2", "easier", 0.1)
  pool.propose("b", "tb2", "easier", 0.1)
  assert pool.resolve({"b": 0.5}) == [("b", True)]
  assert [s for s, _ in pool.pending_candidates()] == [
    "a"
  ]  # unresolved stays pending
  with pytest.raises(ValueError, match="no pending"):
    pool.resolve({"b": 0.5})
  with pytest.raises(KeyError, match="unknown slot"):
    pool.resolve({"zz": 0.5})
  with pytest.raises(ValueError, match=r"\[0, 1\]"):
    pool.resolve({"a": 1.5})
  assert [s for s, _ in pool.pending_candidates()] == [
    "a"
  ]  # failed call changed nothing
  with pytest.raises(ValueError, match="direction"):
    pool.propose("b", "x", "up", 0.5)
  with pytest.raises(ValueError, match="candidate id"):
    pool.propose("b", "", "harder", 0.5)
  with pytest.raises(ValueError, match="duplicate|non-empty"):
    TaskPool({"": "x"})


def test_round_trip_through_json_is_exact():
  pool = TaskPool(["g0", "g1", "g2", "g3"])
  pool.propose("0", "c0", "harder", 1.0)
  pool.propose("3", "c3", "easier", 0.125)
  pool.resolve({"0": 0.375}, step=1)
  pool.propose("1", "c1", "harder", 0.875)
  snapshot = pool.to_dict()
  restored = TaskPool.from_dict(json.loads(json.dumps(snapshot)))
  assert restored.to_dict() == snapshot
  assert restored.active_tasks() == pool.active_tasks()
  assert restored.pending_candidates() == pool.pending_candidates()
  # The restored pool continues identically.
  assert restored.resolve({"1": 0.5, "3": 0.0}) == pool.resolve(
    {"1": 0.5, "3": 0.0}
  )
  assert restored.to_dict() == pool.to_dict()


def test_to_dict_is_a_copy_and_from_dict_validates():
  pool = TaskPool(["g0"])
  snap = pool.to_dict()
  snap["slots"]["0"]["active_id"] = "hacked"
  assert pool.active_tasks() == [("0", "g0")]
  bad = pool.to_dict()
  del bad["pending"]
  with pytest.raises(ValueError, match="missing keys"):
    TaskPool.from_dict(bad)
  bad = pool.to_dict()
  bad["slot_order"] = ["1"]
  with pytest.raises(ValueError, match="slot_order"):
    TaskPool.from_dict(bad)
  bad = pool.to_dict()
  bad["pending"] = {
    "0": {
      "candidate_id": "c",
      "direction": "up",
      "parent_id": "g0",
      "parent_acc": 0.5,
    }
  }
  with pytest.raises(ValueError, match="direction"):
    TaskPool.from_dict(bad)


def test_current_groups_prefers_accepted_candidates():
  from rla_jax.rl.phases import Resolution, TaskGroup, current_groups

  groups = [
    TaskGroup("active", "0", "a"),
    TaskGroup("active", "1", "b"),
    TaskGroup("active", "2", "c"),
    TaskGroup("candidate", "0", "a2"),
    TaskGroup("candidate", "2", "c2"),
  ]
  # slot 0's candidate accepted, slot 2's rejected, slot 1 had none
  resolution = Resolution({"0": 0.5, "2": 0.0}, {"0": True, "2": False})
  assert current_groups(groups, resolution) == {
    "0": 3,
    "1": 1,
    "2": 2,
  }
  assert current_groups(groups, Resolution({}, {})) == {
    "0": 0,
    "1": 1,
    "2": 2,
  }


def test_sample_active_draws_distinct_free_slots_in_slot_order():
  import numpy as np

  pool = TaskPool([f"t{i}" for i in range(10)])
  pool.propose("3", "t3-hard", "harder", 0.9)
  draws = [pool.sample_active(4, np.random.default_rng(s)) for s in range(20)]
  for d in draws:
    slots = [slot for slot, _ in d]
    assert len(set(slots)) == 4 and "3" not in slots
    assert slots == sorted(slots, key=int)  # slot order
    assert all(tid == f"t{slot}" for slot, tid in d)
  # seeded: same rng seed, same draw; over seeds every free slot appears
  assert pool.sample_active(4, np.random.default_rng(7)) == draws[7]
  seen = {slot for d in draws for slot, _ in d}
  assert seen == {str(i) for i in range(10)} - {"3"}
  # an accepted candidate is what its slot serves from then on
  pool.resolve({"3": 0.5})
  assert ("3", "t3-hard") in pool.sample_active(10, np.random.default_rng(0))


def test_sample_active_returns_every_free_slot_when_short_and_checks_k():
  import numpy as np

  pool = TaskPool(["a", "b", "c"])
  pool.propose("1", "b2", "easier", 0.0)
  assert pool.sample_active(5, np.random.default_rng(0)) == [
    ("0", "a"),
    ("2", "c"),
  ]
  with pytest.raises(ValueError, match="k must be >= 1"):
    pool.sample_active(0, np.random.default_rng(0))
