"""build_warm_start: tokenizer, policy and
reward model from scratch, in minutes on a CPU.

Stages (each timed, wall seconds in report["timings_s"]):
  1. data: seeded small-room train games; epsilon-noisy expert rollouts for
     the policy demos (demo_epsilon) and the judge examples (rm_epsilon).
  2. tokenizer: byte-level BPE on rendered prompts/responses/transcripts.
  3. drill: a random-init Qwen3 base learns the candidate-index lookup.
  4. policy_sft: base -> SFT on expert targets at visited states.
  5. rm_sft: the SFT'd policy, the drill base or scratch -> SFT on balanced,
     label-noised judge examples.
  6. eval: policy success on held-out valid_seen games (Sampler); judge process
     accuracy on the policy's own steps and on held-out noisy-expert steps.
  7. save: three Hugging Face directories + a marker with the config hash; a
     later call with the same config returns the cached result untouched.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import numpy as np
from flax import nnx

from rla_jax.envs.alfworld import describe_game_for_proposal, generate_split
from rla_jax.models import Qwen, QwenConfig, load_qwen, save_qwen
from rla_jax.rl import agent_text, prompts
from rla_jax.tokenizer import load_tokenizer
from rla_jax.warmstart import demos, drills, evaluate, sft
from rla_jax.warmstart.bpe_tokenizer import IM_END, train_bpe_tokenizer
from rla_jax.warmstart.config import config_hash, resolve_config

MARKER = "warmstart.json"


def _cached(out_dir: str, digest: str) -> dict | None:
  path = os.path.join(out_dir, MARKER)
  if not os.path.isfile(path):
    return None
  with open(path) as f:
    marker = json.load(f)
  dirs = {
    k: os.path.join(out_dir, k) for k in ("tokenizer", "policy", "reward")
  }
  complete = all(
    os.path.isfile(os.path.join(d, f))
    for d in dirs.values()
    for f in ("tokenizer.json",)
  ) and all(
    os.path.isfile(os.path.join(dirs[k], "model.safetensors"))
    for k in ("policy", "reward")
  )
  if marker.get("config_hash") != digest or not complete:
    return None
  return {
    "tokenizer_dir": dirs["tokenizer"],
    "policy_dir": dirs["policy"],
    "reward_dir": dirs["reward"],
    "report": {**marker["report"], "cache_hit": True},
  }


def _corpus(demo_eps, rm_eps, pol_ex, judge_ex, games) -> list[str]:
  """Tokenizer training texts: every prompt/response rendered for training,
  transcripts, and a few critic / task-proposal prompts (used by the loop)."""
  texts = [e.prompt_text + "\n" + e.response_text for e in pol_ex + judge_ex]
  texts += [demos.transcript_text(ep) for ep in demo_eps + rm_eps]
  for ep in rm_eps[:20]:
    texts.append(
      prompts.failure_summary_prompt(
        ep.game.task_text, ep.observations, ep.actions, [0], 50, 2
      )
    )
  for k, g in enumerate(games[:20]):
    texts.append(
      prompts.task_proposal_prompt(
        describe_game_for_proposal(g),
        [(0, "It looped.")],
        ("harder", "easier")[k % 2],
        0.5,
        1,
        2,
      )
    )
  texts += [agent_text.judge_response_text(s) for s in (1, -1)]
  return texts


def _model_config(cfg: dict, tok) -> QwenConfig:
  m = cfg["model"]
  return QwenConfig(
    model_type="qwen3",
    vocab_size=len(tok),
    hidden_size=m["hidden_size"],
    intermediate_size=m["intermediate_size"],
    num_layers=m["num_layers"],
    num_heads=m["num_heads"],
    num_kv_heads=m["num_kv_heads"],
    head_dim=m["head_dim"],
    rope_theta=float(m["rope_theta"]),
    tie_word_embeddings=bool(m["tie_word_embeddings"]),
    max_position_embeddings=4096,
    eos_token_id=tok.convert_tokens_to_ids(IM_END),
    bos_token_id=None,
  )


def _sft_config(d: dict) -> sft.SFTConfig:
  return sft.SFTConfig(
    steps=int(d["steps"]),
    batch_size=int(d["batch_size"]),
    learning_rate=float(d["learning_rate"]),
    prompt_weight=float(d.get("prompt_weight", 0.0)),
    length_multiple=int(d["length_multiple"]),
  )


def build_warm_start(
  cfg,
  out_dir: str,
  *,
  work_dir: str | None = None,
  provenance: dict | None = None,
  log: Callable[[str], None] = print,
) -> dict:
  """Builds (or reuses) the warm start in out_dir.

  provenance (how the build was made) is stored in the marker under
  "provenance"; work_dir is accepted and unused.

  Returns dict(tokenizer_dir, policy_dir, reward_dir, report): report holds
  the resolved config, per-stage wall times, policy success, judge
  accuracies, SFT response losses before/after and cache_hit.
  """
  cfg = resolve_config(cfg)
  digest = config_hash(cfg)
  hit = _cached(out_dir, digest)
  if hit is not None:
    log(f"[warmstart] cache hit: reusing {out_dir} (config {digest[:12]})")
    return hit
  os.makedirs(out_dir, exist_ok=True)
  marker_path = os.path.join(out_dir, MARKER)
  if os.path.exists(marker_path):
    os.remove(marker_path)  # stale: another config or incomplete
  log(f"[warmstart] building into {out_dir} (config {digest[:12]})")
  seed, H, times = int(cfg["seed"]), cfg["history_steps"], {}
  t_all = t = time.perf_counter()

  def lap(name):
    nonlocal t
    now = time.perf_counter()
    times[name] = round(now - t, 2)
    t = now
    log(f"[warmstart] stage {name}: {times[name]:.1f}s")

  # 1. data ---------------------------------------------------------------
  n_demo, n_rm = int(cfg["num_demo_episodes"]), int(cfg["num_rm_episodes"])
  n_train = max(int(cfg["num_pretrain_games"]), n_demo + n_rm)
  levels = cfg["levels"] or None
  games = generate_split(
    "train", n_train, seed=seed, room_size=cfg["room_size"], levels=levels
  )
  eval_games = generate_split(
    "valid_seen",
    int(cfg["eval"]["num_games"]),
    seed=seed,
    room_size=cfg["room_size"],
    levels=levels,
  )
  rng = np.random.default_rng([seed, 0xDE30])
  demo_expert = cfg["demo_expert"]
  demo_eps = demos.noisy_expert_rollouts(
    games[:n_demo], cfg["demo_epsilon"], rng, cfg["max_demo_steps"], demo_expert
  )
  rm_eps = demos.noisy_expert_rollouts(
    games[n_demo : n_demo + n_rm],
    cfg["rm_epsilon"],
    rng,
    cfg["max_demo_steps"],
    demo_expert,
  )
  extra_eps = demos.noisy_expert_rollouts(
    games[n_demo + n_rm :],
    cfg["demo_epsilon"],
    rng,
    cfg["max_demo_steps"],
    demo_expert,
  )
  heldout_eps = demos.noisy_expert_rollouts(
    eval_games, cfg["rm_epsilon"], rng, cfg["max_demo_steps"], demo_expert
  )
  answer = cfg["policy_answer"]
  pol_ex = demos.policy_examples(demo_eps, H, answer)
  judge_pool = demos.judge_examples(rm_eps, H, answer)
  judge_ex = demos.balance_and_corrupt(
    judge_pool, int(cfg["num_rm_examples"]), float(cfg["rm_label_noise"]), rng
  )
  heldout_pol = demos.policy_examples(heldout_eps, H, answer)
  heldout_judge = demos.balance_and_corrupt(
    demos.judge_examples(heldout_eps, H, answer),
    int(cfg["eval"]["rm_max_steps"]),
    0.0,
    rng,
  )
  lap("data")

  # 2. tokenizer ----------------------------------------------------------
  tok_dir = os.path.join(out_dir, "tokenizer")
  train_bpe_tokenizer(
    _corpus(demo_eps + extra_eps, rm_eps, pol_ex, judge_pool, games),
    int(cfg["vocab_size"]),
    tok_dir,
  )
  tok = load_tokenizer(tok_dir)
  pad = tok.pad_token_id
  lap("tokenizer")

  # 3. copy drills -> base model ---------------------------------------
  model_cfg = _model_config(cfg, tok)
  base = Qwen(model_cfg, rngs=nnx.Rngs(seed))
  d = cfg["drill"]
  if int(d["steps"]) > 0:
    cand_lists = [a for ep in demo_eps + extra_eps for a in ep.admissible if a]
    drng = np.random.default_rng([seed, 0xD81])
    pool = [
      drills.copy_drill(
        tok,
        cand_lists[int(drng.integers(len(cand_lists)))],
        int(d["num_queries"]),
        drng,
        answer_format=cfg["policy_answer"],
      )
      for _ in range(min(int(d["steps"]) * int(d["batch_size"]), 2048))
    ]
    base, _ = sft.train_sft(
      base, pool, _sft_config(d), seed=seed, pad_id=pad, log=log, name="drill"
    )
  lap("drill")

  # 4. policy SFT ---------------------------------------------------------
  ps = cfg["policy_sft"]
  repeats = demos.verb_balance_repeats(
    demo_eps, float(cfg["demo_verb_balance"])
  )
  # each example is tokenized once and enters the pool `repeats` times
  pol_samples = [
    sample
    for sample, r in zip(
      (
        drills.boxed_answer_sample(
          tok, e.prompt_text, e.response_text, float(ps["answer_weight"])
        )
        for e in pol_ex
      ),
      repeats,
      strict=True,
    )
    for _ in range(r)
  ]
  held_samples = [
    drills.boxed_answer_sample(tok, e.prompt_text, e.response_text, 1.0)
    for e in heldout_pol
  ][:128]
  lm = int(ps["length_multiple"])
  loss_before = sft.response_loss(
    base, held_samples, pad_id=pad, length_multiple=lm
  )
  policy, _ = sft.train_sft(
    base,
    pol_samples,
    _sft_config(ps),
    seed=seed + 1,
    pad_id=pad,
    log=log,
    name="policy_sft",
  )
  loss_after = sft.response_loss(
    policy, held_samples, pad_id=pad, length_multiple=lm
  )
  log(
    f"[warmstart] policy held-out response loss {loss_before:.4f} -> "
    f"{loss_after:.4f}"
  )
  lap("policy_sft")

  # 5. reward-model SFT ---------------------------------------------------
  rs = cfg["rm_sft"]
  rm_samples = [
    drills.boxed_answer_sample(
      tok, e.prompt_text, e.response_text, float(rs["answer_weight"])
    )
    for e in judge_ex
  ]
  rm_base = {
    "drill": lambda: base,
    "policy": lambda: policy,
    "scratch": lambda: Qwen(model_cfg, rngs=nnx.Rngs(seed + 7)),
  }[cfg["rm_init"]]()
  held_judge_samples = [
    drills.boxed_answer_sample(tok, e.prompt_text, e.response_text, 1.0)
    for e in heldout_judge
  ][:64]
  lm = int(rs["length_multiple"])
  rm_loss_before = sft.response_loss(
    rm_base, held_judge_samples, pad_id=pad, length_multiple=lm
  )
  reward, _ = sft.train_sft(
    rm_base,
    rm_samples,
    _sft_config(rs),
    seed=seed + 2,
    pad_id=pad,
    log=log,
    name="rm_sft",
  )
  rm_loss_after = sft.response_loss(
    reward, held_judge_samples, pad_id=pad, length_multiple=lm
  )
  lap("rm_sft")

  # 6. evaluation ----------------------------------------------------------
  ev = cfg["eval"]
  play = evaluate.play_policy(
    policy,
    tok,
    eval_games,
    history_steps=H,
    max_steps=int(ev["max_steps"]),
    temperature=float(ev["temperature"]),
    greedy=bool(ev["greedy"]),
    seed=seed,
    batch_size=int(ev["batch_size"]),
  )
  log(
    f"[warmstart] policy success {play['success_rate']:.3f} on "
    f"{play['num_games']} held-out games (mean steps {play['mean_steps']:.1f})"
  )
  lap("policy_eval")
  records = play["records"]
  pick = np.random.default_rng([seed, 0xE7A]).permutation(len(records))
  own = [records[i] for i in sorted(pick[: int(ev["rm_max_steps"])])]
  rm_own = evaluate.judge_accuracy(
    reward, tok, own, seed=seed, batch_size=int(ev["batch_size"])
  )
  rm_held = evaluate.judge_accuracy(
    reward,
    tok,
    [evaluate.StepRecord(*e.parts, e.label) for e in heldout_judge],
    seed=seed,
    batch_size=int(ev["batch_size"]),
  )
  log(
    "[warmstart] judge process accuracy on policy steps "
    f"{rm_own['accuracy']:.3f} "
    f"(balanced {rm_own['balanced_accuracy']:.3f}); on held-out noisy steps "
    f"{rm_held['accuracy']:.3f}"
  )
  lap("rm_eval")

  # 7. save -------------------------------------------------------------
  dirs = {k: os.path.join(out_dir, k) for k in ("policy", "reward")}
  save_qwen(policy, dirs["policy"], tokenizer=tok)
  save_qwen(reward, dirs["reward"], tokenizer=tok)
  lap("save")
  times["total"] = round(time.perf_counter() - t_all, 2)
  report = {
    "config": cfg,
    "config_hash": digest,
    "timings_s": times,
    "cache_hit": False,
    "num_policy_examples": len(pol_samples),
    "num_rm_examples": len(rm_samples),
    "num_params": int(sum(x.size for x in jax_leaves(policy))),
    "policy": {
      "success_rate": play["success_rate"],
      "mean_steps": play["mean_steps"],
      "num_games": play["num_games"],
      "eval": dict(ev),
      "heldout_response_loss_before": loss_before,
      "heldout_response_loss_after": loss_after,
      "expert_demo_success": float(np.mean([e.won for e in demo_eps])),
    },
    "reward_model": {
      "on_policy_steps": rm_own,
      "on_heldout_noisy_steps": rm_held,
      "heldout_response_loss_before": rm_loss_before,
      "heldout_response_loss_after": rm_loss_after,
    },
  }
  tmp = marker_path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(
      {
        "config_hash": digest,
        "config": cfg,
        "report": report,
        "provenance": dict(provenance or {}),
      },
      f,
      indent=2,
    )
  os.replace(tmp, marker_path)
  log(f"[warmstart] done in {times['total']:.1f}s: {json.dumps(times)}")
  return {
    "tokenizer_dir": tok_dir,
    "policy_dir": dirs["policy"],
    "reward_dir": dirs["reward"],
    "report": report,
  }


def jax_leaves(model):
  import jax

  return jax.tree.leaves(nnx.state(model, nnx.Param))


def load_warm_start(result: dict):
  """(tokenizer, policy Qwen, reward Qwen) from build_warm_start's result."""
  return (
    load_tokenizer(result["tokenizer_dir"]),
    load_qwen(result["policy_dir"]),
    load_qwen(result["reward_dir"]),
  )
