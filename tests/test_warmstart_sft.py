"""SFT of the warm start: probes that stop training at a target, and
Orbax checkpoints from which an interrupted run resumes exactly."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from conftest import tiny_qwen3_config
from flax import nnx

from rla_jax.models import Qwen
from rla_jax.warmstart import sft, sft_loss

CFG = tiny_qwen3_config(61)
SFT = sft.SFTConfig(
  steps=6, batch_size=4, learning_rate=1e-2, length_multiple=16
)


def _samples(n=24, seed=0):
  rng = np.random.default_rng(seed)
  return [
    (
      rng.integers(1, 61, size=int(rng.integers(4, 10))).tolist(),
      rng.integers(1, 61, size=3).tolist(),
    )
    for _ in range(n)
  ]


def _params(model):
  return jax.tree.leaves(nnx.state(model, nnx.Param))


def test_probe_stops_training_at_the_target_and_records_every_probe():
  seen = []

  def measure(model):
    seen.append(model)
    return {
      "loss": sft_loss.response_loss(model, _samples(8, 1), length_multiple=16)
    }

  first = sft.train_sft(
    Qwen(CFG, rngs=nnx.Rngs(0)), _samples(), SFT, seed=0, log=lambda m: None
  )
  probe = sft.Probe(2, measure, lambda m: len(seen) >= 2)
  result = sft.train_sft(
    Qwen(CFG, rngs=nnx.Rngs(0)),
    _samples(),
    SFT,
    seed=0,
    log=lambda m: None,
    probe=probe,
  )
  assert result.steps_run == 4 and first.steps_run == 6
  assert [p["step"] for p in result.probes] == [2, 4]
  assert all(np.isfinite(p["loss"]) for p in result.probes)
  # the stopped model is the one the last probe measured, not the full run's
  for a, b in zip(_params(result.model), _params(seen[-1]), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert any(
    not np.array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(_params(result.model), _params(first.model), strict=True)
  )
  # stop_after=4 of the 6-step schedule: the same 4 steps, no probe needed
  cut = sft.train_sft(
    Qwen(CFG, rngs=nnx.Rngs(0)),
    _samples(),
    dataclasses.replace(SFT, stop_after=4),
    seed=0,
    log=lambda m: None,
  )
  assert cut.steps_run == 4
  for a, b in zip(_params(cut.model), _params(result.model), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


class _Interrupt(Exception):
  pass


def test_an_interrupted_run_resumes_from_its_checkpoint_exactly(tmp_path):
  full = sft.train_sft(
    Qwen(CFG, rngs=nnx.Rngs(0)), _samples(), SFT, seed=3, log=lambda m: None
  )
  calls = []

  def crash_at_second_probe(model):
    calls.append(1)
    if len(calls) == 2:
      raise _Interrupt
    return {"n": len(calls)}

  kwargs = dict(
    seed=3,
    log=lambda m: None,
    checkpoint_dir=str(tmp_path),
    checkpoint_every=2,
  )
  probe = sft.Probe(3, crash_at_second_probe, lambda m: False)
  with pytest.raises(_Interrupt):
    sft.train_sft(
      Qwen(CFG, rngs=nnx.Rngs(0)), _samples(), SFT, probe=probe, **kwargs
    )
  lines = []
  kwargs["log"] = lines.append
  resumed = sft.train_sft(
    Qwen(CFG, rngs=nnx.Rngs(0)), _samples(), SFT, probe=probe, **kwargs
  )
  # saved at steps 2, 3 (a probe) and 4, killed at the step-6 probe: resumed
  # at 4 (the latest save) and the probe results so far kept
  assert any("resumed at step 4" in line for line in lines)
  assert [p["step"] for p in resumed.probes] == [3, 6]
  for a, b in zip(_params(resumed.model), _params(full.model), strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=0)
