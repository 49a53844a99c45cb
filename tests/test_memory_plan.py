"""Memory plan: parameter counts, shard arithmetic vs real shards, scripts."""

import dataclasses
import glob
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from launch import accelerators as ac
from launch import activation_memory as am
from launch import memory_model as mm
from launch import memory_phases as mp
from launch import memory_vision as mv
from launch import param_memory as pm
from rla_jax import sharding as shd

QWEN25_7B = mm.PRESETS["qwen2.5-7b-instruct"]


def test_qwen25_7b_param_count_is_the_published_one():
  # Published parameter count of Qwen2.5-7B-Instruct (model card / HF
  # safetensors index): 7,615,616,512.
  assert pm.param_count(QWEN25_7B) == 7_615_616_512
  assert pm.param_count_formula(QWEN25_7B) == 7_615_616_512


def test_closed_form_equals_model_definition_for_every_preset():
  for cfg in mm.PRESETS.values():
    assert pm.param_count_formula(cfg) == pm.param_count(cfg)
  tied = mm.PRESETS["qwen3-8b"].replace(tie_word_embeddings=True)
  assert pm.param_count_formula(tied) == pm.param_count(tied)
  llama = tied.replace(model_type="llama", attention_bias=True, mlp_bias=True)
  assert pm.param_count_formula(llama) == pm.param_count(llama)


def test_kv_cache_bytes_per_token_by_hand():
  # 28 layers x 4 kv heads x 128 head_dim x (k, v) x 2 bytes = 57,344 B
  one = pm.fake_mesh(1, 1, 1)
  assert am.kv_cache_bytes_per_device(QWEN25_7B, 1, 1, one) == 57_344 + 1
  # batch over (data, fsdp) = 8, kv heads over tensor = 4: 1/32 per device
  m = pm.fake_mesh(2, 4, 4)
  got = am.kv_cache_bytes_per_device(QWEN25_7B, 64, 1024, m)
  assert got == 64 * 1024 * 57_344 // 32 + 64 * 1024 // 8


