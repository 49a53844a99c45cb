"""Architecture description of Qwen2/Qwen2.5/Qwen3 decoder-only models.

`QwenConfig` is the single source of truth for shapes. It is read from and
written to Hugging Face `config.json` files in both the transformers v4 form
(top-level `rope_theta`, `torch_dtype`) and the v5 form (`rope_parameters`,
`dtype`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from rla_jax.errors import ConfigError

SUPPORTED_MODEL_TYPES = ("qwen2", "qwen3")

_ARCHITECTURES = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


@dataclasses.dataclass(frozen=True)
class QwenConfig:
  """Shapes and options of a Qwen decoder.

  Dimension letters used across the models package:
    B batch, T new tokens, S cache slots, D hidden, N query heads,
    K key/value heads, G = N // K query heads per kv head, H head_dim,
    F mlp intermediate, V vocab, L layers.
  """

  model_type: str  # "qwen2" (q/k/v bias) or "qwen3" (q/k RMSNorm)
  vocab_size: int
  hidden_size: int
  intermediate_size: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  rope_theta: float = 1_000_000.0
  rms_norm_eps: float = 1e-6
  tie_word_embeddings: bool = False
  max_position_embeddings: int = 32768
  bos_token_id: int | None = None
  eos_token_id: int | list[int] | None = None

  def __post_init__(self):
    if self.model_type not in SUPPORTED_MODEL_TYPES:
      raise ConfigError(
        f"unsupported model_type {self.model_type!r}; supported: "
        f"{SUPPORTED_MODEL_TYPES}"
      )
    for name in (
      "vocab_size",
      "hidden_size",
      "intermediate_size",
      "num_layers",
      "num_heads",
      "num_kv_heads",
      "head_dim",
    ):
      if int(getattr(self, name)) <= 0:
        raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
    if self.num_heads % self.num_kv_heads:
      raise ConfigError(
        f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
        f"({self.num_kv_heads})"
      )

  @property
  def qkv_bias(self) -> bool:
    return self.model_type == "qwen2"

  @property
  def qk_norm(self) -> bool:
    return self.model_type == "qwen3"

  @property
  def num_groups(self) -> int:
    return self.num_heads // self.num_kv_heads

  def replace(self, **kw) -> QwenConfig:
    return dataclasses.replace(self, **kw)

  # ---------------------------------------------------------------- HF I/O
  @classmethod
  def from_hf_dict(
    cls, d: dict[str, Any], source: str = "config.json"
  ) -> QwenConfig:
    """Builds a config from a HF config dict (v4 or v5 keys)."""
    if not isinstance(d, dict):
      raise ConfigError(f"{source}: expected a JSON object, got {type(d)}")
    model_type = d.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
      raise ConfigError(
        f"{source}: unsupported model_type {model_type!r}; supported: "
        f"{SUPPORTED_MODEL_TYPES}"
      )

    def need(key):
      if key not in d:
        raise ConfigError(f"{source}: missing required key {key!r}")
      return d[key]

    num_heads = int(need("num_attention_heads"))
    hidden = int(need("hidden_size"))
    head_dim = d.get("head_dim")
    if head_dim is None:
      if model_type == "qwen3":
        head_dim = 128  # transformers' Qwen3Config default
      else:
        head_dim = hidden // num_heads
    rope = d.get("rope_parameters") or {}
    if "rope_theta" in d and d["rope_theta"] is not None:
      rope_theta = d["rope_theta"]  # v4
    elif "rope_theta" in rope:
      rope_theta = rope["rope_theta"]  # v5
    else:
      rope_theta = 10000.0  # transformers' class default
    scaling = d.get("rope_scaling")
    rope_type = (
      rope.get("rope_type")
      or (scaling or {}).get("rope_type")
      or (scaling or {}).get("type")
      or "default"
    )
    if rope_type != "default":
      raise ConfigError(
        f"{source}: rope type {rope_type!r} is not supported (only 'default')"
      )
    if d.get("use_sliding_window"):
      raise ConfigError(f"{source}: use_sliding_window=true is not supported")
    try:
      return cls(
        model_type=model_type,
        vocab_size=int(need("vocab_size")),
        hidden_size=hidden,
        intermediate_size=int(need("intermediate_size")),
        num_layers=int(need("num_hidden_layers")),
        num_heads=num_heads,
        num_kv_heads=int(d.get("num_key_value_heads") or num_heads),
        head_dim=int(head_dim),
        rope_theta=float(rope_theta),
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
        max_position_embeddings=int(d.get("max_position_embeddings", 32768)),
        bos_token_id=d.get("bos_token_id"),
        eos_token_id=d.get("eos_token_id"),
      )
    except (TypeError, ValueError) as e:
      if isinstance(e, ConfigError):
        raise ConfigError(f"{source}: {e}") from None
      raise ConfigError(f"{source}: malformed value: {e}") from None

  @classmethod
  def from_json_file(cls, path: str) -> QwenConfig:
    if not os.path.isfile(path):
      raise ConfigError(f"{path}: config file not found")
    try:
      with open(path) as f:
        d = json.load(f)
    except json.JSONDecodeError as e:
      raise ConfigError(f"{path}: malformed JSON: {e}") from None
    return cls.from_hf_dict(d, source=path)

  def to_hf_dict(self, dtype: str = "float32") -> dict[str, Any]:
    """Returns a transformers v5 config dict."""
    d = {
      "architectures": [_ARCHITECTURES[self.model_type]],
      "model_type": self.model_type,
      "vocab_size": self.vocab_size,
      "hidden_size": self.hidden_size,
      "intermediate_size": self.intermediate_size,
      "num_hidden_layers": self.num_layers,
      "num_attention_heads": self.num_heads,
      "num_key_value_heads": self.num_kv_heads,
      "head_dim": self.head_dim,
      "hidden_act": "silu",
      "max_position_embeddings": self.max_position_embeddings,
      "rms_norm_eps": self.rms_norm_eps,
      "rope_parameters": {
        "rope_theta": self.rope_theta,
        "rope_type": "default",
      },
      "tie_word_embeddings": self.tie_word_embeddings,
      "use_sliding_window": False,
      "sliding_window": None,
      "attention_dropout": 0.0,
      "use_cache": True,
      "dtype": dtype,
      "bos_token_id": self.bos_token_id,
      "eos_token_id": self.eos_token_id,
    }
    if self.model_type == "qwen3":
      d["attention_bias"] = False
    return d
