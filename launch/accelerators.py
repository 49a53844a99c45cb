"""Accelerator descriptions for the memory and step-time plan.

The chip kinds one can rent (`Accelerator`, `ACCELERATORS`: HBM capacity,
peak dense bf16 FLOP/s, HBM bandwidth, slice sizes and names), the slice
label of a chip count (`slice_label`), and the fractions of those peaks the
plan assumes (`USABLE_HBM_FRACTION`, `TRAIN_MFU`, `DECODE_BW_UTIL`). Used
by the memory model (`launch/memory_model.py`) and the plan built on it
(`launch/memory_plan.py`).
"""

from __future__ import annotations

import dataclasses

GiB = 2**30
USABLE_HBM_FRACTION = 0.90  # XLA/runtime reserve and fragmentation headroom
TRAIN_MFU = 0.40  # model-FLOP utilisation for training and prefill
DECODE_BW_UTIL = 0.70  # achieved / peak HBM bandwidth for decode


@dataclasses.dataclass(frozen=True)
class Accelerator:
  """One chip kind: capacity, peak dense bf16 FLOP/s and HBM bandwidth."""

  name: str
  hbm_bytes: float
  bf16_flops: float
  hbm_bytes_per_s: float
  slice_chips: tuple[int, ...]  # slice sizes one can rent, in chips
  slice_name: str  # format of the slice name, {n} = chips
  source: str


ACCELERATORS = (
  Accelerator(
    "TPU v5e",
    16 * GiB,
    197e12,
    819e9,
    (1, 4, 8, 16, 32, 64, 128, 256),
    "v5litepod-{n}",
    "cloud.google.com/tpu/docs/v5e: 16 GiB HBM2, 197 TF/s bf16, 819 GB/s",
  ),
  Accelerator(
    "TPU v5p",
    95 * GiB,
    459e12,
    2765e9,
    (4, 8, 16, 32, 64, 128, 256),
    "v5p-{n2}",
    "cloud.google.com/tpu/docs/v5p: 95 GiB HBM2e, 459 TF/s bf16, "
    "2765 GB/s; slice name counts TensorCores (2 per chip)",
  ),
  Accelerator(
    "TPU v6e",
    32 * GiB,
    918e12,
    1640e9,
    (1, 4, 8, 16, 32, 64, 128, 256),
    "v6e-{n}",
    "cloud.google.com/tpu/docs/v6e: 32 GiB HBM, 918 TF/s bf16, 1640 GB/s",
  ),
  Accelerator(
    "H100 80GB SXM",
    81559 * 2**20,
    989e12,
    3.35e12,
    (1, 2, 4, 8, 16, 32, 64),
    "{nodes}x8 H100",
    "NVIDIA H100 SXM datasheet: 80 GB HBM3 (nvidia-smi: 81559 "
    "MiB), 989 TF/s dense bf16 (1979 sparse), 3.35 TB/s",
  ),
  Accelerator(
    "H200 141GB SXM",
    143771 * 2**20,
    989e12,
    4.8e12,
    (1, 2, 4, 8, 16, 32, 64),
    "{nodes}x8 H200",
    "NVIDIA H200 datasheet: 141 GB HBM3e, 989 TF/s dense bf16, "
    "4.8 TB/s (nvidia-smi shows 143771 MiB)",
  ),
)


def slice_label(acc: Accelerator, chips: int) -> str:
  if "{nodes}" in acc.slice_name:
    return (
      f"{chips}x {acc.name.split()[0]}"
      if chips < 8
      else acc.slice_name.format(nodes=chips // 8)
    )
  return acc.slice_name.format(n=chips, n2=2 * chips)
