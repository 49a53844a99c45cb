"""Sharded execution over 8 virtual CPU devices equals the unsharded model.

The check runs in a subprocess because the device count must be fixed
before JAX initialises (the rest of the suite runs on one device).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import build_hf_checkpoint
from jax.sharding import PartitionSpec as P

from rla_jax import sharding as shd


def test_sharded_logits_and_sampling_match_unsharded(tmp_path):
  # heads 8 / kv 4 / hidden 64 / vocab 320: divisible by every mesh axis
  path = build_hf_checkpoint(
    str(tmp_path),
    "qwen3",
    tie=False,
    num_heads=8,
    num_kv_heads=4,
    hidden=64,
    vocab=320,
  )
  script = os.path.join(
    os.path.dirname(__file__), "sharded_equivalence_script.py"
  )
  proc = subprocess.run(
    [sys.executable, script, path], capture_output=True, text=True, timeout=300
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [
    out_line
    for out_line in proc.stdout.splitlines()
    if out_line.startswith("RESULT ")
  ][-1]
  result = json.loads(line[len("RESULT ") :])
  for key in ("2x2x2/train", "2x2x2/sample", "2x4/train", "2x4/sample"):
    assert result[key]["diff"] <= 1e-4, (key, result[key])
    assert result[key]["sharded_params"] > 0, key  # really sharded
  assert result["2x2x2/greedy_equal"] and result["2x4/greedy_equal"]


class _FakeMesh:
  def __init__(self, **shape):
    self.shape = shape


def test_logical_rules_drop_axes_that_do_not_divide():
  mesh = _FakeMesh(data=2, fsdp=2, tensor=4)
  # 2 kv heads cannot split over tensor=4: replicated on that axis.
  assert shd.logical_to_spec(
    ("embed", "kv_heads", "head_dim"), (64, 2, 16), mesh, shd.TRAIN_RULES
  ) == P("fsdp", None, None)
  assert shd.logical_to_spec(
    ("embed", "heads", "head_dim"), (64, 8, 16), mesh, shd.TRAIN_RULES
  ) == P("fsdp", "tensor", None)
  assert shd.logical_to_spec(
    ("embed", "heads", "head_dim"), (64, 8, 16), mesh, shd.SAMPLE_RULES
  ) == P(None, "tensor", None)
  assert shd.logical_to_spec(
    ("batch", "length"), (8, 5), mesh, shd.TRAIN_RULES
  ) == P(("data", "fsdp"), None)
  with pytest.raises(KeyError, match="no sharding rule for logical axis"):
    shd.logical_to_spec(("bogus",), (4,), mesh, shd.TRAIN_RULES)


def test_make_mesh_sizes():
  import jax

  mesh = shd.make_mesh(1, -1, 1)
  assert mesh.shape == {"data": 1, "fsdp": jax.device_count(), "tensor": 1}
  with pytest.raises(ValueError, match="needs 3 devices"):
    shd.make_mesh(3, 1, 1)
  assert np.prod(list(mesh.shape.values())) == jax.device_count()
