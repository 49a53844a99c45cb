"""Warm start: a tiny end-to-end build (tokenizer,
policy, reward model) and its parts."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rla_jax.envs.alfworld import generate_split, label_progress, next_action
from rla_jax.errors import ConfigError
from rla_jax.rl import agent_text
from rla_jax.rl.parsing import parse_action_index
from rla_jax.warmstart import (
  build_warm_start,
  default_warmstart_config,
  demos,
  drills,
)
from rla_jax.warmstart.config import resolve_config

TINY = {
  "num_pretrain_games": 12,
  "num_demo_episodes": 8,
  "num_rm_episodes": 4,
  "num_rm_examples": 16,
  "vocab_size": 400,
  "model": {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_layers": 2,
    "num_heads": 2,
    "num_kv_heads": 1,
    "head_dim": 16,
  },
  "drill": {"steps": 2, "batch_size": 4, "length_multiple": 512},
  "policy_sft": {
    "steps": 12,
    "batch_size": 4,
    "learning_rate": 1e-2,
    "length_multiple": 512,
  },
  "rm_init": "policy",  # the embedded default's choice
  "rm_sft": {"steps": 2, "batch_size": 4, "length_multiple": 1024},
  "eval": {"num_games": 4, "max_steps": 2, "batch_size": 4, "rm_max_steps": 4},
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("warm"))
  lines: list[str] = []
  result = build_warm_start(TINY, out, log=lines.append)
  return out, result, lines


def test_tokenizer_loads_round_trips_and_renders_chatml(built):
  from transformers import AutoTokenizer

  _, result, _ = built
  tok = AutoTokenizer.from_pretrained(
    result["tokenizer_dir"], local_files_only=True
  )
  for text in (
    "I will go to fridge 1. \\boxed{12}",
    "This is a bad step. \\boxed{-1}",
    "  odd  spacing\n\ttabs, ünïcödé ✓ {}[] 3/8 ",
    "You arrive at countertop 1.",
  ):
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
  prompt = tok.apply_chat_template(
    [{"role": "user", "content": "look"}],
    tokenize=False,
    add_generation_prompt=True,
  )
  assert prompt == "<|im_start|>user\nlook<|im_end|>\n<|im_start|>assistant\n"
  ids = tok.encode(prompt, add_special_tokens=False)
  assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
  assert tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>"
  assert agent_text.end_of_turn_ids(tok)[0] == tok.convert_tokens_to_ids(
    "<|im_end|>"
  )


def test_checkpoints_load_in_rla_jax_and_transformers(built):
  import torch
  from transformers import AutoModelForCausalLM

  from rla_jax.models import load_qwen
  from rla_jax.tokenizer import load_tokenizer

  _, result, _ = built
  tok = load_tokenizer(result["policy_dir"])  # saved alongside the weights
  ids = agent_text.chat_ids(tok, "Your task is to: put a cloth in shelf.")
  policy = load_qwen(result["policy_dir"])
  reward = load_qwen(result["reward_dir"])
  assert policy.cfg.vocab_size == len(tok) == reward.cfg.vocab_size
  ours, _ = policy(np.asarray([ids], np.int32))
  hf = AutoModelForCausalLM.from_pretrained(
    result["policy_dir"], dtype=torch.float32
  ).eval()
  with torch.no_grad():
    theirs = hf(input_ids=torch.tensor([ids])).logits.numpy()
  np.testing.assert_allclose(np.asarray(ours), theirs, atol=2e-4, rtol=2e-3)
  ours_rm, _ = reward(np.asarray([ids], np.int32))
  assert not np.allclose(
    np.asarray(ours_rm), np.asarray(ours)
  )  # separate weights


def test_sft_lowers_heldout_response_loss_and_report_is_complete(built):
  _, result, lines = built
  rep = result["report"]
  pol = rep["policy"]
  assert (
    pol["heldout_response_loss_after"]
    < pol["heldout_response_loss_before"] - 0.3
  )
  assert 0.0 <= pol["success_rate"] <= 1.0 and pol["num_games"] == 4
  for key in ("on_policy_steps", "on_heldout_noisy_steps"):
    r = rep["reward_model"][key]
    assert 0.0 <= r["accuracy"] <= 1.0
    # every +1 vote on a -1 label (or missing +1 vote on a +1 label) is a miss
    assert (
      r["accuracy"]
      <= 1.0 - abs(r["vote_positive_rate"] - r["label_positive_rate"]) + 1e-9
    )
  assert set(rep["timings_s"]) >= {
    "data",
    "tokenizer",
    "drill",
    "policy_sft",
    "rm_sft",
    "eval",
    "save",
    "total",
  }
  assert rep["cache_hit"] is False
  assert any("policy_sft step" in line for line in lines)


def test_second_call_reuses_cache_without_training(built):
  out, first, _ = built
  marker = os.path.join(out, "warmstart.json")
  mtime = os.path.getmtime(
    os.path.join(first["policy_dir"], "model.safetensors")
  )
  lines: list[str] = []
  again = build_warm_start(TINY, out, log=lines.append)
  assert again["report"]["cache_hit"] is True
  assert any("cache hit" in line for line in lines)
  assert not any("step" in line for line in lines)
  assert (
    os.path.getmtime(os.path.join(first["policy_dir"], "model.safetensors"))
    == mtime
  )
  with open(marker) as f:
    assert json.load(f)["config_hash"] == first["report"]["config_hash"]
  # a different config is not served from the cache
  other = resolve_config({**TINY, "seed": 1})
  assert other != resolve_config(TINY)


def test_noisy_rollouts_are_deterministic_and_targets_are_expert_choices():
  games = generate_split("train", 6, seed=3, room_size="small")
  a = demos.noisy_expert_rollouts(games, 0.5, np.random.default_rng(7), 20)
  b = demos.noisy_expert_rollouts(games, 0.5, np.random.default_rng(7), 20)
  assert [e.actions for e in a] == [e.actions for e in b]
  assert any(
    act != exp for e in a for act, exp in zip(e.actions, e.expert, strict=True)
  )  # noise happened
  examples = demos.policy_examples(a, 2)
  ep, k = a[0], 0
  ex = examples[0]
  cands = ep.admissible[k]
  assert cands[parse_action_index(ex.response_text, len(cands))] == next_action(
    ep.game, []
  )
  judged = demos.judge_examples(a, 2)
  flat = [(e, k) for e in a for k in range(len(e.actions))]
  assert len(judged) == len(flat)
  for j, (e, k) in zip(judged, flat, strict=True):
    assert j.label == (
      1 if label_progress(e.game, e.actions[:k], e.actions[k]) else -1
    )


def test_index_answer_format_holds_only_the_decision():
  games = generate_split("train", 4, seed=3, room_size="small")
  eps = demos.noisy_expert_rollouts(games, 0.5, np.random.default_rng(7), 20)
  pol = demos.policy_examples(eps, 2, "index")
  assert len(pol) == len(demos.policy_examples(eps, 2))
  ep = eps[0]
  cands = ep.admissible[0]
  assert pol[0].response_text == f"\\boxed{{{cands.index(ep.expert[0])}}}"
  assert (
    cands[parse_action_index(pol[0].response_text, len(cands))] == ep.expert[0]
  )
  judged = demos.judge_examples(eps, 2, "index")
  assert judged[0].parts[1] == f"\\boxed{{{cands.index(ep.actions[0])}}}"
  with pytest.raises(ValueError, match="answer_format"):
    agent_text.policy_response_text("look", 0, "essay")
  with pytest.raises(ValueError, match="policy_answer"):
    resolve_config({"policy_answer": "essay"})


def test_balance_and_corrupt_balances_labels_and_flips_targets():
  pool = [
    demos.TextExample(f"p{i}", "", 1 if i % 4 else -1) for i in range(200)
  ]
  out = demos.balance_and_corrupt(pool, 80, 0.25, np.random.default_rng(0))
  labels = [e.label for e in out]
  assert labels.count(1) == labels.count(-1) == 40
  flipped = sum(
    e.response_text != agent_text.judge_response_text(e.label) for e in out
  )
  assert 8 <= flipped <= 32  # ~20 expected of 80 at 25%
  with pytest.raises(ValueError, match="rm_label_noise"):
    demos.balance_and_corrupt(pool, 10, 0.7, np.random.default_rng(0))


def test_balance_and_corrupt_draws_the_positive_share():
  # 50 positives and 150 negatives: a 0.25 share of 80 is 20 +1 and 60 -1;
  # 0.9 of 80 asks for 72 +1 of the 50 there, so negatives fill the rest;
  # 0.1 of 200 wants 180 -1 of the 150 there, so positives fill the rest.
  pool = [
    demos.TextExample(f"p{i}", "", -1 if i % 4 else 1) for i in range(200)
  ]
  rng = np.random.default_rng(0)
  labels = [e.label for e in demos.balance_and_corrupt(pool, 80, 0, rng, 0.25)]
  assert (labels.count(1), labels.count(-1)) == (20, 60)
  labels = [e.label for e in demos.balance_and_corrupt(pool, 80, 0, rng, 0.9)]
  assert (labels.count(1), labels.count(-1)) == (50, 30)
  labels = [e.label for e in demos.balance_and_corrupt(pool, 200, 0, rng, 0.1)]
  assert (labels.count(1), labels.count(-1)) == (50, 150)
  with pytest.raises(ValueError, match="rm_positive_share"):
    demos.balance_and_corrupt(pool, 10, 0.1, rng, 1.0)
  with pytest.raises(ConfigError, match="rm_positive_share"):
    resolve_config({"rm_positive_share": 0.0})


def test_answer_weights_sit_on_the_decisions(built):
  from rla_jax.tokenizer import load_tokenizer

  tok = load_tokenizer(built[1]["tokenizer_dir"])
  answer = agent_text.policy_response_text("look", 12)
  assert answer == "I choose 12) look. \\boxed{12}"
  _, resp, w = drills.boxed_answer_sample(tok, "q", answer, 5.0)
  assert tok.decode(resp[:-1]) == answer
  heavy = [t for t, x in zip(resp, w, strict=True) if x == 5.0]
  assert tok.decode(heavy).replace(" ", "") == "1212"  # chosen + boxed index
  for score in (1, -1):  # "{-" may be one token: it still carries the weight
    _, resp, w = drills.boxed_answer_sample(
      tok, "q", agent_text.judge_response_text(score), 5.0
    )
    heavy = tok.decode([t for t, x in zip(resp, w, strict=True) if x == 5.0])
    assert str(score) in heavy and "boxed" not in heavy
    assert tok.decode(resp[:-1]) == agent_text.judge_response_text(score)
  assert resp[-1] == tok.convert_tokens_to_ids("<|im_end|>")
  cands = ["go to a 1", "look", "help"]
  _, dresp, dw = drills.copy_drill(tok, cands, 3, np.random.default_rng(0))
  assert len(dresp) == len(dw)
  lines = tok.decode(dresp).strip().split("\n")
  assert len(lines) == 3
  for line in lines:  # well-formed answers naming candidate k
    k = int(line[len("I choose ") : line.index(")")])
    assert line == agent_text.policy_response_text(cands[k], k)
  copied = tok.decode([t for t, x in zip(dresp, dw, strict=True) if x == 1.0])
  for line in lines:  # the command text is weighted 1, the first index not
    assert line[line.index(")") + 2 : line.index(".")] in copied
  assert "I choose" not in copied


def test_command_index_format_writes_the_command_then_looks_up_its_index(built):
  """ "command_index": the decision weight sits on the written command and the
  boxed index; its drills answer with a random candidate's command and the
  index of that candidate (the reverse lookup)."""
  from rla_jax.tokenizer import load_tokenizer

  tok = load_tokenizer(built[1]["tokenizer_dir"])
  answer = agent_text.policy_response_text(
    "go to sinkbasin 1", 7, "command_index"
  )
  assert answer == "I will go to sinkbasin 1. \\boxed{7}"
  assert parse_action_index(answer, 9) == 7
  spans = sorted(answer[lo:hi] for lo, hi in drills.decision_spans(answer))
  assert spans == ["7", "go to sinkbasin 1"]
  _, resp, w = drills.boxed_answer_sample(tok, "q", answer, 5.0)
  heavy = tok.decode(
    [t for t, x in zip(resp, w, strict=True) if x == 5.0]
  ).replace(" ", "")
  assert heavy == "gotosinkbasin17"
  cands = ["go to a 1", "take b 2 from a 1", "look", "help"]
  _, dresp, dw = drills.copy_drill(
    tok, cands, 6, np.random.default_rng(1), answer_format="command_index"
  )
  lines = tok.decode(dresp).strip().split("\n")
  assert len(lines) == 6
  for line in lines:  # every answer names a candidate and boxes its own index
    command = line[len("I will ") : line.rindex(". \\boxed{")]
    assert line == agent_text.policy_response_text(
      command, cands.index(command), "command_index"
    )
  copied = tok.decode([t for t, x in zip(dresp, dw, strict=True) if x == 1.0])
  assert "I will" not in copied and all(
    line[7:].split(".")[0] in copied for line in lines
  )
  # "index" answers have no command to copy: their drills use choice_line
  _, iresp, _ = drills.copy_drill(
    tok, cands, 2, np.random.default_rng(1), answer_format="index"
  )
  assert tok.decode(iresp).startswith("I choose ")
  with pytest.raises(ValueError, match="answer_format"):
    drills.copy_drill(
      tok, cands, 2, np.random.default_rng(1), answer_format="essay"
    )


def test_verb_balance_repeats_rare_decisions():
  """r = max(1, round((f_max / f_verb) ** alpha)), hand-computed: go 4x,
  take 2x, cool 1x among the expert commands (None = dead end, skipped)."""
  ep = demos.Episode(
    None,
    [],
    [],
    [],
    [
      "go to a 1",
      "take x 1 from a 1",
      "go to b 1",
      None,
      "cool x 1 with fridge 1",
    ],
    False,
  )
  ep2 = demos.Episode(
    None, [], [], [], ["go to c 1", "go to d 1", "take y 1 from d 1"], False
  )
  assert demos.verb_balance_repeats([ep, ep2], 0.0) == [1] * 7
  assert demos.verb_balance_repeats([ep, ep2], 1.0) == [1, 2, 1, 4, 1, 1, 2]
  # sqrt(2) -> 1, sqrt(4) -> 2
  assert demos.verb_balance_repeats([ep, ep2], 0.5) == [1, 1, 1, 2, 1, 1, 1]
  with pytest.raises(ValueError, match="demo_verb_balance"):
    demos.verb_balance_repeats([ep], 1.5)
  with pytest.raises(ValueError, match="demo_verb_balance"):
    resolve_config({"demo_verb_balance": -0.1})


def test_config_rejects_unknown_keys_and_defaults_are_valid():
  with pytest.raises(ValueError, match="unknown key 'histroy_steps'"):
    resolve_config({"histroy_steps": 2})
  with pytest.raises(ValueError, match="policy_sft.stpes"):
    resolve_config({"policy_sft": {"stpes": 3}})
  cfg = resolve_config(default_warmstart_config())
  assert cfg == default_warmstart_config()


def test_judge_skips_excluded_episodes(built):
  """judge_episodes(include=...) samples nothing for excluded episodes
  (the loop excludes rejected candidates) and judges every step of the rest."""
  from rla_jax.rl.alfworld_judge import judge_episodes
  from rla_jax.rl.alfworld_rollout import rollout_episodes
  from rla_jax.sampling.sampler import Sampler
  from rla_jax.sampling.settings import SamplingParams
  from rla_jax.warmstart import load_warm_start

  tok, policy, reward = load_warm_start(built[1])
  games = generate_split("train", 3, seed=5, room_size="small")
  stop = agent_text.end_of_turn_ids(tok)

  def make(m):
    return Sampler(
      m,
      max_prompt_len=1024,
      max_new_tokens=8,
      stop_token_ids=stop,
      pad_id=tok.pad_token_id,
    )

  eps = rollout_episodes(
    games,
    [g.game_id for g in games],
    make(policy),
    tok,
    backend="native",
    max_steps=3,
    history_steps=2,
    seed=0,
    params=SamplingParams(),
  )
  judged = judge_episodes(
    eps,
    make(reward),
    tok,
    m=2,
    seed=0,
    params=SamplingParams(),
    include=[True, False, True],
  )
  for n, e in enumerate(eps):
    want = [n != 1 and k < e.num_steps for k in range(judged.mask.shape[1])]
    assert list(judged.mask[n]) == want
  assert not judged.scores[1].any()
  assert all(p is None for p in judged.prompt_ids[1])
  with pytest.raises(ValueError, match="include flags"):
    judge_episodes(
      eps,
      make(reward),
      tok,
      m=2,
      seed=0,
      params=SamplingParams(),
      include=[True],
    )


def test_cache_key_covers_the_text_formats(monkeypatch):
  """A changed answer format must not reuse a warm start trained on the
  old one."""
  from rla_jax.warmstart.config import config_hash

  cfg = resolve_config(default_warmstart_config())
  before = config_hash(cfg)
  monkeypatch.setattr(
    agent_text,
    "policy_response_text",
    lambda command, index: f"I will {command}. \\boxed{{{index}}}",
  )
  assert config_hash(cfg) != before


def _policy_params(policy_dir):
  import jax
  from flax import nnx

  from rla_jax.models import load_qwen

  state = nnx.state(load_qwen(policy_dir), nnx.Param)
  return [np.asarray(x) for x in jax.tree.leaves(state)]


def _judge_only_change(steps=3):
  return {**TINY, "rm_sft": {**TINY["rm_sft"], "steps": steps}}


def test_policy_stages_hash_ignores_only_the_judge_fields():
  from rla_jax.warmstart.config import (
    JUDGE_FIELDS,
    config_hash,
    policy_stages_hash,
  )

  base = resolve_config(TINY)
  judge = resolve_config(_judge_only_change())
  noisier = resolve_config({**TINY, "rm_label_noise": 0.3})
  probed = resolve_config({**TINY, "eval": {**TINY["eval"], "rm_max_steps": 8}})
  policy = resolve_config({**TINY, "demo_epsilon": 0.4})
  played = resolve_config({**TINY, "eval": {**TINY["eval"], "max_steps": 3}})
  assert set(JUDGE_FIELDS) <= set(base)
  for other in (judge, noisier, probed):
    assert config_hash(other) != config_hash(base)
    assert policy_stages_hash(other) == policy_stages_hash(base)
  for other in (policy, played):
    assert policy_stages_hash(other) != policy_stages_hash(base)


def test_stage_store_reruns_only_stages_whose_key_changed(tmp_path):
  from rla_jax.warmstart.stages import StageStore

  store = StageStore(str(tmp_path / "w"), print)
  root = store.checkpoint_dir("judge", "k1")
  os.makedirs(os.path.join(root, "judge"))
  open(os.path.join(root, "judge", "step"), "w").close()
  store.finish("judge", "k1", {"steps_run": 3})
  store.finish("policy", "p1", {"steps_run": 5})
  again = StageStore(str(tmp_path / "w"), print)  # reopened from disk
  assert again.done("judge", "k1") == {"steps_run": 3}
  assert again.done("judge", "k2") is None
  assert again.done("policy", "p1") == {"steps_run": 5}
  # the same key keeps its checkpoints (a resume); another key clears them
  assert os.path.exists(os.path.join(root, "judge", "step"))
  again.checkpoint_dir("judge", "k1")
  assert os.path.exists(os.path.join(root, "judge", "step"))
  again.checkpoint_dir("judge", "k2")
  assert not os.path.exists(os.path.join(root, "judge"))


def test_a_judge_only_change_trains_only_the_judge(built, tmp_path):
  out, first, _ = built
  lines: list[str] = []
  second = build_warm_start(
    _judge_only_change(),
    str(tmp_path / "judge-only"),
    work_dir=out + ".work",  # the first build's stages
    log=lines.append,
  )
  assert any("stage policy_sft: reusing" in line for line in lines)
  assert not any("policy_sft step" in line for line in lines)
  assert not any("drill step" in line for line in lines)
  assert any("rm_sft step 0/3" in line for line in lines)
  assert second["report"]["config_hash"] != first["report"]["config_hash"]
  for a, b in zip(
    _policy_params(first["policy_dir"]),
    _policy_params(second["policy_dir"]),
    strict=True,
  ):
    np.testing.assert_array_equal(a, b)


def test_reuse_from_takes_a_finished_builds_policy(built, tmp_path):
  from rla_jax.errors import ConfigError

  out, first, _ = built
  lines: list[str] = []
  second = build_warm_start(
    _judge_only_change(4),
    str(tmp_path / "reused"),
    work_dir=str(tmp_path / "fresh-work"),
    reuse_from=out,
    log=lines.append,
  )
  assert any("stage policy_sft: taken from" in line for line in lines)
  assert not any("policy_sft step" in line for line in lines)
  assert not any("drill step" in line for line in lines)  # rm_init=policy
  assert any("rm_sft step 0/4" in line for line in lines)
  report = second["report"]
  assert report["reused"]["policy_sft"]["from"] == out
  assert (
    report["reused"]["policy_sft"]["config_hash"]
    == first["report"]["config_hash"]
  )
  assert (
    report["curves"]["policy_sft"] == first["report"]["curves"]["policy_sft"]
  )
  # the drill base's loss comes from the build that measured it
  assert (
    report["policy"]["heldout_response_loss_before"]
    == first["report"]["policy"]["heldout_response_loss_before"]
  )
  for a, b in zip(
    _policy_params(first["policy_dir"]),
    _policy_params(second["policy_dir"]),
    strict=True,
  ):
    np.testing.assert_array_equal(a, b)
  # a warm start whose policy stages had other settings is refused
  with pytest.raises(ConfigError, match="other settings"):
    build_warm_start(
      {**TINY, "demo_epsilon": 0.4},
      str(tmp_path / "refused"),
      reuse_from=out,
      log=lines.append,
    )
  assert not os.path.exists(tmp_path / "refused")
  with pytest.raises(ConfigError, match="no readable warm start"):
    build_warm_start(TINY, str(tmp_path / "r2"), reuse_from=str(tmp_path))
