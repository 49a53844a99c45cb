"""Per-device memory model of the Qwen policy / reward model (analytical):
the model presets and the workloads the model is evaluated on.

Here: the model presets (`PRESETS`; `VL_PRESETS` for Qwen3-VL; `SMALL`, the
config of the compiled checks) and one RL step's workload (`Workload`;
`PAPER`, `BEFORE`, `CODING`, `GUI`, `GUI_AS_CODED`). The model's terms:
chip kinds and slices in `launch/accelerators.py`; parameter counts and
per-device parameter bytes (from the real model definition and sharding
rules) in `launch/param_memory.py`; activation, attention and KV-cache
bytes in `launch/activation_memory.py`.

Precision plan (stated, used throughout): fp32 master parameters, fp32 AdamW
mu and nu, fp32 gradients (an accumulator and one micro-batch's), bf16
compute; the sampler holds a bf16, tensor-parallel-only copy of the weights
and a bf16 KV cache. fp32 masters are required: with the paper's lr 1e-6 an
Adam update (~lr) is ~5e-5 of a typical weight (~0.02), far below bf16's
relative resolution (2^-8 = 3.9e-3), so bf16-only weights would not move.

Qwen3-VL (`VL_PRESETS`, the GUI setting `GUI`): the vision tower's
parameters are counted, sharded and kept like the text model's; its
activations (per image, bidirectional attention over the P patches of a
screenshot) and FLOPs are analytical estimates of what
`rla_jax.models.qwen3_vl.vision` materialises, not checked against compiled
memory. Screenshot sizes follow the image processor's `smart_resize`.

Screenshots and the vision tower's terms are in `launch/memory_vision.py`;
the per-phase totals built from both in `launch/memory_phases.py`; the plan
built on them is `launch/memory_plan.py`.
"""

from __future__ import annotations

import dataclasses

from rla_jax.models.config import QwenConfig
from rla_jax.models.qwen3_vl import Qwen3VLConfig, VisionConfig

PRESETS = {
  "qwen2.5-7b-instruct": QwenConfig(
    model_type="qwen2",
    vocab_size=152064,
    hidden_size=3584,
    intermediate_size=18944,
    num_layers=28,
    num_heads=28,
    num_kv_heads=4,
    head_dim=128,
    tie_word_embeddings=False,
  ),
  "qwen3-8b": QwenConfig(
    model_type="qwen3",
    vocab_size=151936,
    hidden_size=4096,
    intermediate_size=12288,
    num_layers=36,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    tie_word_embeddings=False,
  ),
}


# Qwen3-VL-8B (the GUI setting's policy and judge): the shapes of
# Qwen/Qwen3-VL-8B-Instruct's config.json (docs/MEMORY_PLAN.md, section
# "qwen3-vl-8b", says which value was checked against which source).
VL_PRESETS = {
  "qwen3-vl-8b": Qwen3VLConfig(
    # Qwen3-8B's decoder shapes, with Qwen3-VL's rope and M-RoPE layout.
    text=PRESETS["qwen3-8b"].replace(
      rope_theta=5_000_000.0,
      max_position_embeddings=262144,
      mrope_section=(24, 20, 20),
    ),
    vision=VisionConfig(
      depth=27,
      hidden_size=1152,
      intermediate_size=4304,
      num_heads=16,
      out_hidden_size=4096,
      patch_size=16,
      temporal_patch_size=2,
      spatial_merge_size=2,
      num_position_embeddings=2304,
      deepstack_visual_indexes=(8, 16, 24),
    ),
  ),
}


# The small config of the compiled checks (dims divide every mesh axis <= 8).
SMALL = QwenConfig(
  model_type="qwen2",
  vocab_size=1024,
  hidden_size=256,
  intermediate_size=512,
  num_layers=4,
  num_heads=8,
  num_kv_heads=4,
  head_dim=32,
)


