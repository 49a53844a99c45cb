"""Qwen3-VL: the vision-language model of the GUI setting (config, vision
tower, model, host-side inputs, Hugging Face checkpoint I/O)."""

from rla_jax.models.qwen3_vl.config import Qwen3VLConfig, VisionConfig
from rla_jax.models.qwen3_vl.hf_io import load_qwen3_vl, save_qwen3_vl
from rla_jax.models.qwen3_vl.model import ImageBatch, Qwen3VL

__all__ = [
  "ImageBatch",
  "Qwen3VL",
  "Qwen3VLConfig",
  "VisionConfig",
  "load_qwen3_vl",
  "save_qwen3_vl",
]
