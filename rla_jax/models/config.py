"""Architecture description of Qwen2/Qwen2.5/Qwen3 and Llama decoders.

`QwenConfig` (despite its name, the config of every supported family; the
family is `model_type`) is the single source of truth for shapes. It is
read from and
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

SUPPORTED_MODEL_TYPES = ("qwen2", "qwen3", "llama")

_ARCHITECTURES = {
  "qwen2": "Qwen2ForCausalLM",
  "qwen3": "Qwen3ForCausalLM",
  "llama": "LlamaForCausalLM",
}
SUPPORTED_ROPE_TYPES = ("default", "llama3")


@dataclasses.dataclass(frozen=True)
class Llama3RopeScaling:
  """The "llama3" RoPE frequency rescaling (Llama 3.1+): wavelengths above
  original_max_position_embeddings / low_freq_factor are divided by factor,
  those below ... / high_freq_factor kept, those between interpolated."""

  factor: float
  low_freq_factor: float
  high_freq_factor: float
  original_max_position_embeddings: int

  @classmethod
  def from_hf_dict(cls, d: dict[str, Any], source: str) -> Llama3RopeScaling:
    """Reads the four keys of a HF rope_parameters/rope_scaling dict."""
    try:
      return cls(
        factor=float(d["factor"]),
        low_freq_factor=float(d["low_freq_factor"]),
        high_freq_factor=float(d["high_freq_factor"]),
        original_max_position_embeddings=int(
          d["original_max_position_embeddings"]
        ),
      )
    except KeyError as e:
      raise ConfigError(f"{source}: llama3 rope is missing {e}") from None

  def to_hf_dict(self) -> dict[str, Any]:
    return {"rope_type": "llama3", **dataclasses.asdict(self)}


def _rope_from_hf(
  d: dict[str, Any], source: str
) -> tuple[float, Llama3RopeScaling | None]:
  """(rope_theta, llama3 scaling or None) from a HF config dict: v5 keeps
  both in `rope_parameters`, v4 has top-level `rope_theta` and
  `rope_scaling`."""
  rope = d.get("rope_parameters") or {}
  scaling = d.get("rope_scaling") or {}
  if d.get("rope_theta") is not None:
    rope_theta = d["rope_theta"]  # v4
  elif "rope_theta" in rope:
    rope_theta = rope["rope_theta"]  # v5
  else:
    rope_theta = 10000.0  # transformers' class default
  params = rope if rope.get("rope_type") else scaling
  rope_type = params.get("rope_type") or params.get("type") or "default"
  if rope_type not in SUPPORTED_ROPE_TYPES:
    raise ConfigError(
      f"{source}: rope type {rope_type!r} is not supported "
      f"(supported: {SUPPORTED_ROPE_TYPES})"
    )
  if rope_type == "default":
    return float(rope_theta), None
  return float(rope_theta), Llama3RopeScaling.from_hf_dict(params, source)


def read_config_json(path: str) -> Any:
  """A checkpoint's config.json, parsed; ConfigError naming the path when
  it is missing or malformed."""
  if not os.path.isfile(path):
    raise ConfigError(f"{path}: config file not found")
  try:
    with open(path) as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ConfigError(f"{path}: malformed JSON: {e}") from None


@dataclasses.dataclass(frozen=True)
class QwenConfig:
  """Shapes and options of a Qwen2/Qwen3/Llama decoder.

  Dimension letters used across the models package:
    B batch, T new tokens, S cache slots, D hidden, N query heads,
    K key/value heads, G = N // K query heads per kv head, H head_dim,
    F mlp intermediate, V vocab, L layers.
  """

  model_type: str  # "qwen2" (q/k/v bias), "qwen3" (q/k RMSNorm), "llama"
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
  # q/k/v/o projection biases (llama, qwen3; qwen2 always has q/k/v ones).
  attention_bias: bool = False
  mlp_bias: bool = False  # gate/up/down biases (llama)
  rope_scaling: Llama3RopeScaling | None = None  # None: plain RoPE
  # Qwen3-VL's text model: (temporal, height, width) rotary pairs of the
  # interleaved M-RoPE (`ops.mrope_pair_axis`); positions may then be
  # [B, T, 3]. None: positions are [B, T] only.
  mrope_section: tuple[int, int, int] | None = None

  def __post_init__(self):
    if self.model_type not in SUPPORTED_MODEL_TYPES:
      raise ConfigError(
        f"unsupported model_type {self.model_type!r}; supported: "
        f"{SUPPORTED_MODEL_TYPES}"
      )
    if self.model_type == "qwen2" and self.attention_bias:
      raise ConfigError("qwen2 has no attention_bias option (q/k/v only)")
    if self.mlp_bias and self.model_type != "llama":
      raise ConfigError(f"mlp_bias is a llama option, not {self.model_type}")
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
    if self.mrope_section is not None and (
      len(self.mrope_section) != 3
      or sum(self.mrope_section) != self.head_dim // 2
    ):
      raise ConfigError(
        f"mrope_section {self.mrope_section} must be 3 numbers summing to "
        f"head_dim / 2 = {self.head_dim // 2}"
      )
    if self.num_heads % self.num_kv_heads:
      raise ConfigError(
        f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
        f"({self.num_kv_heads})"
      )

  @property
  def architecture(self) -> str:
    """The transformers class name, e.g. "LlamaForCausalLM"."""
    return _ARCHITECTURES[self.model_type]

  @property
  def qkv_bias(self) -> bool:
    return self.model_type == "qwen2" or self.attention_bias

  @property
  def o_bias(self) -> bool:
    return self.attention_bias

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
    rope_theta, rope_scaling = _rope_from_hf(d, source)
    if d.get("hidden_act", "silu") != "silu":
      raise ConfigError(f"{source}: hidden_act {d['hidden_act']!r} != 'silu'")
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
        attention_bias=model_type != "qwen2"
        and bool(d.get("attention_bias", False)),
        mlp_bias=model_type == "llama" and bool(d.get("mlp_bias", False)),
        rope_scaling=rope_scaling,
      )
    except (TypeError, ValueError) as e:
      if isinstance(e, ConfigError):
        raise ConfigError(f"{source}: {e}") from None
      raise ConfigError(f"{source}: malformed value: {e}") from None

  @classmethod
  def from_json_file(cls, path: str) -> QwenConfig:
    return cls.from_hf_dict(read_config_json(path), source=path)

  def to_hf_dict(self, dtype: str = "float32") -> dict[str, Any]:
    """Returns a transformers v5 config dict."""
    d = {
      "architectures": [self.architecture],
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
        **(
          self.rope_scaling.to_hf_dict()
          if self.rope_scaling
          else {"rope_type": "default"}
        ),
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
    if self.model_type != "qwen2":
      d["attention_bias"] = self.attention_bias
    if self.model_type == "llama":
      d.update(mlp_bias=self.mlp_bias, pretraining_tp=1)
      for key in ("use_sliding_window", "sliding_window"):
        d.pop(key)
    return d