def test_tensor_axis_that_does_not_divide_heads_replicates_attention():
  c, t = QWEN25_7B, 8  # 28 heads and 4 kv heads do not split over 8
  D, F, V, L, H = (
    c.hidden_size,
    c.intermediate_size,
    c.vocab_size,
    c.num_layers,
    c.head_dim,
  )
  N, K = c.num_heads, c.num_kv_heads
  attn = D * (N + 2 * K) * H + N * H * D + (N + 2 * K) * H  # replicated
  expected = (2 * V * D // t + D + L * (2 * D + attn + 3 * D * F // t)) * 2
  got = pm.per_device_param_bytes(c, pm.fake_mesh(1, 1, t), shd.SAMPLE_RULES, 2)
  assert got == expected


def test_remat_policies_order_and_bad_name():
  sizes = {
    r: am.train_activation_bytes(QWEN25_7B, 1, 4096, 1, r)["saved"]
    for r in ("none", "dots", "full")
  }
  assert sizes["none"] > sizes["dots"] > sizes["full"]
  assert sizes["full"] == 28 * 4096 * 3584 * 2  # the bf16 carry per layer
  with pytest.raises(ValueError, match="remat must be one of"):
    am.train_activation_bytes(QWEN25_7B, 1, 16, 1, "some")


def test_analytical_shards_equal_real_shards_on_8_cpu_devices():
  """A small model really sharded on 8 forced CPU devices (subprocess):
  each device's shard bytes equal the analytical per-device bytes, and the
  compiled train step's arguments are params + AdamW mu/nu + batch (+ the
  4-byte step counter)."""
  script = os.path.join(REPO, "launch", "memory_plan_compiled.py")
  proc = subprocess.run(
    [
      sys.executable,
      script,
      "--devices",
      "8",
      "--mesh",
      "1,4,2",
      "--materialize",
    ],
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [
    out_line
    for out_line in proc.stdout.splitlines()
    if out_line.startswith("RESULT ")
  ][-1]
  r = json.loads(line[len("RESULT ") :])
  assert r["devices"] == 8
  params = r["params"]
  assert params["per_device"] == [params["analytical"]] * 8
  assert params["analytical"] < params["total"] / 4  # really sharded
  train = r["train"]
  assert train["compiled"]["argument"] - train["analytical_args"] == 4
  pf = r["prefill"]
  weights_kv = (
    pf["analytical"]["weights_bf16"] + pf["analytical"]["kv_cache_bf16"]
  )
  assert 0 <= pf["compiled"]["argument"] - weights_kv <= 64 * 1024


def test_flash_attention_term_is_far_below_einsum_for_long_sequences():
  N, K, H = 28, 4, 128
  for T in (4096, 6144):  # the paper's train lengths
    e = am.attention_train_bytes(1, N, K, T, H, "einsum")
    f = am.attention_train_bytes(1, N, K, T, H, "blockwise")
    assert f["layer"] * 8 < e["layer"] and f["saved"] * 8 < e["saved"]
    pe = am.attention_prefill_bytes(4, N, K, 2048, T, H, "einsum")
    pf = am.attention_prefill_bytes(4, N, K, 2048, T, H, "blockwise")
    assert pf * 8 < pe
  # tile-bounded: linear in S (einsum: also linear, but x P); doubling T in
  # training quadruples the einsum scores and only doubles the flash term
  f1 = am.attention_train_bytes(1, N, K, 2048, H, "blockwise")["layer"]
  f2 = am.attention_train_bytes(1, N, K, 4096, H, "blockwise")["layer"]
  assert f2 < 2.1 * f1
  for name in ("auto", "pallas_tpu", "cudnn"):
    assert am.attention_kind(name) == "flash"
  assert am.attention_kind("xla") == "einsum"
  with pytest.raises(ValueError, match="attention must be one of"):
    am.attention_kind("flash3")
  full = am.train_activation_bytes(QWEN25_7B, 1, 4096, 1, "full")
  flash = am.train_activation_bytes(
    QWEN25_7B, 1, 4096, 1, "full", attention="blockwise"
  )
  assert flash["saved"] == full["saved"] and flash["layer"] < full["layer"]


def test_prefill_term_shrinks_with_prefill_rows():
  mesh = pm.fake_mesh(1, 8, 1)  # 384 RM rows: 48 per device
  for att in ("einsum", "blockwise"):
    got = [
      mp.sample_phase_bytes(QWEN25_7B, mesh, 384, 2048, 4096, r, att)
      for r in (None, 16, 4, 1)
    ]
    transient = [g["prefill_transient"] for g in got]
    assert transient == sorted(transient, reverse=True)
    assert transient[0] > 10 * transient[2]  # 48 rows vs 4
    assert "prefill_piece_cache" not in got[0]  # whole batch: no slice
    assert got[2]["prefill_piece_cache"] * 4 == got[1]["prefill_piece_cache"]
    assert len({g["kv_cache_bf16"] for g in got}) == 1  # the cache stays
  # rows >= rows per device: the whole batch, as with None
  assert mp.sample_phase_bytes(
    QWEN25_7B, mesh, 384, 2048, 4096, 48
  ) == mp.sample_phase_bytes(QWEN25_7B, mesh, 384, 2048, 4096, None)


def test_smallest_slice_with_the_new_attention_is_no_larger():
  from launch import slice_plan as mp

  assert mm.PAPER.attention == "blockwise"
  assert mm.PAPER.prefill_rows_per_device == 4
  assert mm.BEFORE.attention == "einsum"
  shrunk = 0
  coding = mm.PRESETS["qwen2.5-7b-instruct"], mm.CODING
  before_coding = dataclasses.replace(
    mm.CODING, attention="einsum", prefill_rows_per_device=None
  )
  runs = [(c, mm.PAPER, mm.BEFORE) for c in mm.PRESETS.values()]
  runs.append((coding[0], coding[1], before_coding))
  for cfg, wl, wl_before in runs:
    for acc in ac.ACCELERATORS:
      new = mp.smallest_fitting(cfg, cfg, acc, wl)
      old = mp.smallest_fitting(cfg, cfg, acc, wl_before)
      assert new is not None
      assert old is None or new.chips <= old.chips, (acc.name, new, old)
      shrunk += old is None or new.chips < old.chips
  assert shrunk >= 12  # the prefill scores no longer decide the size
  assert mm.CODING.policy_rows == 2048 and mm.CODING.rm_rows == 1024


def test_row_pieces_cost_no_prefill_flops_on_the_same_slice():
  from launch import slice_plan as mp

  h100 = [a for a in ac.ACCELERATORS if a.name.startswith("H100")][0]
  whole = dataclasses.replace(mm.PAPER, prefill_rows_per_device=None)
  plan = mp.best_plan(QWEN25_7B, QWEN25_7B, h100, 16, whole)
  assert mp.prefill_pieces(384, 16, plan.sample_tensor, mm.PAPER) > 1
  t_whole = mp.step_time(QWEN25_7B, QWEN25_7B, plan, whole)
  t_pieces = mp.step_time(QWEN25_7B, QWEN25_7B, plan, mm.PAPER)
  for k in ("policy_prefill", "rm_prefill"):  # compute-bound either way
    assert t_pieces[k] == pytest.approx(t_whole[k])
  einsum = dataclasses.replace(mm.PAPER, attention="einsum")
  t_einsum = mp.step_time(QWEN25_7B, QWEN25_7B, plan, einsum)
  assert (
    t_einsum["rm_train"] < t_pieces["rm_train"] < 1.1 * t_einsum["rm_train"]
  )


def test_plan_finds_a_slice_and_times_are_positive():
  wl = mm.Workload()
  from launch import slice_plan as mp

  h100 = [a for a in ac.ACCELERATORS if a.name.startswith("H100")][0]
  plan = mp.smallest_fitting(QWEN25_7B, QWEN25_7B, h100, wl)
  assert plan is not None and plan.fits(True)
  smaller = [c for c in h100.slice_chips if c < plan.chips]
  for chips in smaller:  # nothing smaller fits
    assert not mp.best_plan(QWEN25_7B, QWEN25_7B, h100, chips, wl).fits(True)
  t = mp.step_time(QWEN25_7B, QWEN25_7B, plan, wl)
  assert all(v > 0 for v in t.values())


def test_launch_scripts_are_valid_bash():
  scripts = glob.glob(os.path.join(REPO, "launch", "*.sh"))
  assert scripts
  for s in scripts:
    proc = subprocess.run(["bash", "-n", s], capture_output=True, text=True)
    assert proc.returncode == 0, (s, proc.stderr)


@pytest.mark.slow
def test_compiled_temporaries_fall_by_the_predicted_factor():
  """The plan's before/after check (`memory_plan_checks.BEFORE_AFTER_ARGS`, 8
  forced CPU devices, compile only) at shorter lengths: einsum whole-batch
  vs blockwise 4-row pieces; XLA's temporaries fall by the analytical
  factor within 2x (train) and 1.6x (prefill)."""
  from launch import memory_plan_checks as mpc

  args = (
    "--devices 8 --mesh 1,4,2 --layers 1 --seq 2048 --rows 32 --prompt 1024"
    " --gen 1024"
  ).split()
  results = {
    "before": mpc.run_script(args + ["--attention", "einsum"]),
    "after": mpc.run_script(
      args + ["--attention", "blockwise", "--prefill-rows", "4"]
    ),
  }
  for q, f in mpc.before_after_factors(results).items():
    assert f["predicted"] > 2 and f["measured"] > 2, (q, f)
    tol = 2.0 if q.startswith("train") else 1.6
    assert 1 / tol < f["measured"] / f["predicted"] < tol, (q, f)


QWEN3_VL_8B = mm.VL_PRESETS["qwen3-vl-8b"]


def _eval_shape_sizes(model_fn) -> dict[str, int]:
  """path -> parameter size of a model built under nnx.eval_shape."""
  import math

  from flax import nnx

  model = nnx.eval_shape(model_fn)
  return {
    "/".join(map(str, path)): math.prod(var.get_value().shape)
    for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param))
  }


