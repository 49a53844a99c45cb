"""Warm start of the AlfWorld closed loop without downloadable weights.

Public API::

    default_warmstart_config() -> dict
        # tuned defaults (documented in config.py)
    build_warm_start(cfg, out_dir, *, log=print)
        -> dict(tokenizer_dir, policy_dir, reward_dir, report)
    load_warm_start(result) -> (tokenizer, policy Qwen, reward Qwen)

Modules: config (defaults, hash), settings (a run's settings from its
config), directory (loading a built warm-start directory), bpe_tokenizer
(byte-level BPE + ChatML), demos (noisy-expert rollouts, policy/judge
examples), drills (token samples, candidate-line copy drills), sft_loss
(the SFT loss and its batches), sft (the resumable supervised trainer),
evaluate (policy success, judge process accuracy), stages (what both
builders share: the stage store, an SFT stage, the stage clock, the marker
write), drill_stage (the ALFWorld build's drill base), build (the ALFWorld
pipeline and its cache); the coding warm start: coding_settings,
coding_data, coding_build.

The builder is imported on first use of `build_warm_start` /
`load_warm_start`, so loading a warm start (the RL loop) never imports it.
"""

from __future__ import annotations

from rla_jax.warmstart.config import default_warmstart_config

__all__ = ["build_warm_start", "default_warmstart_config", "load_warm_start"]


def __getattr__(name: str):
  if name in ("build_warm_start", "load_warm_start"):
    from rla_jax.warmstart import build

    return getattr(build, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
