"""The memory plan's Qwen3-VL section: the GUI setting's slices, the
vision tower's terms, and where each preset value was checked."""

from __future__ import annotations

import math

from launch.accelerators import (
  ACCELERATORS,
  slice_label,
)
from launch.activation_memory import (
  attention_prefill_bytes,
)
from launch.memory_model import (
  Workload,
)
from launch.memory_vision import (
  image_feature_bytes,
  images_per_device,
  screenshot_grid,
  screenshot_tokens,
  smart_resize,
  vision_encode_bytes,
  vision_flops_per_image,
  vision_train_activation_bytes,
)
from launch.param_memory import (
  param_count,
  param_count_formula,
  text_config,
  vision_config,
)
from launch.plan_tables import (
  breakdown_lines,
  gib,
  markdown_table,
  slice_table,
  time_lines,
)
from launch.slice_plan import (
  attention_flops_per_token,
  best_plan,
  peak_phase,
  smallest_fitting,
  step_time,
)

# Where each value of the qwen3-vl-8b preset was checked (search of stored
# public pages; the official Qwen/Qwen3-VL-8B-Instruct config.json itself
# was not among them).
_GGUF = (
  "Ollama's GGUF metadata of qwen3-vl:8b-instruct (converted from the "
  "official checkpoint)"
)


_DERIVED = (
  "config.json of fine-tunes that copy the base config (huggingface.co "
  "Steinate/Cortex, Balfiky/mobthing2, Chhagan005/CSM-DocExtract-8N)"
)


VL_SOURCES = (
  ("text vocab_size", "151936", _DERIVED + "; not in the GGUF excerpt"),
  (
    "text hidden 4096, intermediate 12288, 36 layers, 32 heads, 8 kv "
    "heads, head_dim 128",
    "as preset",
    _GGUF + " (embedding_length, feed_forward_length, block_count, "
    "head_count, head_count_kv, key_length); " + _DERIVED,
  ),
  (
    "mrope_section, interleaved; rope_theta",
    "(24, 20, 20), True; 5e6",
    _DERIVED + "; rope_theta also GGUF rope.freq_base 5e6",
  ),
  ("tie_word_embeddings", "False", _DERIVED),
  (
    "vision depth 27, hidden 1152, 16 heads, patch 16, temporal patch 2, "
    "merge 2, deepstack (8, 16, 24)",
    "as preset",
    _GGUF + " (vision.block_count, embedding_length, head_count, "
    "patch_size, temporal_patch_size, spatial_merge_size, "
    "deepstack_visual_indexes)",
  ),
  (
    "vision intermediate 4304, 2304 position embeddings",
    "as preset",
    "not in the GGUF excerpt: transformers' Qwen3VLVisionConfig defaults "
    "(depth 27, hidden 1152, intermediate 4304, 16 heads), the 32B "
    "config.json (quanliang/F1: same tower, 4304, 2304) and a C++ port's "
    "header for Qwen3-VL-8B (4304, out 4096); not from the 8B file itself",
  ),
  (
    "vision out_hidden_size",
    "4096",
    "= text hidden (Qwen3VLConfig requires it); NeMo Megatron-Bridge "
    "Qwen3VLTransformerConfig default 4096",
  ),
  (
    "processor min / max pixels",
    "65536 / 16777216",
    "preprocessor_config.json of a copy of Qwen3-VL-8B-Instruct "
    "(cdreetz/Qwen3-VL-8B-Instruct: size.shortest_edge / longest_edge) "
    "and GGUF vision.shortest_edge / longest_edge",
  ),
  (
    "total parameters",
    "8,767,123,696 (eval_shape)",
    "published 8.77B (LM Studio's qwen3-vl-8b card); Hugging Face "
    "lists 9B (rounded)",
  ),
)


def vl_slice_rows(cfg, wl: Workload) -> list[tuple]:
  """Per chip: smallest slice of wl (co-resident), its tensor sizes, peak
  and step time."""
  rows = []
  for acc in ACCELERATORS:
    co = smallest_fitting(cfg, cfg, acc, wl, True)
    if co is None:
      big = best_plan(cfg, cfg, acc, acc.slice_chips[-1], wl)
      none = (
        f"none (largest, {slice_label(acc, big.chips)}: peak "
        f"{gib(big.peak(True))} GiB in {peak_phase(big)})"
      )
    rows.append(
      (
        acc.name,
        slice_label(acc, co.chips) if co else none,
        f"t={co.train_tensor}, s={co.sample_tensor}" if co else "-",
        f"{gib(co.peak(True))} / {gib(co.usable)}" if co else "-",
        f"{step_time(cfg, cfg, co, wl)['total']:.0f}" if co else "-",
      )
    )
  return rows


