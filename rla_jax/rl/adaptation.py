"""Environment (task) adaptation: direction, acceptance
rule, adaptive task pool (reference sec. 6.1).

The pool has a fixed number of *slots* (the reference gives every training game
one and rolls out a random `sample_active` subset per RL step). Each slot has a
root task (the original dataset task), an active task (the root or an accepted
synthetic variant) and a history of resolved candidates. A slot whose active
task is too easy (acc >= high) or too hard (acc <= low) may get one pending
candidate task, proposed by the environment model; the candidate is rolled out
at the next RL step and accepted or rejected with ``accept_candidate``. On
acceptance the candidate replaces the slot's active task.

Tasks are opaque string ids here; the environment owns the task objects.

Deliberate deviations from the reference: none in the rule (non-strict bounds as
the code, not the blog's strict ones). The pool also records rejections in the
slot history (the reference logs only acceptances).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping

import numpy as np

DIRECTIONS = ("harder", "easier")
POOL_FORMAT_VERSION = 1


def adaptation_direction(
  acc: float,
  low: float = 0.2,
  high: float = 0.8,
  *,
  low_inclusive: bool = True,
) -> str | None:
  """Direction to perturb a task with accuracy ``acc``.

  "harder" if acc >= high; "easier" if acc <= low (low_inclusive, the
  AlfWorld reference) or acc < low (not low_inclusive, the coding
  reference); else None (task is in band).
  """
  if not low < high:
    raise ValueError(
      f"adaptation_direction: need low < high, got low={low}, high={high}"
    )
  if acc >= high:
    return "harder"
  if acc < low or (low_inclusive and acc == low):
    return "easier"
  return None


def accept_candidate(
  parent_acc: float,
  cand_acc: float,
  direction: str,
  low: float = 0.2,
  high: float = 0.8,
) -> bool:
  """Acceptance of a candidate task q' proposed from a parent q.

  accepted iff acc(q') > 0 and
    direction == "harder": acc(q') < acc(q) and acc(q') >= low
    direction == "easier": acc(q') > acc(q) and acc(q') <= high
  """
  if direction not in DIRECTIONS:
    raise ValueError(
      f"accept_candidate: direction must be one of {DIRECTIONS}, got "
      f"{direction!r}"
    )
  if cand_acc <= 0:
    return False
  if direction == "harder":
    return cand_acc < parent_acc and cand_acc >= low
  return cand_acc > parent_acc and cand_acc <= high


def _check_id(value, what: str) -> str:
  if not isinstance(value, str) or not value:
    raise ValueError(
      f"TaskPool: {what} must be a non-empty string, got {value!r}"
    )
  return value


def _check_acc(value, what: str) -> float:
  if (
    isinstance(value, bool)
    or not isinstance(value, (int, float))
    or not math.isfinite(value)
    or not 0.0 <= value <= 1.0
  ):
    raise ValueError(
      f"TaskPool: {what} must be a number in [0, 1], got {value!r}"
    )
  return float(value)


class TaskPool:
  """Adaptive task set as a plain-data state machine (JSON round-trippable).

  State:
    slots: {slot_id: {"root_id", "active_id", "history": [event, ...]}}
    pending: {slot_id: {"candidate_id", "direction", "parent_id", "parent_acc"}}
    accepted_total, rejected_total: counters
    accepted_accuracies: candidate accuracies of accepted tasks, in acceptance
      order
  Slot ids are strings; iteration order is the slot insertion order.
  """

  def __init__(
    self,
    root_ids: Mapping[str, str] | list[str],
    low: float = 0.2,
    high: float = 0.8,
  ):
    if not low < high:
      raise ValueError(f"TaskPool: need low < high, got low={low}, high={high}")
    self.low = float(low)
    self.high = float(high)
    if isinstance(root_ids, Mapping):
      items = list(root_ids.items())
    else:
      items = [(str(i), r) for i, r in enumerate(root_ids)]
    self.slots: dict[str, dict] = {}
    for slot, root in items:
      _check_id(slot, "slot id")
      _check_id(root, f"root id of slot {slot!r}")
      if slot in self.slots:
        raise ValueError(f"TaskPool: duplicate slot id {slot!r}")
      self.slots[slot] = {"root_id": root, "active_id": root, "history": []}
    self.pending: dict[str, dict] = {}
    self.accepted_total = 0
    self.rejected_total = 0
    self.accepted_accuracies: list[float] = []

  # ----------------------------------------------------------------- queries
  def active_tasks(self) -> list[tuple[str, str]]:
    """[(slot_id, active_task_id)] for every slot."""
    return [(slot, s["active_id"]) for slot, s in self.slots.items()]

  def sample_active(
    self, k: int, rng: np.random.Generator
  ) -> list[tuple[str, str]]:
    """[(slot_id, active_task_id)] for k slots drawn without replacement
    from the slots with no pending candidate (all of them if fewer),
    returned in slot order.

    The reference gives every training game a slot and draws `num_trial`
    of them per RL step (`sample/alfworld_rl_rollout.py`); a slot whose
    candidate is pending is rolled out through its candidate instead.
    """
    if k < 1:
      raise ValueError(f"TaskPool.sample_active: k must be >= 1, got {k}")
    free = [slot for slot in self.slots if slot not in self.pending]
    if len(free) > k:
      chosen = set(rng.choice(len(free), size=k, replace=False).tolist())
      free = [slot for i, slot in enumerate(free) if i in chosen]
    return [(slot, self.slots[slot]["active_id"]) for slot in free]

  def pending_candidates(self) -> list[tuple[str, dict]]:
    """[(slot_id, copy of the pending record)]
    for every slot with a candidate."""
    return [(slot, dict(rec)) for slot, rec in self.pending.items()]

  def root_id(self, slot: str) -> str:
    return self._slot(slot)["root_id"]

  def proposal_directions(
    self, active_accuracies: Mapping[str, float], *, low_inclusive: bool = True
  ) -> dict[str, str]:
    """{slot: direction} for slots that should get a new candidate now.

    A slot qualifies if its active-task accuracy gives a direction
    (``adaptation_direction`` with the pool's low and high, and
    ``low_inclusive``: whether acc == low counts as too hard) and it has no
    pending candidate.
    """
    out = {}
    for slot, acc in active_accuracies.items():
      self._slot(slot)
      direction = adaptation_direction(
        _check_acc(acc, f"accuracy of slot {slot!r}"),
        low=self.low,
        high=self.high,
        low_inclusive=low_inclusive,
      )
      if direction is not None and slot not in self.pending:
        out[slot] = direction
    return out

  # --------------------------------------------------------------- mutations
  def propose(
    self, slot: str, candidate_id: str, direction: str, parent_acc: float
  ) -> None:
    """Register the pending candidate of ``slot`` (at most one per slot)."""
    s = self._slot(slot)
    _check_id(candidate_id, "candidate id")
    if direction not in DIRECTIONS:
      raise ValueError(
        f"TaskPool.propose: direction must be one of {DIRECTIONS}, got "
        f"{direction!r}"
      )
    parent_acc = _check_acc(parent_acc, "parent_acc")
    if slot in self.pending:
      raise ValueError(
        f"TaskPool.propose: slot {slot!r} already has pending candidate "
        f"{self.pending[slot]['candidate_id']!r}"
      )
    self.pending[slot] = {
      "candidate_id": candidate_id,
      "direction": direction,
      "parent_id": s["active_id"],
      "parent_acc": parent_acc,
    }

  def resolve(
    self, candidate_accuracies: Mapping[str, float], step: int | None = None
  ) -> list[tuple[str, bool]]:
    """Apply the acceptance rule to the given pending candidates.

    ``candidate_accuracies``: {slot_id: accuracy of that slot's pending
    candidate}. Every listed slot must have a pending candidate; slots not
    listed stay pending. Accepted candidates become the slot's active task.
    Returns [(slot, accepted)] in slot order.
    """
    for slot, acc in candidate_accuracies.items():
      self._slot(slot)
      if slot not in self.pending:
        raise ValueError(
          f"TaskPool.resolve: slot {slot!r} has no pending candidate"
        )
      _check_acc(acc, f"candidate accuracy of slot {slot!r}")
    results = []
    for slot in self.slots:
      if slot not in candidate_accuracies:
        continue
      acc = float(candidate_accuracies[slot])
      rec = self.pending.pop(slot)
      ok = accept_candidate(
        rec["parent_acc"],
        acc,
        rec["direction"],
        low=self.low,
        high=self.high,
      )
      event = {
        "event": "accept" if ok else "reject",
        "step": step,
        "direction": rec["direction"],
        "parent_id": rec["parent_id"],
        "parent_acc": rec["parent_acc"],
        "candidate_id": rec["candidate_id"],
        "candidate_acc": acc,
      }
      self.slots[slot]["history"].append(event)
      if ok:
        self.slots[slot]["active_id"] = rec["candidate_id"]
        self.accepted_total += 1
        self.accepted_accuracies.append(acc)
      else:
        self.rejected_total += 1
      results.append((slot, ok))
    return results

  # ------------------------------------------------------------ persistence
  def to_dict(self) -> dict:
    """JSON-serialisable snapshot (deep copy) of the whole state."""
    return copy.deepcopy(
      {
        "format_version": POOL_FORMAT_VERSION,
        "low": self.low,
        "high": self.high,
        "slots": self.slots,
        "slot_order": list(self.slots),
        "pending": self.pending,
        "accepted_total": self.accepted_total,
        "rejected_total": self.rejected_total,
        "accepted_accuracies": self.accepted_accuracies,
      }
    )

  @classmethod
  def from_dict(cls, data: Mapping) -> TaskPool:
    """Inverse of ``to_dict`` (exact round
    trip); raises on a malformed snapshot."""
    required = (
      "format_version",
      "low",
      "high",
      "slots",
      "slot_order",
      "pending",
      "accepted_total",
      "rejected_total",
      "accepted_accuracies",
    )
    missing = [k for k in required if k not in data]
    if missing:
      raise ValueError(f"TaskPool.from_dict: missing keys {missing}")
    if data["format_version"] != POOL_FORMAT_VERSION:
      raise ValueError(
        "TaskPool.from_dict: unsupported format_version "
        f"{data['format_version']!r}"
      )
    order = list(data["slot_order"])
    if sorted(order) != sorted(data["slots"]):
      raise ValueError(
        "TaskPool.from_dict: slot_order does not match the slots' keys"
      )
    pool = cls(
      {slot: data["slots"][slot]["root_id"] for slot in order},
      data["low"],
      data["high"],
    )
    for slot in order:
      s = data["slots"][slot]
      pool.slots[slot] = {
        "root_id": _check_id(s["root_id"], "root_id"),
        "active_id": _check_id(s["active_id"], "active_id"),
        "history": copy.deepcopy(list(s["history"])),
      }
    for slot, rec in data["pending"].items():
      pool._slot(slot)
      pool.pending[slot] = {
        "candidate_id": _check_id(rec["candidate_id"], "candidate_id"),
        "direction": rec["direction"],
        "parent_id": _check_id(rec["parent_id"], "parent_id"),
        "parent_acc": _check_acc(rec["parent_acc"], "parent_acc"),
      }
      if rec["direction"] not in DIRECTIONS:
        raise ValueError(
          f"TaskPool.from_dict: bad direction {rec['direction']!r} for slot "
          f"{slot!r}"
        )
    pool.accepted_total = int(data["accepted_total"])
    pool.rejected_total = int(data["rejected_total"])
    pool.accepted_accuracies = [float(a) for a in data["accepted_accuracies"]]
    return pool

  def _slot(self, slot: str) -> dict:
    if slot not in self.slots:
      raise KeyError(f"TaskPool: unknown slot id {slot!r}")
    return self.slots[slot]