@dataclasses.dataclass(frozen=True)
class Workload:
  """One RL step of the AlfWorld paper setting (reference section 3.3;
  `CODING` below: the coding paper preset).

  Token counts are the configured caps (upper bounds): every prompt at its
  max length, every response at its max generation length.
  """

  name: str = "alfworld:paper"
  tasks: int = 16
  rollouts: int = 8
  turns: int = 20  # mean interaction steps per trajectory
  policy_prompt: int = 2048
  policy_gen: int = 2048
  rm_prompt: int = 2048
  rm_gen: int = 4096
  judgements: int = 3  # m RM samples per (trajectory, step)
  # RM rows per task instead (coding: tests_per_task unit-test generations
  # per task, sampled in one call); None = trajectories x judgements.
  rm_rows_per_task: int | None = None
  micro_batch_per_device: int = 1
  remat: str = "full"
  logprob_chunk: int = 128
  # rows per device per prefill piece; None = the whole batch at once (the
  # Sampler's prefill_rows = 0; the paper presets set 4).
  prefill_rows_per_device: int | None = 4
  # `rla_jax.models.attention` implementation (config.model.attention); the
  # paper presets run "auto" = pallas_tpu on TPU, cudnn on GPU (bf16):
  # both tile-bounded like "blockwise", the term used for them here.
  attention: str = "blockwise"
  # Screenshots (Qwen3-VL workloads): (height, width) pixels of one, and
  # how many a policy / RM prompt holds (their merged tokens are part of
  # the prompt lengths above). images_sharded: each device encodes only
  # its own rows' images; False is the code as it is now (the Sampler and
  # the Learner replicate a call's / micro-batch's pixels, so every device
  # encodes every image, the count rounded up to a power of two).
  screen: tuple[int, int] | None = None
  policy_images: int = 0
  rm_images: int = 0
  images_sharded: bool = True

  @property
  def trajectories(self) -> int:
    return self.tasks * self.rollouts

  @property
  def policy_rows(self) -> int:  # concurrent policy rows
    return self.trajectories

  @property
  def rm_rows(self) -> int:  # concurrent RM rows: one step of every traj x m
    if self.rm_rows_per_task is not None:
      return self.tasks * self.rm_rows_per_task
    return self.trajectories * self.judgements


# What the paper presets run (flash attention, 4-row prefill pieces) and
# the plan before the memory-bounded attention (einsum, whole-batch prefill).
PAPER = Workload()
BEFORE = Workload(attention="einsum", prefill_rows_per_device=None)
# configs/coding.py "paper": 64 tasks x 32 programs (2048 policy rows in one
# Sampler call, prompt 2048 + 2048), 16 generated tests per task (1024 RM
# rows, 2048 + 4096), one turn. Prefill is counted over every row (an upper
# bound: the sampler prefills each prompt once and repeats its cache).
CODING = Workload(
  name="coding:paper",
  tasks=64,
  rollouts=32,
  turns=1,
  rm_rows_per_task=16,
)


# The GUI (OSWorld) setting, reference sections 3.3, 4, 8: 12 tasks x 8
# rollouts, 30 steps (the training cap: an upper bound), policy prompt cap
# 8192 and 2048 new tokens per call (the sampler's cap; training allows
# 4096 but a response is never longer than its call's cap), RM (judge)
# prompt 8192 + 8096, m = 3 judgements per step. Screenshots 1920x1080
# (the OSWorld VM screen): the policy prompt holds the current and the
# previous screenshot, the judge's the previous, current and next. A prompt
# with images is prefilled as one whole-batch chunk
# (`sampling.image_prefill`): no row pieces.
GUI = Workload(
  name="gui:paper",
  tasks=12,
  rollouts=8,
  turns=30,
  policy_prompt=8192,
  policy_gen=2048,
  rm_prompt=8192,
  rm_gen=8096,
  judgements=3,
  prefill_rows_per_device=None,
  screen=(1080, 1920),
  policy_images=2,
  rm_images=3,
)
# The same with the image layout of the code as it is now.
GUI_AS_CODED = dataclasses.replace(GUI, images_sharded=False)
