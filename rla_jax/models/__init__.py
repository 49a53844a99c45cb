"""Flax NNX Qwen2/Qwen3/Llama models, KV cache and Hugging Face checkpoint
I/O."""

from rla_jax.models.config import ConfigError, QwenConfig
from rla_jax.models.hf_io import (
  CheckpointError,
  load_model,
  load_qwen,
  save_model,
  save_qwen,
)
from rla_jax.models.kv_cache import KVCache, init_cache
from rla_jax.models.qwen import Qwen

__all__ = [
  "ConfigError",
  "QwenConfig",
  "CheckpointError",
  "load_qwen",
  "save_qwen",
  "load_model",
  "save_model",
  "KVCache",
  "init_cache",
  "Qwen",
]
