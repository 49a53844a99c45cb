"""Training samples and the padded arrays the learner and SFT read.

A `Sample` is one (prompt, response) pair with its behaviour log-probs and
advantage; `draw_samples` subsamples an RL step's samples uniformly;
`pack_rows` right-pads token pairs into [R, T] arrays, which `pack_samples`
(RL) and the warm start's SFT batches share, and `pack_image_inputs` adds a
Qwen3-VL batch's image inputs in the same layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rla_jax.models.qwen3_vl import inputs as vision_inputs


def draw_samples(samples: Sequence, max_samples: int, seed: int) -> list:
  """At most max_samples of an RL step's N training samples, drawn
  uniformly without replacement with numpy's generator seeded `seed`, in
  their original order (all N when max_samples is 0 or N <= max_samples).

  The PPO loss is a per-sample mean, so a uniform draw is an unbiased
  estimate of the whole step's loss at max_samples / N of the training
  FLOPs (one forward and backward pass per drawn sample).
  """
  if max_samples < 0:
    raise ValueError(f"max_samples must be >= 0, got {max_samples}")
  if max_samples == 0 or len(samples) <= max_samples:
    return list(samples)
  rng = np.random.default_rng(seed)
  keep = np.sort(rng.choice(len(samples), size=max_samples, replace=False))
  return [samples[i] for i in keep]


@dataclasses.dataclass
class Sample:
  """One training sample: a prompt, the sampled response and its signal.

  old_logprobs: [len(response)] behaviour log-probs of the response tokens;
  advantage: the scalar broadcast to every response token; images (a
  Qwen3-VL model's samples): the `qwen3_vl.inputs.Image`s of the prompt's
  image-pad tokens, in order.
  """

  prompt: Sequence[int]
  response: Sequence[int]
  old_logprobs: np.ndarray
  advantage: float
  images: Sequence = ()


def pack_rows(
  pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
  response_values: Sequence[Sequence[float]],
  seq_len: int,
  num_rows: int,
  pad_id: int = 0,
  values_name: str = "response values",
) -> dict[str, np.ndarray]:
  """Right-pads (prompt, response) token-id pairs into [num_rows, seq_len].

  Row i holds tokens = prompt_i + response_i, then pad_id. Returned ([R, T],
  R = num_rows, T = seq_len): tokens (int32), mask (int32, 1 on real
  tokens), response_mask (int32, 1 on response tokens) and response_values
  (float32, response_values[i] on row i's response tokens, 0 elsewhere;
  entry t belongs to token t). Rows beyond len(pairs) are empty (mask 0).

  Raises:
    ValueError: a row longer than seq_len, or response_values[i] of another
      length than response_i (named `values_name` in the message).
  """
  tokens = np.full((num_rows, seq_len), pad_id, np.int32)
  mask = np.zeros((num_rows, seq_len), np.int32)
  response_mask = np.zeros((num_rows, seq_len), np.int32)
  values = np.zeros((num_rows, seq_len), np.float32)
  for i, ((prompt, response), row_values) in enumerate(
    zip(pairs, response_values, strict=True)
  ):
    p, r = list(prompt), list(response)
    n = len(p) + len(r)
    if n > seq_len:
      raise ValueError(f"sample {i} has {n} tokens > seq_len {seq_len}")
    if len(row_values) != len(r):
      raise ValueError(
        f"sample {i}: {len(row_values)} {values_name} "
        f"for {len(r)} response tokens"
      )
    tokens[i, :n] = p + r
    mask[i, :n] = 1
    response_mask[i, len(p) : n] = 1
    values[i, len(p) : n] = row_values
  return {
    "tokens": tokens,
    "mask": mask,
    "response_mask": response_mask,
    "response_values": values,
  }


def pack_samples(
  samples: Sequence[Sample], seq_len: int, num_rows: int, pad_id: int = 0
) -> dict[str, np.ndarray]:
  """Right-pads samples into [num_rows, seq_len] arrays (`pack_rows`).

  tokens = prompt + response; mask marks real tokens; response_mask marks
  response tokens; old_logprobs is aligned with tokens (entry t is the
  log-prob of token t); advantages [num_rows]; rows beyond len(samples) are
  empty (mask 0, so they add nothing to the loss or its denominator).
  """
  rows = pack_rows(
    [(s.prompt, s.response) for s in samples],
    [s.old_logprobs for s in samples],
    seq_len,
    num_rows,
    pad_id,
    values_name="old log-probs",
  )
  advantages = np.zeros((num_rows,), np.float32)
  advantages[: len(samples)] = [s.advantage for s in samples]
  return {
    "tokens": rows["tokens"],
    "mask": rows["mask"],
    "response_mask": rows["response_mask"],
    "old_logprobs": rows["response_values"],
    "advantages": advantages,
  }


def pack_image_inputs(
  samples: Sequence[Sample], seq_len: int, num_rows: int, vl_cfg
) -> dict:
  """The image inputs of right-padded samples (`pack_samples`' layout):
  positions [R, T, 3] (M-RoPE), feature_rows [R, T] and images (an
  `ImageBatch`); {} when no sample has images. Raises ValueError when
  samples have images and the model is text-only (vl_cfg None)."""
  if not any(s.images for s in samples):
    return {}
  if vl_cfg is None:
    raise ValueError("samples with images given to a text-only model")
  layout = vision_inputs.image_layout(
    [list(s.prompt) + list(s.response) for s in samples],
    [list(s.images) for s in samples],
    seq_len,
    num_rows,
    vl_cfg,
    align="right",
  )
  return {
    "positions": layout.offsets,
    "feature_rows": layout.feature_rows,
    "images": layout.images,
  }
