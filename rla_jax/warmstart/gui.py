"""Embedded default models of the GUI loop (no downloads).

A byte-level BPE tokenizer (Qwen's chat tokens plus the vision tokens) is
trained on the GUI prompts and computer-use replies; the policy and the
judge are tiny random-init Qwen3-VL models saved as ordinary Hugging Face
Qwen3-VL directories with their preprocessor config. This exercises the
whole GUI loop (real browser, screenshots through the vision tower,
rewards, adaptation, checkpoints) on a CPU. A short format warm start
(`format_warm_start`, behaviour cloning on synthetic screenshots) teaches
the policy the computer-use reply format with random click points and the
judge the boxed +1 / -1 verdict with random labels: well-formed but
uninformed, so the loop has valid actions, varied outcomes and parseable
votes to work with. It claims no skill. Cached by a hash of the settings,
like the coding loop's embedded models.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from flax import nnx

from rla_jax.envs.gui.actions import tool_call_reply
from rla_jax.models import QwenConfig
from rla_jax.models.qwen3_vl import Qwen3VL, Qwen3VLConfig, VisionConfig
from rla_jax.models.qwen3_vl.hf_io import save_qwen3_vl
from rla_jax.models.qwen3_vl.inputs import image_processor
from rla_jax.rl import agent_text, gui_prompts
from rla_jax.rl.gui_rollout import ScreenshotEncoder
from rla_jax.rl.samples import Sample
from rla_jax.rl.trainer import Learner, OptimConfig
from rla_jax.warmstart.bpe_tokenizer import IM_START, train_bpe_tokenizer
from rla_jax.warmstart.coding import embedded_cache

_INSTRUCTIONS = (
  'Click the button labelled "ONE".',
  "Click on the link that says more.",
  'Enter "hello" into the text field and press Submit.',
  "Focus into the text area.",
  "Select the checkboxes for Alpha and Beta, then press Submit.",
  "Switch to the second tab and click the highlighted link.",
  "Close the dialog box by clicking OK.",
)
_ARGUMENTS = (
  {"action": "left_click", "coordinate": [500, 420]},
  {"action": "type", "text": "hello"},
  {"action": "key", "keys": ["enter"]},
  {"action": "scroll", "pixels": -200, "coordinate": [500, 500]},
  {"action": "terminate", "status": "success"},
)
# Screenshots of the default: MiniWoB++ at scale 1 (210 x 160) resize to
# 224 x 160, a 14 x 10 patch grid (35 merged tokens).
PREPROCESSOR = {"size": {"shortest_edge": 3136, "longest_edge": 1003520}}


def _corpus() -> list[str]:
  texts = []
  for instruction in _INSTRUCTIONS:
    for history in ([], ["left_click (80, 105)"]):
      texts.append(gui_prompts.policy_prompt(instruction, history, 1))
      texts.append(
        gui_prompts.judge_prompt(
          instruction, history, bool(history), "left_click (80, 105)", "..."
        )
      )
  for arguments in _ARGUMENTS:
    texts.append(tool_call_reply("Click the button.", arguments))
  texts += [f"The step makes progress. \\boxed{{{s}}}" for s in ("1", "-1")]
  return texts * 10


def _config(e, tok) -> Qwen3VLConfig:
  ids = {t: tok.convert_tokens_to_ids(t) for t in gui_prompts.VISION_TOKENS}
  text = QwenConfig(
    "qwen3",
    vocab_size=len(tok),
    hidden_size=e.hidden_size,
    intermediate_size=e.intermediate_size,
    num_layers=e.num_layers,
    num_heads=e.num_heads,
    num_kv_heads=e.num_kv_heads,
    head_dim=e.head_dim,
    tie_word_embeddings=True,
    eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
    mrope_section=tuple(e.mrope_section),
  )
  vision = VisionConfig(
    depth=e.vision_depth,
    hidden_size=e.vision_hidden_size,
    intermediate_size=e.vision_intermediate_size,
    num_heads=e.vision_num_heads,
    out_hidden_size=e.hidden_size,
    patch_size=16,
    num_position_embeddings=e.vision_position_grid**2,
    deepstack_visual_indexes=tuple(e.deepstack_visual_indexes),
  )
  return Qwen3VLConfig(
    text=text,
    vision=vision,
    image_token_id=ids[gui_prompts.IMAGE_PAD],
    video_token_id=ids[gui_prompts.IMAGE_PAD],  # no videos here
    vision_start_token_id=ids[gui_prompts.VISION_START],
    vision_end_token_id=ids[gui_prompts.VISION_END],
  )


def _screenshot(rng) -> np.ndarray:
  """A synthetic 210 x 160 page: a light background with a few coloured
  boxes (the format warm start needs images, not real pages)."""
  page = np.full((210, 160, 3), 235, np.uint8)
  for _ in range(int(rng.integers(1, 4))):
    y, x = int(rng.integers(0, 180)), int(rng.integers(0, 130))
    page[y : y + 24, x : x + 30] = rng.integers(0, 200, 3)
  return page


def _reply_ids(tok, text: str) -> list[int]:
  end = tok.convert_tokens_to_ids("<|im_end|>")
  return tok.encode(text, add_special_tokens=False) + [end]


def _policy_example(rng, tok, encoder):
  """(prompt ids, images, response ids): a task prompt with a synthetic
  screenshot and a well-formed click at a random point."""
  image = encoder.image(_screenshot(rng))
  text = gui_prompts.policy_prompt(
    _INSTRUCTIONS[int(rng.integers(len(_INSTRUCTIONS)))], [], 1
  )
  point = [int(v) for v in rng.integers(0, 1000, 2)]
  reply = tool_call_reply(
    "Click the target.", {"action": "left_click", "coordinate": point}
  )
  return encoder.prompt_ids(tok, text, [image]), [image], _reply_ids(tok, reply)


def _judge_example(rng, tok, encoder):
  """A judge prompt (current and next synthetic screenshots) answered with
  a random +1 / -1 verdict in the judge's format."""
  images = [encoder.image(_screenshot(rng)) for _ in range(2)]
  text = gui_prompts.judge_prompt(
    _INSTRUCTIONS[int(rng.integers(len(_INSTRUCTIONS)))],
    [],
    False,
    "",
    tool_call_reply("Click.", {"action": "left_click", "coordinate": [1, 2]}),
  )
  score = 1 if rng.random() < 0.5 else -1
  reply = agent_text.judge_response_text(score)
  return encoder.prompt_ids(tok, text, images), images, _reply_ids(tok, reply)


