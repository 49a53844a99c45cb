"""launch/tpu_run.py with a deterministic oracle for adapted coding tasks.

  python tests/coding_oracle_run.py --config=coding:smoke [overrides...]

The smoke coder (random-init) never passes a ground-truth test, so no
adaptation candidate could ever be accepted (the acceptance rule needs a
candidate accuracy > 0). Here, on every task derived by adaptation
(task.parent_id set), programs 0, 2, 4, ... pass all ground-truth tests:
a candidate's accuracy is 1/2 (with an even programs_per_task), which the
acceptance rule accepts for an "easier" proposal from an accuracy-0 task
under the default bands (0 < 1/2 <= adaptation.high). Everything else,
the policy's samples, the generated tests, the acceptance rule, training
and checkpoints, runs unchanged. The oracle is a function of the task
alone, so a resumed run (whose registry comes from the checkpoint) sees
the same outcomes as an uninterrupted one.
"""

from __future__ import annotations

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)


def install_oracle() -> None:
  """Wraps CodingLoop._execute: half the programs of a derived task pass."""
  import dataclasses

  from rla_jax.rl import coding_loop

  execute = getattr(coding_loop.CodingLoop, "_execute", None)
  if execute is None:
    raise RuntimeError(
      "tests/coding_oracle_run.py: rla_jax.rl.coding_loop.CodingLoop has no "
      "_execute(task, programs, tests) method to wrap; update the oracle"
    )

  def oracle_execute(self, task, programs, tests):
    result = execute(self, task, programs, tests)
    if not task.parent_id:
      return result
    gt_pass = result.gt_pass.copy()
    gt_pass[::2] = True  # programs 0, 2, 4, ... pass every ground-truth test
    return dataclasses.replace(result, gt_pass=gt_pass)

  coding_loop.CodingLoop._execute = oracle_execute


if __name__ == "__main__":
  install_oracle()
  from launch import tpu_run

  tpu_run.run()
