"""What a warm-start build measures: the probes that stop its SFT stages
(policy success on the selection games, the judge's balanced accuracy on
the policy's own steps), the policy's held-out response loss before and
after SFT, and the final metrics of its provenance report (policy success
on held-out games, per-verb choice accuracy, judge accuracies)."""

from __future__ import annotations

import json

import numpy as np

from rla_jax.warmstart import demos, drills, evaluate, sft, sft_loss


def policy_probe(cfg, tok, games):
  """Success of the policy on the selection games; done at target_success."""
  ps, ev, H = cfg["policy_sft"], cfg["eval"], cfg["history_steps"]

  def measure(model):
    play = play_games(model, tok, games, ev, H, cfg["seed"] + 11)
    return {"success_rate": play["success_rate"]}

  return sft.Probe(
    int(ps["eval_every"]),
    measure,
    lambda m: m["success_rate"] >= float(ps["target_success"]),
  )


def judge_probe(cfg, tok, records):
  """Balanced accuracy of the judge on the policy's own steps; done once it
  lands in target_balanced with a +1 vote rate near the true +1 share."""
  rs = cfg["rm_sft"]
  lo, hi = (float(x) for x in rs["target_balanced"])

  def measure(model):
    return evaluate.judge_accuracy(
      model,
      tok,
      records,
      seed=cfg["seed"],
      batch_size=cfg["eval"]["batch_size"],
    )

  def done(m):
    close = abs(m["vote_positive_rate"] - m["label_positive_rate"]) <= 0.15
    return lo <= m["balanced_accuracy"] <= hi and close

  return sft.Probe(int(rs["eval_every"]), measure, done)


def play_games(model, tok, games, ev, history_steps, seed):
  """`evaluate.play_policy` with the build's eval settings `ev`."""
  return evaluate.play_policy(
    model,
    tok,
    games,
    history_steps=history_steps,
    max_steps=int(ev["max_steps"]),
    temperature=float(ev["temperature"]),
    greedy=bool(ev["greedy"]),
    seed=seed,
    batch_size=int(ev["batch_size"]),
  )


def heldout_losses(base_model, policy, tok, data, cfg, log, before=None):
  """Response loss on held-out demonstrated states before / after SFT;
  `before` given: the base's loss, measured elsewhere (base_model unused)."""
  held = [
    drills.boxed_answer_sample(tok, e.prompt_text, e.response_text, 1.0)
    for e in demos.policy_examples(
      data.heldout_eps, cfg["history_steps"], cfg["policy_answer"]
    )
  ][:128]
  lm, pad = int(cfg["policy_sft"]["length_multiple"]), tok.pad_token_id
  if before is None:
    before = sft_loss.response_loss(
      base_model(), held, pad_id=pad, length_multiple=lm
    )
  after = sft_loss.response_loss(policy, held, pad_id=pad, length_multiple=lm)
  log(f"[warmstart] policy held-out response loss {before:.4f} -> {after:.4f}")
  return {
    "heldout_response_loss_before": before,
    "heldout_response_loss_after": after,
  }


def sample_records(records, num, seed):
  """`num` of the records, drawn without replacement with a fixed stream of
  `seed`, in their original order."""
  pick = np.random.default_rng([seed, 0xE7A]).permutation(len(records))
  return [records[i] for i in sorted(pick[:num])]


def final_metrics(policy, reward, tok, data, cfg, own_records, log) -> dict:
  """The report's policy and judge measurements (held-out games/states)."""
  ev, H, seed = cfg["eval"], cfg["history_steps"], int(cfg["seed"])
  play = play_games(policy, tok, data.eval_games, ev, H, seed)
  log(
    f"[warmstart] policy success {play['success_rate']:.3f} on "
    f"{play['num_games']} held-out games (mean steps {play['mean_steps']:.1f})"
  )
  choice = evaluate.choice_accuracy_by_verb(
    policy, tok, data.heldout_eps, history_steps=H, seed=seed
  )
  log(f"[warmstart] greedy choice accuracy by verb: {json.dumps(choice)}")
  batch = int(ev["batch_size"])
  rm_own = evaluate.judge_accuracy(
    reward, tok, own_records, seed=seed, batch_size=batch
  )
  rm_held = evaluate.judge_accuracy(
    reward,
    tok,
    [evaluate.StepRecord(*e.parts, e.label) for e in data.heldout_judge],
    seed=seed,
    batch_size=batch,
  )
  log(
    "[warmstart] judge on the policy's steps: accuracy "
    f"{rm_own['accuracy']:.3f}, balanced {rm_own['balanced_accuracy']:.3f}, "
    f"+1 votes {rm_own['vote_positive_rate']:.3f} "
    f"(+1 labels {rm_own['label_positive_rate']:.3f})"
  )
  return {
    "policy": {
      "success_rate": play["success_rate"],
      "mean_steps": play["mean_steps"],
      "num_games": play["num_games"],
      "eval": dict(ev),
      "choice_accuracy_by_verb": choice,
      "expert_demo_success": float(np.mean([e.won for e in data.demo_eps])),
    },
    "reward_model": {
      "on_policy_steps": rm_own,
      "on_heldout_noisy_steps": rm_held,
    },
  }
