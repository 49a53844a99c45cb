"""build_warm_start: the embedded tokenizer, policy and judge, from scratch.

Stages (each timed, wall seconds in report["timings_s"]):
  1. data: seeded train games (the configured levels or room size);
     epsilon-noisy demonstrations for the policy (demo_epsilon) and the judge
     (rm_epsilon); held-out states for choice accuracy.
  2. tokenizer: byte-level BPE on rendered prompts/responses/transcripts.
  3. drill: a random-init Qwen3 base learns the candidate-index lookup.
  4. policy_sft: base -> SFT on the demonstrator's choices at visited states,
     stopped early once the policy wins `target_success` of the selection
     games (probed every `eval_every` steps), so it starts short of perfect.
  5. rm_sft: the SFT'd policy, the drill base or scratch -> SFT on balanced,
     label-noised judge examples, stopped once its balanced accuracy on the
     policy's own steps lands in `target_balanced`.
  6. eval: policy success, per-verb choice accuracy, judge accuracies.
  7. save: three Hugging Face directories and `warmstart.json` (config hash,
     resolved config, report, provenance).

With `work_dir`, every finished stage and every SFT checkpoint is kept there,
keyed by the settings it depends on (the judge stage by the config hash, the
drill and policy stages by policy_stages_hash), so an interrupted build
continues where it stopped and a build that changes only the judge's
settings trains only the judge; `reuse_from` takes the policy stage from a
finished warm start instead (e.g. the shipped one).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

from flax import nnx

from rla_jax.errors import ConfigError
from rla_jax.models import Qwen, load_qwen, save_qwen
from rla_jax.tokenizer import load_tokenizer
from rla_jax.warmstart import build_metrics, drills
from rla_jax.warmstart.bpe_tokenizer import train_bpe_tokenizer
from rla_jax.warmstart.config import (
  config_hash,
  policy_stages_hash,
  resolve_config,
)
from rla_jax.warmstart.data import (
  WarmStartData,
  make_data,
  policy_samples,
  tokenizer_corpus,
)
from rla_jax.warmstart.directory import MARKER
from rla_jax.warmstart.drill_stage import DrillBase
from rla_jax.warmstart.stages import (
  StageClock,
  begin_build,
  model_config,
  sft_config,
  train_stage,
  write_marker,
)

MODEL_DIRS = ("tokenizer", "policy", "reward")


def _cached(out_dir: str, digest: str) -> dict | None:
  path = os.path.join(out_dir, MARKER)
  if not os.path.isfile(path):
    return None
  with open(path) as f:
    marker = json.load(f)
  dirs = {k: os.path.join(out_dir, k) for k in MODEL_DIRS}
  complete = all(
    os.path.isfile(os.path.join(d, "tokenizer.json")) for d in dirs.values()
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


@dataclasses.dataclass(frozen=True)
class ReusedPolicy:
  """The policy stages of a finished warm start whose drill and policy SFT
  settings (policy_stages_hash) equal this build's: its policy checkpoint,
  training curves and the drill base's held-out loss it measured."""

  source: str
  config_hash: str
  policy_dir: str
  policy_info: dict
  drill_info: dict
  loss_before: float
  provenance: dict


def reused_policy(source: str, policy_key: str) -> ReusedPolicy:
  """The policy stages of the warm start in `source`; ConfigError if it is
  not a finished warm start or its policy stages had other settings."""
  path = os.path.join(source, MARKER)
  try:
    with open(path) as f:
      marker = json.load(f)
    theirs = policy_stages_hash(marker["config"])
    report = marker["report"]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ConfigError(
      f"--reuse_from={source!r}: no readable warm start ({path}: {e})"
    ) from None
  if theirs != policy_key:
    raise ConfigError(
      f"--reuse_from={source!r}: its drill and policy stages were built for "
      f"other settings ({theirs[:12]}, this build's {policy_key[:12]}); "
      "only the judge's settings (rla_jax.warmstart.config.JUDGE_FIELDS) "
      "may differ"
    )
  return ReusedPolicy(
    source=source,
    config_hash=str(marker["config_hash"]),
    policy_dir=os.path.join(source, "policy"),
    policy_info=report["curves"]["policy_sft"],
    drill_info=report["curves"]["drill"],
    loss_before=float(report["policy"]["heldout_response_loss_before"]),
    provenance=marker.get("provenance", {}),
  )


