"""reward.step_signal="expert" (the ablation's ExpertS row): the expert's
step labels stand for the judge's votes, and the step's metrics say so."""


def test_an_rl_step_on_expert_labels_logs_their_share(
  smoke_warm_start, tmp_path
):
  from configs import alfworld
  from rla_jax.rl.loops import make_loop

  c = alfworld.get_config("smoke")
  c.warmstart.dir = smoke_warm_start.dir
  c.reward.update(use_judge_signal=True, step_signal="expert", train_rm=False)
  c.adaptation.enabled = False
  loop = make_loop(c, str(tmp_path / "run"), log=lambda msg: None)
  metrics = loop.run_step(0)
  share = metrics["train/expert_label_positive_rate"]
  assert 0.0 <= share <= 1.0
  assert "train/judge_positive_rate" not in metrics  # no judge voted
  assert metrics["time/expert_labels"] >= 0.0
