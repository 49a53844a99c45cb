"""Qwen3-VL against transformers on tiny random checkpoints: the forward
(odd grids, two images in a prompt, text-only rows, left padding), greedy
generation, export, the sampler's image prefill (log-probs equal to the
training forward's, multi-turn sessions equal to re-encoding, no
recompilation over mixed calls) and the errors for bad inputs."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rla_jax.compile_counter import CompileCounter
from rla_jax.models.hf_io import CheckpointError
from rla_jax.models.qwen3_vl import inputs as vin
from rla_jax.models.qwen3_vl import load_qwen3_vl, save_qwen3_vl
from rla_jax.rl.samples import Sample
from rla_jax.rl.trainer import Learner, OptimConfig
from rla_jax.sampling.buckets import left_pad
from rla_jax.sampling.sampler import Sampler

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PAD, START, END = 300, 302, 303
# min_pixels 64: the processor keeps these small images at their size.
PREPROCESSOR = {"size": {"shortest_edge": 64, "longest_edge": 1 << 20}}


def hf_config(tie: bool = False):
  return transformers.Qwen3VLConfig(
    text_config=dict(
      vocab_size=320,
      hidden_size=64,
      intermediate_size=96,
      num_hidden_layers=3,
      num_attention_heads=4,
      num_key_value_heads=2,
      head_dim=16,
      rope_parameters={
        "rope_type": "default",
        "rope_theta": 10000.0,
        "mrope_section": [2, 3, 3],
        "mrope_interleaved": True,
      },
    ),
    vision_config=dict(
      depth=3,
      hidden_size=32,
      intermediate_size=48,
      num_heads=2,
      patch_size=4,
      spatial_merge_size=2,
      temporal_patch_size=2,
      out_hidden_size=64,
      num_position_embeddings=36,
      deepstack_visual_indexes=[0, 1],
    ),
    image_token_id=PAD,
    video_token_id=301,
    vision_start_token_id=START,
    vision_end_token_id=END,
    tie_word_embeddings=tie,
  )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  """(HF model, its directory) with perturbed weights."""
  torch.manual_seed(0)
  hf = transformers.Qwen3VLForConditionalGeneration(hf_config()).eval()
  with torch.no_grad():
    for p in hf.parameters():
      p.add_(torch.randn_like(p) * 0.05)
  path = str(tmp_path_factory.mktemp("qwen3vl"))
  hf.save_pretrained(path)
  return hf, path


@pytest.fixture(scope="module")
def model(checkpoint):
  return load_qwen3_vl(checkpoint[1])


def make_images(cfg, sizes, seed=0):
  rng = np.random.RandomState(seed)
  pixels = [(rng.rand(h, w, 3) * 255).astype(np.uint8) for h, w in sizes]
  return vin.preprocess(vin.image_processor(cfg, PREPROCESSOR), pixels)


def prompt(cfg, images, text, head=(5, 6)):
  """Templated ids (one pad per image) expanded to the images' pads."""
  ids = list(head)
  for _ in images:
    ids += [START, PAD, END]
  return vin.expand_image_pads(ids + list(text), images, cfg)


def hf_kwargs(ids, mask, rows_images):
  flat = [im for row in rows_images for im in row]
  kw = {
    "input_ids": torch.tensor(np.asarray(ids), dtype=torch.long),
    "attention_mask": torch.tensor(np.asarray(mask), dtype=torch.long),
  }
  if flat:
    kw.update(
      pixel_values=torch.tensor(np.concatenate([im.patches for im in flat])),
      image_grid_thw=torch.tensor([[1, *im.grid] for im in flat]),
      mm_token_type_ids=(kw["input_ids"] == PAD).int(),
    )
  return kw


def our_logits(model, ids, mask, rows_images):
  cfg = model.vl_cfg
  B, T = ids.shape
  layout = vin.image_layout(
    [list(r[m.astype(bool)]) for r, m in zip(ids, mask, strict=True)],
    rows_images,
    T,
    B,
    cfg,
  )
  visual = model.visual_tokens(
    jax.tree.map(jnp.asarray, layout.images), jnp.asarray(layout.feature_rows)
  )
  logits, _ = model(
    jnp.asarray(ids),
    jnp.asarray(mask),
    positions=jnp.asarray(layout.offsets),
    visual=visual,
  )
  return np.asarray(logits)


