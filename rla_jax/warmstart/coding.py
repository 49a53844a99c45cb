"""Embedded default models of the coding loop (no downloads).

A byte-level BPE tokenizer is trained on the offline family's problem
statements, the rendered prompts and a few generic stdin/stdout Python
programs; the coder and the unit-test generator are tiny random-init Qwen3
models saved as ordinary Hugging Face directories. This exercises the whole
coding loop (sandboxed execution, rewards, adaptation, checkpoints) on a CPU;
it does not claim coding skill. Cached by a hash of the settings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable

from filelock import FileLock
from flax import nnx

from rla_jax.envs.coding import (
  generate_offline_tasks,
  render_policy_prompt,
  render_unit_test_prompt,
)
from rla_jax.models import Qwen, QwenConfig, save_qwen
from rla_jax.rl import agent_text
from rla_jax.warmstart.bpe_tokenizer import train_bpe_tokenizer

_PROGRAMS = (
  "```python\nn = int(input())\nprint(sum(int(c) for c in str(n)))\n```",
  "```python\nn, k = map(int, input().split())\na = list(map(int, "
  "input().split()))\nprint(sum(x for x in a if x % k == 0))\n```",
  "```python\ns = input().strip()\nprint(' '.join(w[::-1] for w in "
  "s.split()))\n```",
  "**Test Input:**\n```\n5 2\n1 2 3 4 5\n```\n**Test Output:**\n```\n6\n```",
)


def cache_root(configured: str = "") -> str:
  return (
    configured
    or os.environ.get("RLA_JAX_CACHE")
    or os.path.join(os.path.expanduser("~"), ".cache", "rla_jax")
  )


@dataclasses.dataclass(frozen=True)
class EmbeddedCache:
  """Where one loop's embedded models live: root (under `cache_root`,
  named by a hash of spec, the settings they are built from), the
  tokenizer / policy / reward dirs in it, and the COMPLETE marker a
  finished build writes."""

  root: str
  spec: dict

  @property
  def dirs(self) -> dict[str, str]:
    return {
      f"{name}_dir": os.path.join(self.root, name)
      for name in ("tokenizer", "policy", "reward")
    }

  @property
  def marker(self) -> str:
    return os.path.join(self.root, "COMPLETE")

  @property
  def complete(self) -> bool:
    return os.path.exists(self.marker)

  def mark_complete(self) -> None:
    with open(self.marker, "w") as f:
      json.dump(self.spec, f)

  def built(self, build: Callable[[dict[str, str]], None]) -> dict[str, str]:
    """`dirs`, after `build(dirs)` has filled them unless a finished build
    is already there. Builders are serialised by a file lock beside root:
    a second process building the same models (another run, a test
    worker) waits, then loads the first one's build instead of writing
    into it. A build killed part-way leaves no COMPLETE marker and is
    redone."""
    if not self.complete:
      os.makedirs(self.root, exist_ok=True)
      with FileLock(self.root + ".lock"):
        if not self.complete:
          build(self.dirs)
          self.mark_complete()
    return self.dirs


def embedded_cache(config, kind: str) -> EmbeddedCache:
  """The `EmbeddedCache` of config.embedded (its cache_dir aside) and
  config.seed, for the loop `kind` ("coding", "gui")."""
  e = config.embedded
  spec = {"version": 1, "seed": config.seed, **e.to_dict()}
  spec.pop("cache_dir", None)
  key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
  return EmbeddedCache(
    os.path.join(cache_root(e.cache_dir), kind, key[:12]), spec
  )


def embedded_coding_models(config, log=print) -> dict:
  """Builds (or reuses) tokenizer/policy/reward dirs for config.embedded."""
  cache = embedded_cache(config, "coding")

  def build(dirs):
    log(f"building embedded coding models in {cache.root}")
    _build_coding_models(config, dirs)

  return cache.built(build)


def _build_coding_models(config, dirs: dict) -> None:
  e = config.embedded
  tasks = generate_offline_tasks(64, config.seed)
  texts = []
  for t in tasks:
    texts += [
      render_policy_prompt(t.question),
      render_unit_test_prompt(t.question, t.tests[0]),
    ]
  texts += list(_PROGRAMS) * 20
  tok = train_bpe_tokenizer(texts, e.vocab_size, dirs["tokenizer_dir"])
  agent_text.end_of_turn_ids(tok)  # fails early if the template is wrong
  cfg = QwenConfig(
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
  )
  for i, role in enumerate(("policy", "reward")):
    save_qwen(
      Qwen(cfg, rngs=nnx.Rngs(config.seed * 2 + i)),
      dirs[f"{role}_dir"],
      tokenizer=tok,
    )