def _policy_stage(store, policy_key, drill, tok, data, cfg, log):
  """Stage policy_sft: the drill base fine-tuned on the demonstrations,
  probed (and checkpointed) every eval_every steps; (model, its curves)."""
  ps = cfg["policy_sft"]
  return train_stage(
    store,
    "policy_sft",
    policy_key,
    drill.model,
    policy_samples(tok, data, cfg),
    sft_config(ps),
    int(cfg["seed"]) + 1,
    tok.pad_token_id,
    log,
    probe=build_metrics.policy_probe(cfg, tok, data.select_games)
    if int(ps["eval_every"])
    else None,
    checkpoint_every=int(ps["eval_every"]) or 0,
  )


@dataclasses.dataclass(frozen=True)
class JudgeStage:
  """Stage rm_sft's result: the judge, its curves, the policy's own steps
  it was probed on, and how many labelled examples it trained on."""

  model: Qwen
  info: dict
  probe_records: list
  num_examples: int


def _judge_stage(store, digest, drill, policy, tok, data, cfg, log):
  """Stage rm_sft: the judge (from rm_init: the drill base, the policy or
  scratch) fine-tuned on the labelled judge examples, probed on
  rm_max_steps of the policy's own steps in the judge games."""
  seed, ev, rs = int(cfg["seed"]), cfg["eval"], cfg["rm_sft"]
  own = build_metrics.play_games(
    policy, tok, data.judge_games, ev, cfg["history_steps"], seed + 23
  )["records"]
  rm_init = {
    "drill": drill.model,
    "policy": lambda: policy,
    "scratch": lambda: Qwen(model_config(cfg, tok), rngs=nnx.Rngs(seed + 7)),
  }[cfg["rm_init"]]
  rm_samples = [
    drills.boxed_answer_sample(
      tok, e.prompt_text, e.response_text, float(rs["answer_weight"])
    )
    for e in data.judge_ex
  ]
  probe_records = build_metrics.sample_records(
    own, int(ev["rm_max_steps"]), seed
  )
  reward, rm_info = train_stage(
    store,
    "rm_sft",
    digest,
    rm_init,
    rm_samples,
    sft_config(rs),
    seed + 2,
    tok.pad_token_id,
    log,
    probe=build_metrics.judge_probe(cfg, tok, probe_records)
    if int(rs["eval_every"])
    else None,
    checkpoint_every=int(rs["eval_every"]) or 0,
  )
  return JudgeStage(reward, rm_info, probe_records, len(rm_samples))


def build_warm_start(
  cfg,
  out_dir: str,
  *,
  work_dir: str | None = None,
  reuse_from: str | None = None,
  provenance: dict | None = None,
  log: Callable[[str], None] = print,
) -> dict:
  """Builds (or reuses) the warm start in out_dir.

  Returns dict(tokenizer_dir, policy_dir, reward_dir, report): report holds
  the resolved config, per-stage wall times, training curves (SFT logs and
  probes), policy success and per-verb choice accuracy, judge accuracies and
  cache_hit. `provenance` (command, commit, ...) is stored in the marker.
  `reuse_from`: a finished warm start whose drill and policy settings equal
  these (reused_policy); its policy is taken as this build's policy stage,
  so only the judge is trained (report["reused"] says so).
  """
  cfg = resolve_config(cfg)
  digest, policy_key = config_hash(cfg), policy_stages_hash(cfg)
  hit = _cached(out_dir, digest)
  if hit is not None:
    log(f"[warmstart] cache hit: reusing {out_dir} (config {digest[:12]})")
    return hit
  reused = reused_policy(reuse_from, policy_key) if reuse_from else None
  store = begin_build(out_dir, digest, work_dir, log)
  if reused is not None:
    _adopt_reused_policy(store, policy_key, reused, log)
  clock = StageClock(log)
  data = make_data(cfg)
  clock.lap("data")
  tok = _train_tokenizer(cfg, data, os.path.join(out_dir, "tokenizer"))
  clock.lap("tokenizer")
  models = _train_models(store, digest, policy_key, tok, data, cfg, clock, log)
  metrics = _evaluate(models, reused, tok, data, cfg, log)
  clock.lap("eval")
  _save_models(models, tok, out_dir)
  clock.lap("save")
  times = clock.finish()
  report = {**_report(cfg, digest, times, data, models, reused), **metrics}
  write_marker(out_dir, digest, cfg, report, provenance)
  log(f"[warmstart] done in {times['total']:.1f}s: {json.dumps(times)}")
  return _build_result(out_dir, report)