def parity_batch(cfg):
  """Odd merged grids (3x5, 5x7, 3x3), two images in a row, a text-only
  row, left padding."""
  a, b, c = make_images(cfg, [(24, 40), (40, 56), (24, 24)])
  rows_images = [[a, b], [], [c]]
  rows = [
    prompt(cfg, [a, b], [7, 8, 9]),
    [10, 11, 12, 13, 14],
    prompt(cfg, [c], [15, 16]),
  ]
  return rows, rows_images


def test_mrope_offsets_follow_the_position_rule(model):
  cfg = model.vl_cfg
  (image,) = make_images(cfg, [(24, 40)])  # 6x10 patches: 3x5 merged
  ids = prompt(cfg, [image], [7, 8], head=(5,))
  pos = vin.mrope_offsets(ids, [image], cfg)
  assert pos[:2].tolist() == [[0, 0, 0], [1, 1, 1]]  # text, vision_start
  img = pos[2:17]
  assert (img[:, 0] == 2).all()
  assert img[:, 1].tolist() == [2 + r for r in range(3) for _ in range(5)]
  assert img[:, 2].tolist() == [2 + c for _ in range(3) for c in range(5)]
  # vision_end resumes at start + max(3, 5), then text counts on
  assert pos[17:].tolist() == [[7, 7, 7], [8, 8, 8], [9, 9, 9]]


def test_logits_match_transformers(checkpoint, model):
  hf, _ = checkpoint
  rows, rows_images = parity_batch(model.vl_cfg)
  T = max(map(len, rows))
  ids, mask = left_pad(rows, T, len(rows), 0)
  with torch.no_grad():
    ref = hf(**hf_kwargs(ids, mask, rows_images)).logits.numpy()
  ours = our_logits(model, ids, mask, rows_images)
  valid = mask.astype(bool)
  np.testing.assert_allclose(ours[valid], ref[valid], atol=1e-4, rtol=0)
  # the pixels matter: other pixels of the same sizes change the logits
  other = [
    [vin.Image(im.patches[::-1].copy(), im.grid) for im in row]
    for row in rows_images
  ]
  changed = our_logits(model, ids, mask, other)
  assert np.abs(changed[0, -1] - ours[0, -1]).max() > 1e-3
  np.testing.assert_array_equal(changed[1], ours[1])  # the text-only row


def test_greedy_tokens_match_transformers_generate(checkpoint, model):
  hf, _ = checkpoint
  rows, rows_images = parity_batch(model.vl_cfg)
  sampler = Sampler(model, max_prompt_len=128, max_new_tokens=8)
  out = sampler.generate(rows, images=rows_images, greedy=True)
  for row, images, tokens in zip(rows, rows_images, out.tokens, strict=True):
    kw = hf_kwargs([row], [[1] * len(row)], [images])
    with torch.no_grad():
      ref = hf.generate(**kw, max_new_tokens=8, do_sample=False)
    assert ref[0, len(row) :].tolist() == tokens


def test_export_loads_back_in_transformers(tmp_path, model):
  save_qwen3_vl(model, str(tmp_path), preprocessor=PREPROCESSOR)
  back = transformers.Qwen3VLForConditionalGeneration.from_pretrained(
    str(tmp_path)
  ).eval()
  rows, rows_images = parity_batch(model.vl_cfg)
  T = max(map(len, rows))
  ids, mask = left_pad(rows, T, len(rows), 0)
  with torch.no_grad():
    ref = back(**hf_kwargs(ids, mask, rows_images)).logits.numpy()
  ours = our_logits(model, ids, mask, rows_images)
  valid = mask.astype(bool)
  np.testing.assert_allclose(ours[valid], ref[valid], atol=1e-4, rtol=0)
  again = load_qwen3_vl(str(tmp_path))
  np.testing.assert_array_equal(
    np.asarray(again.vision.blocks["wqkv"][...]),
    np.asarray(model.vision.blocks["wqkv"][...]),
  )


