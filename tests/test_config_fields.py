"""Config sections -> frozen dataclasses by field name (OptimConfig,
RewardConfig): today's values, every field reachable, bad keys named."""

import dataclasses

import pytest

from configs import alfworld, coding
from rla_jax.rl.trainer import OptimConfig
from rla_jax.rl.training_data import RewardConfig

PRESETS = [
  (module, preset) for module in (alfworld, coding) for preset in module.PRESETS
]


@pytest.mark.parametrize("module, preset", PRESETS)
@pytest.mark.parametrize("role", ["policy", "reward"])
def test_optim_config_keeps_the_hand_copied_values(module, preset, role):
  """The fields the loop copied by hand before (and the warm-up and
  reference-KL fields added since), plus b1 / b2 / eps / ratio_clamp at the
  values the learner used then (OptimConfig defaults)."""
  section = module.get_config(preset).optim[role]
  cfg = OptimConfig.from_config(section, max_seq_len=77)
  hand_copied = OptimConfig(
    learning_rate=section.learning_rate,
    weight_decay=section.weight_decay,
    grad_clip=section.grad_clip,
    clip_eps=section.clip_eps,
    kl_beta=section.kl_beta,
    micro_batch_size=section.micro_batch_size,
    logprob_chunk=section.logprob_chunk,
    max_seq_len=77,
    target_kl=section.target_kl,
    warmup_updates=section.warmup_updates,
    ref_kl_beta=section.ref_kl_beta,
  )
  assert cfg == hand_copied
  assert (cfg.b1, cfg.b2, cfg.eps, cfg.ratio_clamp) == (0.9, 0.999, 1e-8, 10.0)


@pytest.mark.parametrize("key", ["b1", "b2", "eps", "ratio_clamp"])
def test_every_optim_field_is_reachable_from_the_config(key):
  section = alfworld.get_config("smoke").optim.policy
  section[key] = 0.5
  cfg = OptimConfig.from_config(section, max_seq_len=64)
  assert getattr(cfg, key) == 0.5
  assert dataclasses.replace(cfg, **{key: getattr(OptimConfig(), key)}) != cfg


def test_optim_config_refuses_bad_sections_naming_the_key():
  where = "config.optim.policy"

  def build(edit):
    section = coding.get_config("smoke").optim.policy.to_dict()
    edit(section)
    return OptimConfig.from_config(section, max_seq_len=64, where=where)

  with pytest.raises(
    ValueError, match=r"config\.optim\.policy\.beta1: unknown"
  ):
    build(lambda s: s.update(beta1=0.9))
  with pytest.raises(ValueError, match=r"config\.optim\.policy\.eps: missing"):
    build(lambda s: s.pop("eps"))
  with pytest.raises(ValueError, match=r"policy\.max_seq_len: not a config"):
    build(lambda s: s.update(max_seq_len=64))
  with pytest.raises(
    ValueError, match=r"policy\.micro_batch_size: expected int, got '8'"
  ):
    build(lambda s: s.update(micro_batch_size="8"))
  with pytest.raises(
    ValueError, match=r"policy\.learning_rate: expected float"
  ):
    build(lambda s: s.update(learning_rate=True))
  # the loop's own keys are accepted (and not fields)
  assert build(lambda s: None).micro_batch_size == 16


@pytest.mark.parametrize("preset", alfworld.PRESETS)
def test_reward_config_keeps_the_hand_copied_values(preset):
  section = alfworld.get_config(preset).reward
  cfg = RewardConfig.from_config(section)
  hand_copied = RewardConfig(
    lam=section.lam,
    use_judge_signal=section.use_judge_signal,
    policy_band=tuple(section.policy_band),
    rm_band=tuple(section.rm_band),
    rm_balance_outcomes=section.rm_balance_outcomes,
  )
  assert cfg == hand_copied
  # The reference's unweighted judge training in the paper preset.
  assert cfg.rm_balance_outcomes == (preset != "paper")
  assert (cfg.lone_step, cfg.drop_zero_advantage) == ("raw", True)
  hash(cfg)  # frozen, with tuple bands


def test_reward_config_reaches_lone_step_and_refuses_bad_values():
  section = alfworld.get_config("smoke").reward
  section.lone_step = "zero"
  section.drop_zero_advantage = False
  section.policy_band = [0.0, 1.0]  # a list (from code) becomes a tuple
  cfg = RewardConfig.from_config(section)
  assert (cfg.lone_step, cfg.drop_zero_advantage) == ("zero", False)
  assert cfg.policy_band == (0.0, 1.0)
  section.step_scale = "task"
  assert RewardConfig.from_config(section).step_scale == "task"
  section.step_scale = "group"
  with pytest.raises(ValueError, match=r"config\.reward\.step_scale: 'group'"):
    RewardConfig.from_config(section)
  section.step_scale = "task"
  section.lone_step = "keep"
  with pytest.raises(ValueError, match=r"config\.reward\.lone_step: 'keep'"):
    RewardConfig.from_config(section)
  bad = alfworld.get_config("smoke").reward.to_dict()
  bad["lamda"] = 1.0
  with pytest.raises(ValueError, match=r"config\.reward\.lamda: unknown key"):
    RewardConfig.from_config(bad)
  del bad["lamda"], bad["lone_step"]
  with pytest.raises(ValueError, match=r"config\.reward\.lone_step: missing"):
    RewardConfig.from_config(bad)