def test_qwen3_vl_8b_param_count_is_the_sum_of_the_real_model():
  from flax import nnx

  from rla_jax.models.qwen import Qwen
  from rla_jax.models.qwen3_vl import Qwen3VL

  cfg = QWEN3_VL_8B
  sizes = _eval_shape_sizes(lambda: Qwen3VL(cfg, rngs=nnx.Rngs(0)))
  vision = sum(n for p, n in sizes.items() if p.startswith("vision/"))
  assert vision > 0
  assert pm.param_count(cfg) == sum(sizes.values())
  assert pm.param_count(cfg, "vision") == vision
  # the decoder is exactly a text Qwen3 of the same shapes
  text = _eval_shape_sizes(lambda: Qwen(cfg.text, rngs=nnx.Rngs(0)))
  assert pm.param_count(cfg, "text") == sum(text.values())
  assert pm.param_count(cfg, "text") + vision == pm.param_count(cfg)
  assert pm.param_count_formula(cfg) == pm.param_count(cfg)
  assert pm.vision_param_count_formula(cfg.vision, 4096) == vision
  # same decoder shapes as the Qwen3-8B preset (different rope / M-RoPE)
  assert pm.param_count(cfg, "text") == pm.param_count(mm.PRESETS["qwen3-8b"])
  # published size: 8.77B parameters
  assert round(pm.param_count(cfg) / 1e7) == 877
  with pytest.raises(ValueError, match="part must be"):
    pm.param_count(cfg, "tower")


