"""A small byte-level BPE tokenizer with Qwen's chat special tokens.

Trained with the Hugging Face `tokenizers` library on the warm-start corpus
(rendered prompts, responses and game transcripts) and saved as an ordinary
Hugging Face tokenizer directory: `transformers.AutoTokenizer` loads it
offline and `apply_chat_template` renders ChatML
(``<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n``).

Byte-level pre-tokenization + byte-level decoding make decode(encode(x)) == x
for every string (no normalizer, no prefix space, no clean-up of spaces).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)  # ids 0, 1, 2

CHATML_TEMPLATE = (
  "{% for message in messages %}"
  "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
  "'<|im_end|>' + '\\n' }}"
  "{% endfor %}"
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int, out_dir: str):
  """Trains a byte-level BPE on `texts`, saves it to `out_dir`, returns it.

  The vocabulary holds the 3 special tokens (ids 0..2), the 256 byte
  symbols and vocab_size - 259 learned merges (fewer if the corpus runs out
  of pairs). pad = <|endoftext|>, eos = <|im_end|>. Deterministic for a
  given corpus order.
  """
  from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
  from transformers import PreTrainedTokenizerFast

  if vocab_size < 300:
    raise ValueError(
      f"vocab_size must be >= 300 (3 specials + 256 bytes + "
      f"merges), got {vocab_size}"
    )
  core = Tokenizer(models.BPE())
  core.pre_tokenizer = pre_tokenizers.ByteLevel(
    add_prefix_space=False, use_regex=True
  )
  core.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(
    vocab_size=vocab_size,
    min_frequency=2,
    show_progress=False,
    special_tokens=list(SPECIAL_TOKENS),
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
  )
  core.train_from_iterator(texts, trainer=trainer)
  for i, tok in enumerate(SPECIAL_TOKENS):
    if core.token_to_id(tok) != i:
      raise RuntimeError(
        f"special token {tok} got id {core.token_to_id(tok)}, expected {i}"
      )
  tok = PreTrainedTokenizerFast(
    tokenizer_object=core,
    bos_token=None,
    eos_token=IM_END,
    pad_token=ENDOFTEXT,
    unk_token=None,
    additional_special_tokens=[IM_START],
    clean_up_tokenization_spaces=False,
    model_max_length=32768,
  )
  tok.chat_template = CHATML_TEMPLATE
  os.makedirs(out_dir, exist_ok=True)
  tok.save_pretrained(out_dir)
  return tok