def _adopt_reused_policy(store, policy_key, reused: ReusedPolicy, log):
  """Records the reused warm start's policy as this build's policy_sft
  stage in `store`."""
  store.adopt("policy_sft", policy_key, reused.policy_dir, reused.policy_info)
  log(
    f"[warmstart] stage policy_sft: taken from {reused.source} (config "
    f"{reused.config_hash[:12]}, same drill and policy settings)"
  )


def _train_tokenizer(cfg, data: WarmStartData, tok_dir: str):
  """Stage tokenizer: byte-level BPE on the data's corpus, saved to tok_dir
  and loaded back."""
  train_bpe_tokenizer(tokenizer_corpus(data), int(cfg["vocab_size"]), tok_dir)
  return load_tokenizer(tok_dir)


@dataclasses.dataclass(frozen=True)
class _TrainedModels:
  """The training stages' results: the drill base, the SFT'd policy with
  its curves, and the judge stage."""

  drill: DrillBase
  policy: Qwen
  policy_info: dict
  judge: JudgeStage


def _train_models(
  store, digest, policy_key, tok, data, cfg, clock: StageClock, log
) -> _TrainedModels:
  """Stages drill (only when the policy stage still needs it), policy_sft
  and rm_sft, each timed on `clock`."""
  model_cfg = model_config(cfg, tok)
  drill = DrillBase(store, policy_key, model_cfg, tok, data, cfg, log)
  if store.done("policy_sft", policy_key) is None:
    drill.model()
  clock.lap("drill")
  policy, policy_info = _policy_stage(
    store, policy_key, drill, tok, data, cfg, log
  )
  clock.lap("policy_sft")
  judge = _judge_stage(store, digest, drill, policy, tok, data, cfg, log)
  clock.lap("rm_sft")
  return _TrainedModels(drill, policy, policy_info, judge)


def _save_models(models: _TrainedModels, tok, out_dir: str) -> None:
  """Stage save: the policy and judge as Hugging Face directories."""
  save_qwen(models.policy, os.path.join(out_dir, "policy"), tokenizer=tok)
  save_qwen(models.judge.model, os.path.join(out_dir, "reward"), tokenizer=tok)


def _build_result(out_dir: str, report: dict) -> dict:
  """build_warm_start's result: the three model directories and report."""
  return {
    "tokenizer_dir": os.path.join(out_dir, "tokenizer"),
    "policy_dir": os.path.join(out_dir, "policy"),
    "reward_dir": os.path.join(out_dir, "reward"),
    "report": report,
  }


def _report(cfg, digest, times, data, models: _TrainedModels, reused):
  """The provenance report's build part: config, hash, stage times, data,
  sizes, curves (and where a reused policy stage came from)."""
  report = {
    "config": cfg,
    "config_hash": digest,
    "timings_s": times,
    "cache_hit": False,
    "data": data.summary(),
    "num_policy_examples": len(data.pol_ex),
    "num_rm_examples": models.judge.num_examples,
    "num_params": int(sum(x.size for x in jax_leaves(models.policy))),
    "curves": {
      "drill": models.drill.info(reused),
      "policy_sft": models.policy_info,
      "rm_sft": models.judge.info,
    },
  }
  if reused is not None:
    report["reused"] = {
      "policy_sft": {
        "from": reused.source,
        "config_hash": reused.config_hash,
        "provenance": reused.provenance,
      }
    }
  return report


def _evaluate(models: _TrainedModels, reused, tok, data, cfg, log):
  """The final metrics (`build_metrics.final_metrics`) with the policy's
  held-out losses before and after SFT."""
  policy, judge, drill = models.policy, models.judge, models.drill
  metrics = build_metrics.final_metrics(
    policy, judge.model, tok, data, cfg, judge.probe_records, log
  )
  # The drill base's held-out loss: measured here when the drill stage ran
  # (or was kept) in this work dir, else by the build the policy came from
  # (the same base: the drill's settings are part of policy_stages_hash).
  if reused is not None and not drill.available():
    before = reused.loss_before
  else:
    before = None
  metrics["policy"].update(
    build_metrics.heldout_losses(
      drill.model, policy, tok, data, cfg, log, before
    )
  )
  return metrics


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