def test_plan_includes_the_vision_tower_parameters():
  from launch import slice_plan as mp

  text = mm.PRESETS["qwen3-8b"]
  vision = pm.param_count(QWEN3_VL_8B, "vision")
  one = pm.fake_mesh(1, 1, 1)
  wl = mm.Workload()  # text-only workload: only the parameters differ
  vl_train = mp.train_phase_bytes(QWEN3_VL_8B, one, 4096, wl)
  text_train = mp.train_phase_bytes(text, one, 4096, wl)
  assert vl_train["params_f32"] - text_train["params_f32"] == 4 * vision
  vl_sample = mp.sample_phase_bytes(QWEN3_VL_8B, one, 8, 1024, 1024)
  assert vl_sample["vision_weights_bf16"] == 2 * vision
  assert (
    vl_sample["weights_bf16"]
    == mp.sample_phase_bytes(text, one, 8, 1024, 1024)["weights_bf16"]
  )
  # on a slice: the co-resident fp32 params of both idle models grow by
  # both towers' shards, which are really sharded over fsdp
  h100 = [a for a in ac.ACCELERATORS if a.name.startswith("H100")][0]
  vl_plan = mp.plan_slice(QWEN3_VL_8B, QWEN3_VL_8B, h100, 8, wl, 1, 1)
  text_plan = mp.plan_slice(text, text, h100, 8, wl, 1, 1)
  grown = (
    vl_plan.persistent["policy_sample"] - text_plan.persistent["policy_sample"]
  )
  assert 2 * 4 * vision / 8 <= grown < 2 * 4 * vision / 4