def test_sampler_logprobs_equal_the_training_forward(checkpoint):
  model = load_qwen3_vl(checkpoint[1])  # the learner takes its arrays
  rows, rows_images = parity_batch(model.vl_cfg)
  sampler = Sampler(model, max_prompt_len=128, max_new_tokens=6)
  out = sampler.generate(rows, images=rows_images, seed=3, num_samples=2)
  learner = Learner(model, OptimConfig(max_seq_len=160, micro_batch_size=8))
  samples = [
    Sample(
      rows[i // 2], out.tokens[i], out.logprobs[i], 1.0, rows_images[i // 2]
    )
    for i in range(len(out.tokens))
  ]
  for got, want in zip(learner.logprobs(samples), out.logprobs, strict=True):
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
  metrics = learner.update(samples)
  assert metrics["first_microbatch_ratio"] == pytest.approx(1.0, abs=1e-4)
  assert np.isfinite(metrics["loss"]) and metrics["grad_norm"] > 0


def test_session_with_screenshots_equals_reencoding(model):
  cfg = model.vl_cfg
  a, b, c = make_images(cfg, [(24, 40), (24, 40), (40, 56)], seed=1)
  first = [prompt(cfg, [a], [7, 8]), prompt(cfg, [c], [9])]
  sampler = Sampler(model, max_prompt_len=128, max_new_tokens=5)
  session = sampler.session(2, 512)
  reply1 = session.turn(first, images=[[a], [c]], greedy=True)
  second = [prompt(cfg, [b], [11], head=(4,)), [12, 13]]
  reply2 = session.turn(second, images=[[b], []], greedy=True)
  for r in range(2):
    history = first[r] + reply1.tokens[r] + second[r]
    images = [[a, b], [c]][r]
    whole = sampler.generate([history], images=[images], greedy=True)
    assert whole.tokens[0] == reply2.tokens[r]
    np.testing.assert_allclose(
      whole.logprobs[0], reply2.logprobs[r], atol=1e-4, rtol=0
    )


def test_no_recompilation_over_mixed_calls(model):
  cfg = model.vl_cfg
  small = make_images(cfg, [(24, 40)] * 3, seed=2)
  large = make_images(cfg, [(40, 56)] * 2, seed=3)
  sampler = Sampler(
    model,
    max_prompt_len=128,
    max_new_tokens=4,
    prompt_buckets=(128,),
    batch_buckets=(4,),
    image_grids=[(6, 10), (10, 14)],
    images_per_grid=4,
  )
  rng = np.random.RandomState(0)

  def call(k):
    n_rows = 1 + k % 4
    rows, rows_images = [], []
    for r in range(n_rows):
      pick = (k + r) % 3
      images = [[], [small[k % 3]], [small[r % 3], large[k % 2]]][pick]
      rows.append(prompt(cfg, images, rng.randint(0, 299, 1 + (k + r) % 7)))
      rows_images.append(images)
    return sampler.generate(rows, images=rows_images, seed=k)

  for k in range(4):  # warm-up: text-only rows and both grids
    call(k)
  with CompileCounter() as counter:
    for k in range(4, 24):
      call(k)
  assert counter.count == 0


def test_bad_images_fail_before_any_compile(model, tmp_path):
  cfg = model.vl_cfg
  from flax import nnx

  from rla_jax.models import Qwen

  text_model = Qwen(cfg.text, rngs=nnx.Rngs(0))
  text_sampler = Sampler(text_model, max_prompt_len=128, max_new_tokens=4)
  (image,) = make_images(cfg, [(40, 56)])  # 10x14 patches
  strict = Sampler(
    model, max_prompt_len=128, max_new_tokens=4, image_grids=[(6, 10)]
  )
  sampler = Sampler(model, max_prompt_len=128, max_new_tokens=4)
  session = sampler.session(1, 256)
  short = prompt(cfg, [image], [7])[:-10]  # lost some of its pad tokens
  with CompileCounter() as counter:
    with pytest.raises(ValueError, match=r"\(10, 14\) is not one of"):
      strict.generate([prompt(cfg, [image], [7])], images=[[image]])
    with pytest.raises(ValueError, match="needs 35 image-pad tokens"):
      sampler.generate([short], images=[[image]])
    with pytest.raises(ValueError, match="needs 35 image-pad tokens"):
      session.turn([short], images=[[image]])
    with pytest.raises(ValueError, match="text-only model"):
      text_sampler.generate([prompt(cfg, [image], [7])], images=[[image]])
    with pytest.raises(ValueError, match="1 image-pad tokens for 2 images"):
      vin.expand_image_pads([START, PAD, END], [image, image], cfg)
  assert counter.count == 0


def test_missing_vision_tensor_is_named(tmp_path, checkpoint):
  from safetensors.numpy import load_file, save_file

  _, path = checkpoint
  tensors = load_file(os.path.join(path, "model.safetensors"))
  del tensors["model.visual.blocks.1.attn.qkv.weight"]
  save_file(tensors, str(tmp_path / "model.safetensors"))
  with open(os.path.join(path, "config.json")) as f:
    (tmp_path / "config.json").write_text(f.read())
  with CompileCounter() as counter:
    with pytest.raises(CheckpointError, match="blocks.1.attn.qkv.weight"):
      load_qwen3_vl(str(tmp_path))
  assert counter.count == 0
