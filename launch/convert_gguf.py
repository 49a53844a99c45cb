"""Converts a llama.cpp GGUF model file into a Hugging Face model directory.

  python launch/convert_gguf.py IN.gguf OUT_DIR

OUT_DIR gets config.json, model.safetensors (float32: every quantized
tensor is dequantized), generation_config.json and the tokenizer files
(tokenizer.json, tokenizer_config.json, the chat template). It loads with
`rla_jax.models.load_model(OUT_DIR)` and with transformers'
`AutoModelForCausalLM` / `AutoTokenizer`. Supported: Llama-architecture
files with a byte-level BPE ("gpt2") vocabulary, e.g. SmolLM2 (see
`rla_jax.models.gguf_io`). A missing, unreadable or unsupported file or
tensor is one "error: ..." line naming the file, exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from launch.cli import fail, log
from rla_jax.errors import ConfigError


def parse_args(argv: list[str]) -> argparse.Namespace:
  """The command line: the GGUF file and the output directory."""
  parser = argparse.ArgumentParser(
    description="Convert a GGUF model file to a Hugging Face directory."
  )
  parser.add_argument("gguf_file", help="input .gguf file")
  parser.add_argument("out_dir", help="output directory (created)")
  return parser.parse_args(argv)


def main(argv: list[str]) -> None:
  """Converts args.gguf_file into args.out_dir and logs the config."""
  args = parse_args(argv)
  from rla_jax.models.gguf_io import convert_gguf

  try:
    cfg = convert_gguf(args.gguf_file, args.out_dir)
  except ConfigError as e:
    fail(e)
  log(
    f"wrote {args.out_dir}: {cfg.architecture}, {cfg.num_layers} layers, "
    f"hidden {cfg.hidden_size}, vocab {cfg.vocab_size}"
  )


if __name__ == "__main__":
  main(sys.argv[1:])
