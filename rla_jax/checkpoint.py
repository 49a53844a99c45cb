"""Orbax checkpoints of the whole closed loop.

One checkpoint step holds:
  * `policy` and `reward`: {"params", "opt_state"} pytrees of each learner
    (sharded arrays; written cooperatively by every process with Orbax);
  * `meta`: JSON with the step counter, the config fingerprint, the
    environment's task set (task pool with slots, pending candidates and
    history, and the task registry) and anything else the loop needs.
Randomness is derived from (seed, step), so restoring these is enough to
continue exactly as an uninterrupted run would.
"""

from __future__ import annotations

import hashlib
import json
import os

import jax
import orbax.checkpoint as ocp

from rla_jax.errors import ConfigError


class CheckpointMismatch(ConfigError):
  """The workdir holds a checkpoint written with an incompatible config."""


def fingerprint(d: dict) -> str:
  """Stable hash of the config fields that fix shapes and semantics."""
  return hashlib.sha256(
    json.dumps(d, sort_keys=True, default=str).encode()
  ).hexdigest()[:16]


class LoopCheckpointer:
  """Saves/restores {learner trees..., meta} under workdir/checkpoints."""

  def __init__(self, workdir: str, *, max_to_keep: int = 2):
    self.directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
    self.manager = ocp.CheckpointManager(
      self.directory,
      options=ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, create=True
      ),
    )

  def latest_step(self) -> int | None:
    return self.manager.latest_step()

  def read_meta(self, step: int) -> dict:
    restored = self.manager.restore(
      step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())
    )
    return restored["meta"]

  def check_compatible(self, step: int, expected_fingerprint: str) -> dict:
    """Reads the meta of `step`; raises CheckpointMismatch if the config
    fingerprint differs (called before anything is compiled)."""
    meta = self.read_meta(step)
    got = meta.get("config_fingerprint")
    if got != expected_fingerprint:
      raise CheckpointMismatch(
        f"{self.directory}: checkpoint {step} was written with config "
        f"fingerprint {got}, but the current config has "
        f"{expected_fingerprint} (model shapes, tokenizer, environment or "
        f"algorithm settings differ); use a new --workdir"
      )
    return meta

  def save(self, step: int, trees: dict, meta: dict) -> None:
    args = {k: ocp.args.StandardSave(v) for k, v in trees.items()}
    args["meta"] = ocp.args.JsonSave(meta)
    self.manager.save(step, args=ocp.args.Composite(**args))
    self.manager.wait_until_finished()

  def restore(self, step: int, like: dict) -> tuple[dict, dict]:
    """Restores trees shaped and sharded like `like` (and the meta)."""
    args = {
      k: ocp.args.StandardRestore(
        jax.tree.map(ocp.utils.to_shape_dtype_struct, v)
      )
      for k, v in like.items()
    }
    args["meta"] = ocp.args.JsonRestore()
    restored = self.manager.restore(step, args=ocp.args.Composite(**args))
    meta = restored["meta"]
    return {k: restored[k] for k in like}, meta

  def close(self) -> None:
    self.manager.close()