def reference_cluster_lines(cfg, wl: Workload) -> list[str]:
  """The reference's own cluster: 12 nodes x 8 GPUs (96, not a rentable
  power of two here), H100 and H200."""
  out = []
  for acc in ACCELERATORS:
    if "{nodes}" not in acc.slice_name:
      continue
    p = best_plan(cfg, cfg, acc, 96, wl)
    out.append(
      f"- 12x8 {acc.name.split()[0]} (the reference's 96 GPUs): t="
      f"{p.train_tensor}, s={p.sample_tensor}, peak {gib(p.peak(True))} / "
      f"{gib(p.usable)} GiB ({'fits' if p.fits(True) else 'does not fit'}"
      f", {peak_phase(p)}), RL step "
      f"{step_time(cfg, cfg, p, wl)['total']:.0f} s"
    )
  return out


def vl_section(name: str, cfg, wl: Workload, as_coded: Workload) -> list:
  """The Qwen3-VL preset in the GUI setting (`memory_model.GUI`): the
  setting, the preset's sources, parameters, screenshots and prompts, the
  vision tower's activations, and the smallest slices (images sharded, and
  `as_coded`)."""
  L = _vl_intro_lines(name, wl)
  L += markdown_table(("field", "value", "checked against"), VL_SOURCES)
  L += _vl_parameter_lines(cfg)
  L += _vl_screenshot_lines(cfg, wl)
  L += _vl_slice_lines(name, cfg, wl, as_coded)
  return L + [""]


def _vl_intro_lines(name: str, wl: Workload) -> list[str]:
  """The section's heading and the GUI workload it plans for."""
  return [
    f"## {name} as policy and judge: the GUI setting ({wl.name})",
    "",
    "Qwen3-VL-8B (`memory_model.VL_PRESETS`, a real `Qwen3VLConfig`; "
    "parameters from `nnx.eval_shape(Qwen3VL(cfg))`, shards from the real "
    "rules, vision axes included) as both the policy and the judge "
    f"(reference sections 4, 8): {wl.tasks} tasks x {wl.rollouts} "
    f"rollouts = {wl.policy_rows} trajectories x {wl.turns} steps, policy "
    f"prompt {wl.policy_prompt} + {wl.policy_gen} new tokens, judge "
    f"m={wl.judgements}: {wl.rm_rows} rows of {wl.rm_prompt} + "
    f"{wl.rm_gen}. Screenshots {wl.screen[1]}x{wl.screen[0]}: the policy "
    f"prompt holds {wl.policy_images} (current and previous), the judge's "
    f"{wl.rm_images} (previous, current, next). Each turn's prompts are "
    "new (the reference rebuilds them every step), so every call encodes "
    "its screenshots; a prompt with images is prefilled as one whole-batch"
    " chunk (`rla_jax/sampling/image_prefill.py`: no row pieces). Same "
    "precision, residency and attention ('blockwise' = the flash-style "
    "'auto') as above; the vision tower is trained with the decoder.",
    "",
    "### Configuration checked against published sources",
    "",
  ]


def _vl_parameter_lines(cfg) -> list[str]:
  """Parameter counts of the text decoder and the vision tower."""
  t = text_config(cfg)
  L = ["", "### Parameters", ""]
  L += markdown_table(
    ("part", "eval_shape sum", "closed form", "fp32 GiB"),
    [
      (
        "text decoder",
        f"{param_count(cfg, 'text'):,}",
        f"{param_count_formula(t):,}",
        gib(4 * param_count(cfg, "text")),
      ),
      (
        "vision tower",
        f"{param_count(cfg, 'vision'):,}",
        f"{param_count_formula(cfg) - param_count_formula(t):,}",
        gib(4 * param_count(cfg, "vision")),
      ),
      (
        "total",
        f"{param_count(cfg):,}",
        f"{param_count_formula(cfg):,}",
        gib(4 * param_count(cfg)),
      ),
    ],
  )
  return L


