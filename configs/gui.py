"""RLAnything in the GUI setting: `--config=gui[:PRESET]`.

Presets:
  default  the embedded CPU run: tiny random-init Qwen3-VL policy and
           screenshot judge (no downloads), MiniWoB++ pages in headless
           Chromium (apt: chromium chromium-driver), the click and text
           families at their two easiest levels. Mechanics: a random-init
           model is not expected to learn at this size.
  smoke    a minute-long version of default for tests.
  paper    the paper's setting: Qwen3-VL-8B policy and judge from local HF
           directories (config.model.*_dir), 12 tasks x 8 rollouts, 30
           steps, lr 1e-6, on OSWorld desktops (desktop-env with a VM or
           Docker provider; env.osworld.examples_dir: OSWorld's example
           JSONs; docs/GUI.md).
"""

import ml_collections

from configs import common
from rla_jax.errors import ConfigError

PRESETS = ("default", "smoke", "paper")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  preset = arg or "default"
  if preset not in PRESETS:
    raise ConfigError(
      f"configs/gui.py: unknown preset {preset!r}; choose one of {PRESETS}"
    )
  c = common.base("gui")
  c.preset = preset
  c.total_steps = 6
  c.embedded = ml_collections.ConfigDict(
    {
      "cache_dir": "",
      "vocab_size": 640,
      "hidden_size": 64,
      "intermediate_size": 128,
      "num_layers": 2,
      "num_heads": 4,
      "num_kv_heads": 2,
      "head_dim": 16,
      "mrope_section": (2, 3, 3),  # sums to head_dim / 2
      "vision_depth": 2,
      "vision_hidden_size": 32,
      "vision_intermediate_size": 64,
      "vision_num_heads": 2,
      "vision_position_grid": 8,  # 8 x 8 learned positions, interpolated
      "deepstack_visual_indexes": (0,),
      # Format warm start (rla_jax/warmstart/gui.py): behaviour-cloning
      # updates of 8 synthetic examples each, drawn from format_examples.
      "format_steps": 80,
      "format_examples": 64,
    }
  )
  c.env = ml_collections.ConfigDict(
    {
      "backend": "miniwob",
      "families": ("click", "text"),
      "levels": (0, 1),
      "num_slots": 4,  # training tasks (the adaptive pool's slots)
      "num_tasks": 4,  # drawn per RL step
      "rollouts_per_task": 4,
      "max_steps": 4,
      # Browsers run in parallel; episodes play in waves of this many.
      "num_browsers": 8,
      # MiniWoB++'s 160 x 210 page at 1 device pixel per CSS pixel.
      "screenshot_scale": 1,
      # Screenshots in the policy prompt (the current one and earlier).
      "history_images": 1,
      # env.backend="osworld" (rla_jax/envs/gui/osworld.py, docs/GUI.md).
      "osworld": ml_collections.ConfigDict(
        {
          # OSWorld example JSONs (evaluation_examples/examples).
          "examples_dir": "",
          # A recorded trajectory directory served instead of VMs (tests).
          "recorded_dir": "",
          # DesktopEnv(**desktop): provider, OS, action space.
          "desktop": ml_collections.ConfigDict(
            {
              "provider_name": "docker",
              "os_type": "Ubuntu",
              "action_space": "pyautogui",
              "headless": True,
            }
          ),
          "screen_width": 1920,
          "screen_height": 1080,
          "pause_seconds": 2.0,
          "reset_wait_seconds": 60.0,
        }
      ),
    }
  )
  c.rollout = ml_collections.ConfigDict(
    {
      "temperature": 1.0,
      "top_p": 1.0,
      "greedy": False,
      # The policy prompt is ~180 text tokens + 35 per screenshot; the
      # judge's ~230 + 3 x 35.
      "max_prompt_len": 512,
      # A click reply is ~56 tokens of this tokenizer.
      "max_new_tokens": 72,
      "prefill_rows": 0,
      "prefill_tokens": 0,
    }
  )
  c.reward = ml_collections.ConfigDict(
    {
      "lam": 1.0,
      "use_judge_signal": True,
      "policy_band": (0.0, 1.0),
      "rm_band": (0.0, 1.0),
      "lone_step": "raw",
      "step_scale": "step_index",
      "drop_zero_advantage": True,
      "advantage": "step_index",
      "gigpo_gamma": 0.95,
      "gigpo_omega": 1.0,
      "rm_balance_outcomes": False,  # as the reference
      "m": 2,
      "train_rm": True,
      "judge_sampling": common.sampling(1.0),
      "max_new_tokens": 24,
      "judge_batch": 16,
      "step_signal": "judge",
    }
  )
  c.adaptation = ml_collections.ConfigDict(
    {"enabled": True, "env_model": "rule", "low": 0.2, "high": 0.8}
  )
  c.optim = ml_collections.ConfigDict(
    {
      "policy": common.optim(1e-4, updates_per_step=1, micro_batch_size=16),
      "reward": common.optim(1e-4, updates_per_step=1, micro_batch_size=16),
    }
  )
  c.eval = ml_collections.ConfigDict(
    {
      "every": 0,
      "at_start": True,
      "num_tasks": 8,
      "seed": 4321,
      "temperature": 1.0,
      "top_p": 1.0,
      "greedy": False,
    }
  )
  if preset == "smoke":
    c.total_steps = 2
    c.env.update(
      families=("click",),
      levels=(0,),
      num_slots=4,  # 2 drawn per step; slots with a candidate wait
      num_tasks=2,
      rollouts_per_task=2,
      max_steps=2,
      num_browsers=4,
    )
    c.rollout.update(max_prompt_len=384)  # 2 steps: prompts stay < 330
    c.reward.update(judge_batch=8)
    c.eval.update(num_tasks=2)
  elif preset == "paper":
    c.total_steps = 240  # the paper's GUI steps
    c.model.update(dtype="bfloat16", param_dtype="float32", remat="full")
    c.env.update(
      backend="osworld",
      num_slots=12,
      num_tasks=12,
      rollouts_per_task=8,
      max_steps=30,
      num_browsers=16,
      screenshot_scale=1,
      history_images=1,
    )
    c.rollout.update(
      temperature=1.0, top_p=1.0, max_prompt_len=8192, max_new_tokens=1024
    )
    c.reward.update(
      m=3, max_new_tokens=1024, judge_batch=64, policy_band=(0.125, 0.875)
    )
    c.reward.rm_band = (0.2, 0.8)
    c.optim.policy.update(learning_rate=1e-6, micro_batch_size=1)
    c.optim.reward.update(learning_rate=1e-6, micro_batch_size=1)
    c.eval.update(every=20, num_tasks=64)
  return c
