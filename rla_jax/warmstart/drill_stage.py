"""Stage drill of the ALFWorld warm-start build: the drill base, a
random-init Qwen3 (model_config) trained on candidate-line copy drills
(`drills.copy_drill` over the data's real admissible lists) so that it
learns the candidate-index lookup before policy SFT. `DrillBase` trains it,
or loads it from the stage store, on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from flax import nnx

from rla_jax.models import Qwen
from rla_jax.warmstart import drills
from rla_jax.warmstart.data import WarmStartData
from rla_jax.warmstart.stages import sft_config, train_stage

if TYPE_CHECKING:
  from rla_jax.warmstart.build import ReusedPolicy


def _drill_samples(tok, data: WarmStartData, cfg) -> list[tuple]:
  d = cfg["drill"]
  cand_lists = [
    a for ep in data.demo_eps + data.extra_eps for a in ep.admissible
  ]
  cand_lists = [a for a in cand_lists if a]
  rng = np.random.default_rng([cfg["seed"], 0xD81])
  return [
    drills.copy_drill(
      tok,
      cand_lists[int(rng.integers(len(cand_lists)))],
      int(d["num_queries"]),
      rng,
      answer_format=cfg["policy_answer"],
    )
    for _ in range(min(int(d["steps"]) * int(d["batch_size"]), 4096))
  ]


class DrillBase:
  """The drill stage's model, trained (or loaded from the store) on first
  use: a build whose policy stage is already done needs it only for a
  judge initialised from it or for the held-out loss before SFT."""

  def __init__(self, store, key, model_cfg, tok, data, cfg, log):
    self.store, self.key, self.log = store, key, log
    self.model_cfg, self.tok, self.data, self.cfg = model_cfg, tok, data, cfg
    self._model, self._info = None, None

  def available(self) -> bool:
    """Whether the base exists here without training it."""
    steps = int(self.cfg["drill"]["steps"])
    return (
      self._model is not None
      or not steps
      or self.store.done("drill", self.key) is not None
    )

  def model(self) -> Qwen:
    if self._model is None:
      seed = int(self.cfg["seed"])

      def fresh():
        return Qwen(self.model_cfg, rngs=nnx.Rngs(seed))

      if int(self.cfg["drill"]["steps"]):
        self._model, self._info = train_stage(
          self.store,
          "drill",
          self.key,
          fresh,
          _drill_samples(self.tok, self.data, self.cfg),
          sft_config(self.cfg["drill"]),
          seed,
          self.tok.pad_token_id,
          self.log,
        )
      else:
        self._model, self._info = fresh(), {}
    return self._model

  def info(self, reused: ReusedPolicy | None) -> dict:
    """The drill's curves: this build's, or the reused build's."""
    if self._info is None and reused is not None:
      return reused.drill_info
    return self._info if self._info is not None else {}