def _vl_screenshot_lines(cfg, wl: Workload) -> list[str]:
  """Screenshot geometry and FLOPs, their share of the prompts, then the
  vision tower's activations per screenshot (`_vl_activation_lines`)."""
  v = vision_config(cfg)
  factor = v.patch_size * v.spatial_merge_size
  L = [
    "",
    "### Screenshots and prompts",
    "",
    f"The image processor's `smart_resize` (factor = patch {v.patch_size} "
    f"x merge {v.spatial_merge_size} = {factor}, pixels within "
    "[65536, 16777216]) and the tower's patch grid, per screenshot; the "
    "tower attends over all P patches of an image (bidirectional), the "
    "prompt holds P / 4 merged tokens. FLOPs: one forward "
    "(`memory_vision.vision_flops_per_image`).",
    "",
  ]
  L += _screen_size_table(cfg, factor)
  L += _prompt_share_lines(cfg, wl)
  return L + _vl_activation_lines(cfg, wl)


def _screen_size_table(cfg, factor: int) -> list[str]:
  """Per common screen size: the resized image (`smart_resize` by
  factor), patch grid, patches, merged tokens and one forward's FLOPs."""
  v, t = vision_config(cfg), text_config(cfg)
  rows = []
  for screen in ((720, 1280), (1080, 1920), (1440, 2560)):
    h, w = smart_resize(*screen, factor)
    g = screenshot_grid(v, screen)
    f = vision_flops_per_image(v, math.prod(g), t.hidden_size)
    rows.append(
      (
        f"{screen[1]}x{screen[0]}",
        f"{w}x{h}",
        f"{g[0]} x {g[1]}",
        f"{math.prod(g):,}",
        f"{screenshot_tokens(v, screen):,}",
        f"{f['matmul'] / 1e12:.1f}",
        f"{f['attention'] / 1e12:.1f}",
      )
    )
  return markdown_table(
    (
      "screen",
      "resized (w x h)",
      "patch grid h x w",
      "patches P",
      "merged tokens",
      "fwd matmul TFLOP",
      "fwd attention TFLOP",
    ),
    rows,
  )


def _prompt_share_lines(cfg, wl: Workload) -> list[str]:
  """At wl's screen size: the screenshots' share of the policy and judge
  prompts, and one screenshot's tower forward vs the text decoder's
  forward over a whole policy prompt."""
  v, t = vision_config(cfg), text_config(cfg)
  grid = screenshot_grid(v, wl.screen)
  P, tok = math.prod(grid), screenshot_tokens(v, wl.screen)
  fl = vision_flops_per_image(v, P, t.hidden_size)
  text_prompt = 2 * param_count(cfg, "text") * wl.policy_prompt
  text_prompt += wl.policy_prompt * attention_flops_per_token(
    t, wl.policy_prompt
  )
  return [
    "",
    f"At {wl.screen[1]}x{wl.screen[0]}: the policy prompt's "
    f"{wl.policy_images} screenshots are {wl.policy_images * tok:,} of its "
    f"{wl.policy_prompt} tokens (text: up to "
    f"{wl.policy_prompt - wl.policy_images * tok:,}), the judge's "
    f"{wl.rm_images} are {wl.rm_images * tok:,} of {wl.rm_prompt} (text: up"
    f" to {wl.rm_prompt - wl.rm_images * tok:,}; the 8192 cap holds at most"
    f" {wl.rm_prompt // tok} screenshots). One screenshot's tower forward "
    f"is {(fl['matmul'] + fl['attention']) / 1e12:.1f} TFLOP, "
    f"{(fl['matmul'] + fl['attention']) / text_prompt:.0%} of the text "
    f"decoder's forward over a whole {wl.policy_prompt}-token prompt "
    f"({text_prompt / 1e12:.0f} TFLOP); over half of it is the P^2 "
    "attention.",
    "",
  ]