def test_screenshot_geometry_is_the_image_processors():
  """The plan's smart_resize and patch grid equal transformers' image
  processor configured with Qwen3-VL-8B's pixel bounds (each branch:
  plain rounding, below min_pixels, above max_pixels)."""
  import numpy as np

  pytest.importorskip("transformers")
  from rla_jax.models.qwen3_vl import inputs

  v = QWEN3_VL_8B.vision
  # Qwen3-VL-8B's bounds (1080x1920: rounding; 100x90: below min_pixels),
  # and a small max_pixels for the branch above it (a real image over
  # 16M pixels would take long to preprocess)
  for lo, hi, screen in (
    (mv.MIN_PIXELS, mv.MAX_PIXELS, (1080, 1920)),
    (mv.MIN_PIXELS, mv.MAX_PIXELS, (100, 90)),
    (mv.MIN_PIXELS, 300_000, (1080, 1920)),
  ):
    size = {"shortest_edge": lo, "longest_edge": hi}
    proc = inputs.image_processor(QWEN3_VL_8B, {"size": size})
    image = inputs.preprocess(proc, [np.zeros((*screen, 3), np.uint8)])[0]
    bounds = {"min_pixels": lo, "max_pixels": hi}
    assert mv.screenshot_grid(v, screen, **bounds) == image.grid, screen
    assert mv.screenshot_tokens(v, screen, **bounds) == image.tokens(2)
  assert mv.screenshot_grid(v, (1080, 1920), max_pixels=300_000) != (68, 120)
  # the GUI prompts hold their screenshots
  tok = mv.screenshot_tokens(v, mm.GUI.screen)
  assert mm.GUI.rm_images * tok < mm.GUI.rm_prompt
  assert mm.GUI.policy_images * tok < mm.GUI.policy_prompt
  with pytest.raises(ValueError, match="aspect ratio"):
    mv.smart_resize(10, 5000, 32)


def test_vision_terms_einsum_flash_and_image_layout():
  v = QWEN3_VL_8B.vision
  P = 8160
  e = mv.vision_train_activation_bytes(v, 1, P, 4096, 1, "einsum")
  f = mv.vision_train_activation_bytes(v, 1, P, 4096, 1, "blockwise")
  # einsum keeps [Nv, P, P] f32 scores + bf16 probs per layer
  assert e["saved"] - f["saved"] > 27 * v.num_heads * P * P * 6 * 0.9
  assert mv.vision_encode_bytes(v, 4, P, 1, "blockwise") * 8 < (
    mv.vision_encode_bytes(v, 4, P, 1, "einsum")
  )
  # twice the images, twice the bytes (flash: linear, no cross-image term)
  one = mv.vision_train_activation_bytes(v, 1, P, 4096, 2, "blockwise")
  two = mv.vision_train_activation_bytes(v, 2, P, 4096, 2, "blockwise")
  assert two == {k: 2 * x for k, x in one.items()}
  fl = mv.vision_flops_per_image(v, P, 4096)
  assert fl["attention"] == 4 * 27 * 1152 * P * P
  # 288 rows x 3 images over 16 batch shards: 54 each, or all 864 -> 1024
  assert mv.images_per_device(3, 288, 16, True) == 54
  assert mv.images_per_device(3, 288, 16, False) == 1024
  assert mv.images_per_device(0, 288, 16, False) == 0
  # the replicated layout only adds memory
  from launch import slice_plan as mp

  h200 = [a for a in ac.ACCELERATORS if a.name.startswith("H200")][0]
  sharded = mp.best_plan(QWEN3_VL_8B, QWEN3_VL_8B, h200, 64, mm.GUI)
  coded = mp.best_plan(QWEN3_VL_8B, QWEN3_VL_8B, h200, 64, mm.GUI_AS_CODED)
  assert coded.peak(True) > sharded.peak(True)
  t = mp.step_time(QWEN3_VL_8B, QWEN3_VL_8B, sharded, mm.GUI)
  assert t["rm_vision_encode"] > 0 and t["policy_vision_train"] > 0
  # text presets get no vision terms
  text_t = mp.step_time(
    QWEN25_7B,
    QWEN25_7B,
    mp.best_plan(QWEN25_7B, QWEN25_7B, h200, 8, mm.PAPER),
    mm.PAPER,
  )
  assert not any("vision" in k for k in text_t)
