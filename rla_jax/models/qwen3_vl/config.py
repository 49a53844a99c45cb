"""Architecture description of Qwen3-VL (`Qwen3VLForConditionalGeneration`).

`Qwen3VLConfig` holds the text model as a `QwenConfig` (a Qwen3 decoder
with interleaved M-RoPE: `mrope_section` set), the vision tower as a
`VisionConfig`, and the special token ids. Read from and written to the
Hugging Face `config.json` of a Qwen3-VL directory (transformers v5 keys).

Vision dimension letters: P patches of an image, Dv vision hidden, Nv
vision heads, Hv = Dv / Nv, Fv vision MLP, Cp = in_channels x
temporal_patch_size x patch_size^2 values per patch, m = spatial_merge_size.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rla_jax.errors import ConfigError
from rla_jax.models.config import QwenConfig, read_config_json

ARCHITECTURE = "Qwen3VLForConditionalGeneration"


@dataclasses.dataclass(frozen=True)
class VisionConfig:
  """Shapes and options of the Qwen3-VL vision tower."""

  depth: int
  hidden_size: int
  intermediate_size: int
  num_heads: int
  out_hidden_size: int  # = the text model's hidden size
  patch_size: int = 16
  temporal_patch_size: int = 2
  spatial_merge_size: int = 2
  in_channels: int = 3
  num_position_embeddings: int = 2304  # a square grid of learned positions
  deepstack_visual_indexes: tuple[int, ...] = (8, 16, 24)
  rope_theta: float = 10000.0

  def __post_init__(self):
    for name in ("depth", "hidden_size", "intermediate_size", "num_heads"):
      if int(getattr(self, name)) <= 0:
        raise ConfigError(
          f"vision {name} must be positive, got {getattr(self, name)}"
        )
    if self.hidden_size % self.num_heads or self.head_dim % 4:
      raise ConfigError(
        f"vision hidden_size {self.hidden_size} / num_heads "
        f"{self.num_heads} must be a whole head_dim divisible by 4"
      )
    side = round(self.num_position_embeddings**0.5)
    if side * side != self.num_position_embeddings:
      raise ConfigError(
        f"vision num_position_embeddings {self.num_position_embeddings} "
        "is not a square"
      )
    bad = [i for i in self.deepstack_visual_indexes if not 0 <= i < self.depth]
    if bad:
      raise ConfigError(
        f"vision deepstack_visual_indexes {bad} outside 0..{self.depth - 1}"
      )

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_heads

  @property
  def patch_dim(self) -> int:
    """Cp: values per patch (channels x frames x pixels)."""
    return self.in_channels * self.temporal_patch_size * self.patch_size**2

  @property
  def merge_unit(self) -> int:
    """Patches per merged token (m^2)."""
    return self.spatial_merge_size**2

  @property
  def grid_side(self) -> int:
    """Side of the learned position-embedding grid."""
    return round(self.num_position_embeddings**0.5)

  @classmethod
  def from_hf_dict(cls, d: dict[str, Any], source: str) -> VisionConfig:
    act = d.get("hidden_act", "gelu_pytorch_tanh")
    if act != "gelu_pytorch_tanh":
      raise ConfigError(f"{source}: vision hidden_act {act!r} is not supported")
    rope = d.get("rope_parameters") or {}
    try:
      return cls(
        depth=int(d["depth"]),
        hidden_size=int(d["hidden_size"]),
        intermediate_size=int(d["intermediate_size"]),
        num_heads=int(d["num_heads"]),
        out_hidden_size=int(d["out_hidden_size"]),
        patch_size=int(d.get("patch_size", 16)),
        temporal_patch_size=int(d.get("temporal_patch_size", 2)),
        spatial_merge_size=int(d.get("spatial_merge_size", 2)),
        in_channels=int(d.get("in_channels", 3)),
        num_position_embeddings=int(d.get("num_position_embeddings", 2304)),
        deepstack_visual_indexes=tuple(
          int(i) for i in d.get("deepstack_visual_indexes", (8, 16, 24))
        ),
        rope_theta=float(rope.get("rope_theta", 10000.0)),
      )
    except KeyError as e:
      raise ConfigError(f"{source}: vision_config is missing {e}") from None

  def to_hf_dict(self) -> dict[str, Any]:
    return {
      "model_type": "qwen3_vl_vision",
      "depth": self.depth,
      "hidden_size": self.hidden_size,
      "hidden_act": "gelu_pytorch_tanh",
      "intermediate_size": self.intermediate_size,
      "num_heads": self.num_heads,
      "in_channels": self.in_channels,
      "patch_size": self.patch_size,
      "spatial_merge_size": self.spatial_merge_size,
      "temporal_patch_size": self.temporal_patch_size,
      "out_hidden_size": self.out_hidden_size,
      "num_position_embeddings": self.num_position_embeddings,
      "deepstack_visual_indexes": list(self.deepstack_visual_indexes),
      "rope_parameters": {"rope_type": "axial", "rope_theta": self.rope_theta},
    }


@dataclasses.dataclass(frozen=True)
class Qwen3VLConfig:
  """A Qwen3-VL model: text decoder, vision tower, special tokens."""

  text: QwenConfig
  vision: VisionConfig
  image_token_id: int = 151655
  video_token_id: int = 151656
  vision_start_token_id: int = 151652
  vision_end_token_id: int = 151653

  def __post_init__(self):
    if self.text.mrope_section is None:
      raise ConfigError("Qwen3-VL's text config needs an mrope_section")
    if self.vision.out_hidden_size != self.text.hidden_size:
      raise ConfigError(
        f"vision out_hidden_size {self.vision.out_hidden_size} != text "
        f"hidden_size {self.text.hidden_size}"
      )
    if len(self.vision.deepstack_visual_indexes) > self.text.num_layers:
      raise ConfigError("more DeepStack features than text layers")

  @classmethod
  def from_hf_dict(
    cls, d: dict[str, Any], source: str = "config.json"
  ) -> Qwen3VLConfig:
    if not isinstance(d, dict) or d.get("model_type") != "qwen3_vl":
      raise ConfigError(
        f"{source}: model_type must be 'qwen3_vl', got "
        f"{d.get('model_type') if isinstance(d, dict) else type(d)}"
      )
    for key in ("text_config", "vision_config"):
      if not isinstance(d.get(key), dict):
        raise ConfigError(f"{source}: missing {key!r}")
    t = dict(d["text_config"])
    rope = dict(t.get("rope_parameters") or {})
    section = rope.pop("mrope_section", None)
    if section is None:
      raise ConfigError(f"{source}: text_config has no mrope_section")
    if rope.pop("mrope_interleaved", True) is not True:
      raise ConfigError(f"{source}: only interleaved M-RoPE is supported")
    t.update(
      model_type="qwen3",
      rope_parameters=rope,
      tie_word_embeddings=d.get("tie_word_embeddings", False),
    )
    text = QwenConfig.from_hf_dict(t, source=f"{source} text_config")
    text = text.replace(mrope_section=tuple(int(s) for s in section))
    vision = VisionConfig.from_hf_dict(
      d["vision_config"], f"{source} vision_config"
    )
    return cls(
      text=text,
      vision=vision,
      image_token_id=int(d.get("image_token_id", 151655)),
      video_token_id=int(d.get("video_token_id", 151656)),
      vision_start_token_id=int(d.get("vision_start_token_id", 151652)),
      vision_end_token_id=int(d.get("vision_end_token_id", 151653)),
    )

  @classmethod
  def from_json_file(cls, path: str) -> Qwen3VLConfig:
    return cls.from_hf_dict(read_config_json(path), source=path)

  def to_hf_dict(self, dtype: str = "float32") -> dict[str, Any]:
    text = self.text.to_hf_dict(dtype=dtype)
    for key in ("architectures", "use_sliding_window", "sliding_window"):
      text.pop(key, None)
    tie = text.pop("tie_word_embeddings")
    text["model_type"] = "qwen3_vl_text"
    text["rope_parameters"].update(
      mrope_section=list(self.text.mrope_section), mrope_interleaved=True
    )
    return {
      "architectures": [ARCHITECTURE],
      "model_type": "qwen3_vl",
      "text_config": text,
      "vision_config": self.vision.to_hf_dict(),
      "image_token_id": self.image_token_id,
      "video_token_id": self.video_token_id,
      "vision_start_token_id": self.vision_start_token_id,
      "vision_end_token_id": self.vision_end_token_id,
      "tie_word_embeddings": tie,
      "dtype": dtype,
    }
