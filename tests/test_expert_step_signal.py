"""reward.step_signal="expert" / "expert_columns" (the ablation's ExpertS
and ExpertC rows): the expert's step labels stand for the judge's votes, on
every step or on the judge's step columns only, and the step's metrics say
so."""

import pytest


@pytest.mark.parametrize("signal", ["expert", "expert_columns"])
def test_an_rl_step_on_expert_labels_logs_their_share(
  smoke_warm_start, tmp_path, signal
):
  from configs import alfworld
  from rla_jax.rl.loops import make_loop

  c = alfworld.get_config("smoke")
  c.warmstart.dir = smoke_warm_start.dir
  c.reward.update(use_judge_signal=True, step_signal=signal, train_rm=False)
  c.reward.judged_steps_per_task = 1  # one step column per task group
  c.adaptation.enabled = False
  loop = make_loop(c, str(tmp_path / "run"), log=lambda msg: None)
  metrics = loop.run_step(0)
  share = metrics["train/expert_label_positive_rate"]
  assert 0.0 <= share <= 1.0
  assert "train/judge_positive_rate" not in metrics  # no judge voted
  assert metrics["time/expert_labels"] >= 0.0
  episodes = c.env.num_tasks * c.env.rollouts_per_task
  labelled = metrics["train/expert_labelled_steps"]
  if signal == "expert":  # every step of every episode (each has >= 1)
    assert labelled >= episodes
  else:  # one column per group: at most one step of each episode
    assert 1 <= labelled <= episodes
