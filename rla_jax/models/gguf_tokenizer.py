"""A GGUF file's tokenizer -> HF tokenizer files (tokenizer.json, ...).

Reads tokenizer.ggml.{model, pre, tokens, token_type, merges, *_token_id}
and tokenizer.chat_template, builds the byte-level BPE with the `tokenizers`
library and saves it through transformers' `PreTrainedTokenizerFast`, so
`AutoTokenizer.from_pretrained(out_dir)` (and `rla_jax.tokenizer`) load it.

Only "gpt2" vocabularies (byte-level BPE: tokens already spelled in the
GPT-2 byte alphabet, merges "a b") are supported, with the pre-tokenizers
llama.cpp names "gpt2" and "smollm" (the latter splits every digit first,
as llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM and SmolLM2's own tokenizer.json
do).
"""

from __future__ import annotations

from rla_jax.models.gguf_io import GGUFError, metadata

CONTROL_TOKEN = 3  # llama.cpp token_type of special tokens (<|im_start|>)
USER_DEFINED_TOKEN = 4  # added tokens that are matched whole, not special
SUPPORTED_PRE = ("default", "gpt2", "smollm")


def _pre_tokenizer(pre: str, path: str):
  """The `tokenizers` pre-tokenizer for llama.cpp's tokenizer.ggml.pre."""
  from tokenizers import pre_tokenizers

  byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
  if pre in ("default", "gpt2"):
    return byte_level
  if pre == "smollm":
    return pre_tokenizers.Sequence(
      [pre_tokenizers.Digits(individual_digits=True), byte_level]
    )
  raise GGUFError(
    f"{path}: tokenizer.ggml.pre {pre!r} is not supported ({SUPPORTED_PRE})"
  )


def bpe_tokenizer(reader, path: str):
  """A `tokenizers.Tokenizer` from the file's gpt2 vocabulary and merges,
  its control and user-defined tokens added whole."""
  from tokenizers import AddedToken, Tokenizer, decoders, models, processors

  kind = metadata(reader, "tokenizer.ggml.model", path=path)
  if kind != "gpt2":
    raise GGUFError(
      f"{path}: tokenizer.ggml.model {kind!r} is not supported ('gpt2')"
    )
  tokens = list(metadata(reader, "tokenizer.ggml.tokens", path=path))
  merges = metadata(reader, "tokenizer.ggml.merges", path=path)
  types = list(metadata(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
  vocab = {t: i for i, t in enumerate(tokens)}
  tok = Tokenizer(
    models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges])
  )
  pre = metadata(reader, "tokenizer.ggml.pre", "default", path=path)
  tok.pre_tokenizer = _pre_tokenizer(pre, path)
  tok.decoder = decoders.ByteLevel()
  tok.post_processor = processors.ByteLevel(trim_offsets=False)
  tok.add_special_tokens(
    [
      AddedToken(t, special=True, normalized=False)
      for t, kind in zip(tokens, types, strict=True)
      if kind == CONTROL_TOKEN
    ]
  )
  tok.add_tokens(
    [
      AddedToken(t, special=False, normalized=False)
      for t, kind in zip(tokens, types, strict=True)
      if kind == USER_DEFINED_TOKEN
    ]
  )
  return tok, tokens


def save_gguf_tokenizer(reader, out_dir: str, path: str):
  """Writes tokenizer.json / tokenizer_config.json (special tokens, chat
  template) for the file's tokenizer into out_dir; returns the
  transformers tokenizer."""
  from transformers import PreTrainedTokenizerFast

  tok, tokens = bpe_tokenizer(reader, path)
  special = {}
  for name, key in (
    ("bos_token", "bos"),
    ("eos_token", "eos"),
    ("unk_token", "unknown"),
    ("pad_token", "padding"),
  ):
    field = reader.fields.get(f"tokenizer.ggml.{key}_token_id")
    if field is not None:
      special[name] = tokens[int(field.contents())]
  template = reader.fields.get("tokenizer.chat_template")
  hf = PreTrainedTokenizerFast(
    tokenizer_object=tok,
    chat_template=None if template is None else template.contents(),
    **special,
  )
  hf.save_pretrained(out_dir)
  return hf