def format_warm_start(model, examples, steps: int, rng, batch: int = 8):
  """Behaviour cloning of the reply format: `steps` updates of the
  PPO-clip learner on random batches of examples with advantage 1 and
  behaviour log-probs recomputed at the current parameters (ratio 1, so
  the loss gradient is the supervised -grad log p of the replies).
  Returns (the trained model, mean response log-prob per step)."""
  learner = Learner(
    model,
    OptimConfig(
      learning_rate=3e-3, kl_beta=0.0, micro_batch_size=batch, max_seq_len=512
    ),
  )
  curve = []
  for _ in range(steps):
    chosen = rng.choice(len(examples), batch, replace=False)
    samples = [
      Sample(
        examples[j][0],
        examples[j][2],
        np.zeros(len(examples[j][2]), np.float32),  # replaced below
        1.0,
        examples[j][1],
      )
      for j in chosen
    ]
    logprobs = learner.logprobs(samples)
    samples = [
      dataclasses.replace(s, old_logprobs=lp)
      for s, lp in zip(samples, logprobs, strict=True)
    ]
    curve.append(float(np.mean([lp.mean() for lp in logprobs])))
    learner.update(samples)
  return learner.model(), curve


def embedded_gui_models(config, log=print) -> dict:
  """Builds (or reuses) tokenizer/policy/reward dirs for config.embedded."""
  cache = embedded_cache(config, "gui")

  def build(dirs):
    log(f"building embedded GUI models in {cache.root}")
    _build_gui_models(config, dirs, log)

  return cache.built(build)


def _build_gui_models(config, dirs: dict, log) -> None:
  e = config.embedded
  tok = train_bpe_tokenizer(_corpus(), e.vocab_size, dirs["tokenizer_dir"])
  tok.add_special_tokens(
    {"additional_special_tokens": [IM_START, *gui_prompts.VISION_TOKENS]}
  )
  tok.save_pretrained(dirs["tokenizer_dir"])
  agent_text.end_of_turn_ids(tok)  # fails early if the template is wrong
  cfg = _config(e, tok)
  encoder = ScreenshotEncoder(image_processor(cfg, PREPROCESSOR), cfg)
  for i, role in enumerate(("policy", "reward")):
    model = Qwen3VL(cfg, rngs=nnx.Rngs(config.seed * 2 + i))
    rng = np.random.default_rng([config.seed, i])
    make = _policy_example if role == "policy" else _judge_example
    examples = [make(rng, tok, encoder) for _ in range(e.format_examples)]
    model, losses = format_warm_start(model, examples, e.format_steps, rng)
    log(
      f"  {role}: format warm start, {e.format_steps} steps, mean "
      f"response log-prob {losses[0]:.2f} -> {losses[-1]:.2f}"
    )
    save_qwen3_vl(
      model, dirs[f"{role}_dir"], preprocessor=PREPROCESSOR, tokenizer=tok
    )