def _vl_activation_lines(cfg, wl: Workload) -> list[str]:
  """The vision tower's activations per screenshot, einsum vs flash."""
  v, t = vision_config(cfg), text_config(cfg)
  P = math.prod(screenshot_grid(v, wl.screen))
  L = [
    "### Vision tower activations per screenshot (tensor 1)",
    "",
    f"P = {P:,} patches, {v.num_heads} heads: einsum materialises "
    f"[{v.num_heads}, P, P] scores per image and layer; flash keeps tiles. "
    "Encode: one layer's transient (`vision_encode_bytes`); train: the "
    "tower's scan has no remat, so all 27 layers' forward activations are "
    "kept (`vision_train_activation_bytes`).",
    "",
  ]
  rows = []
  for att in ("einsum", "blockwise"):
    tr = vision_train_activation_bytes(v, 1, P, t.hidden_size, 1, att)
    rows.append(
      (
        att,
        gib(
          attention_prefill_bytes(
            1, v.num_heads, v.num_heads, P, P, v.head_dim, att
          )
        ),
        gib(vision_encode_bytes(v, 1, P, 1, att)),
        gib(tr["saved"]),
        gib(tr["layer"]),
        gib(image_feature_bytes(v, 1, P, t.hidden_size)),
      )
    )
  L += markdown_table(
    (
      "attention",
      "encode: attention transient GiB",
      "encode: layer transient GiB",
      "train: saved by the scan GiB",
      "train: one layer's backward GiB",
      "features + DeepStack GiB",
    ),
    rows,
  )
  return L


def _vl_slice_lines(name: str, cfg, wl: Workload, as_coded: Workload):
  """The smallest slices (images sharded, and as coded now), the
  reference's cluster size, and each slice's breakdown and step time."""
  L = [
    "",
    "### Smallest slices",
    "",
    "Images sharded with their rows (each device encodes its own rows' "
    "screenshots; what the plan needs):",
    "",
  ]
  L += slice_table(cfg, wl)
  L += _as_coded_slice_lines(cfg, wl, as_coded)
  L += ["", "On the reference's cluster size, images sharded:", ""]
  L += reference_cluster_lines(cfg, wl)
  L += ["", "and as coded now:", ""]
  L += reference_cluster_lines(cfg, as_coded)
  for acc in ACCELERATORS:
    co = smallest_fitting(cfg, cfg, acc, wl, True)
    if co is None:
      continue
    L += _vl_slice_breakdown_lines(name, cfg, wl, co)
  return L


def _as_coded_slice_lines(cfg, wl: Workload, as_coded: Workload) -> list:
  """Why the current code encodes every image on every device, and the
  smallest slices of `as_coded` per chip (`vl_slice_rows`)."""
  L = [
    "",
    "As coded now (`GUI_AS_CODED`): the Sampler places a call's pixels "
    "replicated (`sampler.py`, `(None,) * ndim`) and the Learner a micro-"
    "batch's (`Learner._place_batch`), so every device encodes every image"
    " of the call / micro-batch, the count rounded up to a power of two "
    f"(RM call: {wl.rm_rows} rows x {wl.rm_images} = "
    f"{wl.rm_rows * wl.rm_images} -> "
    f"{images_per_device(wl.rm_images, wl.rm_rows, 1, False)} images on "
    "every device):",
    "",
  ]
  return L + markdown_table(
    (
      "chip",
      "smallest slice (co-resident)",
      "tensor train/sample",
      "peak / usable GiB",
      "RL step s (upper bound)",
    ),
    vl_slice_rows(cfg, as_coded),
  )


def _vl_slice_breakdown_lines(name: str, cfg, wl: Workload, co) -> list:
  """One smallest slice (images sharded): its memory breakdown, the
  judge's vision encode next to the RM sampling total, and step time."""
  v = vision_config(cfg)
  P = math.prod(screenshot_grid(v, wl.screen))
  ph = co.phases
  L = [
    "",
    f"### {name} on {slice_label(co.acc, co.chips)} ({co.acc.name}), images "
    "sharded",
    "",
  ]
  L += breakdown_lines(co)
  dp = co.chips // co.sample_tensor
  judge_images = images_per_device(wl.rm_images, wl.rm_rows, dp, True)
  L += [
    "",
    "prefill_transient is the larger of the text layer's and the vision"
    " layer's (they run one after the other): vision encode of "
    f"{judge_images} judge screenshots per device = "
    + gib(
      vision_encode_bytes(
        v,
        judge_images,
        P,
        co.sample_tensor,
        wl.attention,
      )
    )
    + f" GiB; RM sampling total {gib(sum(ph['rm_sample'].values()))} GiB.",
    "",
    "Step time:",
    "",
  ]
  return L + time_lines(cfg, cfg, co, wl)
