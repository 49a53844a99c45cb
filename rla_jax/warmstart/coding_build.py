"""The coding warm start: a coder and a unit-test generator SFT'd on the
select family (`rla_jax.envs.coding.select_family`), stopped short of
perfect, shipped in rla_jax/warmstart/shipped/coding and loaded by
`--config=coding` with no build step.

Stages (wall seconds in report["timings_s"]; with a work dir every finished
stage and SFT checkpoint is kept, keyed by the config hash, so an
interrupted build continues where it stopped):
  1. data: seeded train tasks of sft_levels, one program example (a style
     drawn per task) and one worked test example per task
     (`coding_data.make_examples`); held-out probe and evaluation tasks of
     the loop's levels from other seed streams.
  2. tokenizer: byte-level BPE on the rendered prompts and answers.
  3. coder_sft: random init -> SFT on the programs, probed every
     `eval_every` steps by pass@1 (programs sampled at the loop's
     temperature, run on the ground-truth tests in the sandbox) on the
     probe tasks; stops at the first probe at or above `target`.
  4. tester_sft: the coder -> SFT on the worked tests, probed by UT
     accuracy (a generated test is correct when the task's reference
     program, run on its input in the sandbox, prints its output); stops
     at the first probe at or above `target`.
  5. eval: pass@1, greedy pass@1 and UT accuracy on the evaluation tasks.
  6. save: tokenizer/, policy/, reward/ and warmstart.json (config hash,
     config, report, provenance), the layout `directory.load_warm_start_dir`
     checks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from collections.abc import Callable

import jax
import numpy as np
from flax import nnx

from rla_jax.envs.coding import SandboxExecutor, Task, extract_code
from rla_jax.envs.coding import parse_generated_test as parse_test
from rla_jax.envs.coding import select_family as sf
from rla_jax.models import Qwen, QwenConfig, save_qwen
from rla_jax.rl import agent_text
from rla_jax.tokenizer import load_tokenizer
from rla_jax.warmstart import sft
from rla_jax.warmstart.bpe_tokenizer import train_bpe_tokenizer
from rla_jax.warmstart.coding_data import (
  Example,
  make_examples,
  program_example,
  test_example,
)
from rla_jax.warmstart.coding_settings import (
  coding_config_hash,
  resolve_coding_settings,
)
from rla_jax.warmstart.stages import (
  StageClock,
  StageStore,
  begin_build,
  model_config,
  sft_config,
  train_stage,
  write_marker,
)

# -- measurements ----------------------------------------------------------


def sample_texts(model, tok, prompts, num_samples, sampling, seed, greedy):
  """num_samples decoded answers per prompt text (row i * num_samples + j),
  in chunks of sampling.batch_size prompts."""
  from rla_jax.warmstart.evaluate import make_sampler

  B = int(sampling["batch_size"])
  sampler = make_sampler(
    model,
    tok,
    max_prompt_len=int(sampling["max_prompt_len"]),
    max_new_tokens=int(sampling["max_new_tokens"]),
    batch_size=B,
  )
  ids = [agent_text.chat_ids(tok, p) for p in prompts]
  texts = []
  for c0 in range(0, len(ids), B):
    out = sampler.generate(
      ids[c0 : c0 + B],
      seed=seed + c0,
      temperature=float(sampling["temperature"]),
      greedy=greedy,
      num_samples=num_samples,
    )
    texts += [tok.decode(t, skip_special_tokens=True) for t in out.tokens]
  return texts


def coder_pass_rate(
  model, tok, tasks, samples, sampling, seed, executor, greedy=False
):
  """pass@1: the share of sampled programs (samples per task) that pass
  every ground-truth test, and the share that parse."""
  prompts = [program_example(t, 0).prompt_text for t in tasks]
  texts = sample_texts(model, tok, prompts, samples, sampling, seed, greedy)
  passed, parsed = [], []
  for i, task in enumerate(tasks):
    progs = [extract_code(x) for x in texts[i * samples : (i + 1) * samples]]
    parsed += [p is not None for p in progs]
    ok = executor.run(progs, list(task.tests), task.time_limit_s).passed
    passed += list(ok.all(axis=1))
  return {
    "pass_at_1": float(np.mean(passed)),
    "valid_program_rate": float(np.mean(parsed)),
    "runs": len(passed),
  }


def tester_accuracy(model, tok, tasks, samples, sampling, seed, executor):
  """UT accuracy: the share of generated tests (samples per task) that
  parse and whose output the task's reference program prints on their
  input; and the share that parse."""
  rng = random.Random(0)  # only the prompt is used
  prompts = [test_example(t, rng).prompt_text for t in tasks]
  texts = sample_texts(model, tok, prompts, samples, sampling, seed, False)
  correct, parsed = [], []
  for i, task in enumerate(tasks):
    tests = [parse_test(x) for x in texts[i * samples : (i + 1) * samples]]
    parsed += [t is not None for t in tests]
    valid = [t for t in tests if t is not None]
    ok = (
      executor.run([sf.reference_program(task)], valid, task.time_limit_s)
      .passed[0]
      .tolist()
      if valid
      else []
    )
    correct += ok + [False] * (len(tests) - len(valid))
  return {
    "ut_accuracy": float(np.mean(correct)),
    "valid_test_rate": float(np.mean(parsed)),
    "runs": len(correct),
  }


# -- the build ---------------------------------------------------------------


def _tokenizer_corpus(programs, tests) -> list[str]:
  """The BPE corpus: the first 300 prompts of each kind and every
  answer."""
  return [e.prompt_text for e in programs[:300] + tests[:300]] + [
    e.response_text for e in programs + tests
  ]


def _samples(tok, examples) -> list[tuple]:
  """SFT samples of `examples`: (chat prompt ids, answer ids + the end of
  turn)."""
  eot = agent_text.end_of_turn_ids(tok)[0]
  return [
    (
      agent_text.chat_ids(tok, e.prompt_text),
      tok.encode(e.response_text, add_special_tokens=False) + [eot],
    )
    for e in examples
  ]


def build_coding_warm_start(
  settings: dict,
  out_dir: str,
  *,
  work_dir: str | None = None,
  provenance: dict | None = None,
  log: Callable[[str], None] = print,
) -> dict:
  """Builds the coding warm start into out_dir (module docstring); returns
  the report stored in its marker."""
  cfg = resolve_coding_settings(settings)
  digest = coding_config_hash(cfg)
  store = begin_build(out_dir, digest, work_dir, log, "coding: ")
  clock = StageClock(log)
  data = make_coding_data(cfg)
  clock.lap("data")
  tok = _train_tokenizer(cfg, data, os.path.join(out_dir, "tokenizer"))
  clock.lap("tokenizer")
  model_cfg = model_config(cfg, tok)
  executor = SandboxExecutor(max_workers=2)
  ctx = _StageContext(cfg, digest, store, tok, executor, data.probe_tasks, log)
  try:
    models = _train_models(ctx, model_cfg, data, clock)
    metrics = _evaluate(ctx, models, data.eval_tasks)
    clock.lap("eval")
  finally:
    executor.close()
  _save_models(models, tok, out_dir)
  clock.lap("save")
  times = clock.finish()
  report = _report(digest, times, data, models, metrics)
  write_marker(out_dir, digest, cfg, report, provenance)
  log(f"[warmstart] coding done in {times['total']:.1f}s")
  return report


@dataclasses.dataclass(frozen=True)
class CodingData:
  """Stage 1's data: the SFT train tasks with their program and worked-test
  examples, and the held-out probe and evaluation tasks."""

  train_tasks: list[Task]
  programs: list[Example]
  tests: list[Example]
  probe_tasks: list[Task]
  eval_tasks: list[Task]


def make_coding_data(cfg: dict) -> CodingData:
  """Seeded train tasks of sft_levels and their examples; probe and eval
  tasks of the loop's levels from another seed stream, none a train task."""
  seed = int(cfg["seed"])
  train = sf.generate_select_tasks(
    int(cfg["train_tasks"]), seed, cfg["sft_levels"]
  )
  held = _held_out_tasks(cfg, seed, {t.task_id for t in train})
  num_probe = cfg["probe"]["tasks"]
  programs, tests = make_examples(train, seed + 1)
  return CodingData(
    train_tasks=train,
    programs=programs,
    tests=tests,
    probe_tasks=held[:num_probe],
    eval_tasks=held[num_probe:][: cfg["eval"]["tasks"]],
  )


def _held_out_tasks(cfg: dict, seed: int, seen: set) -> list[Task]:
  """Tasks of the loop's levels (seed stream seed + 7_000_001) whose ids
  are not in `seen`, enough for the probe and eval tasks."""
  drawn = sf.generate_select_tasks(
    cfg["probe"]["tasks"] + cfg["eval"]["tasks"] + 64,
    seed + 7_000_001,
    cfg["levels"],
  )
  return [t for t in drawn if t.task_id not in seen]


def _train_tokenizer(cfg: dict, data: CodingData, tok_dir: str):
  """Trains the byte-level BPE tokenizer on the examples into tok_dir and
  loads it."""
  train_bpe_tokenizer(
    _tokenizer_corpus(data.programs, data.tests),
    int(cfg["vocab_size"]),
    tok_dir,
  )
  return load_tokenizer(tok_dir)


@dataclasses.dataclass(frozen=True)
class _StageContext:
  """What the SFT stages and the evaluation share: the settings, their hash
  (every stage's key), the stage store, tokenizer, sandbox, probe tasks."""

  cfg: dict
  digest: str
  store: StageStore
  tok: object
  executor: SandboxExecutor
  probe_tasks: list[Task]
  log: Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class _ProbedStage:
  """One probed SFT stage: its settings section, initial model, examples,
  seed offset, and the measure whose `metric` stops it at its target."""

  name: str
  init: Callable[[], Qwen]
  examples: list[Example]
  seed_offset: int
  measure: Callable[..., dict]
  metric: str


@dataclasses.dataclass(frozen=True)
class _TrainedModels:
  """The coder and the unit-test generator with their stages' curves
  (history, probes, steps_run)."""

  coder: Qwen
  coder_info: dict
  tester: Qwen
  tester_info: dict


def _train_models(
  ctx: _StageContext, model_cfg: QwenConfig, data: CodingData, clock: StageClock
) -> _TrainedModels:
  """Stages 3 and 4: the coder SFT'd from random init on the programs, then
  the tester SFT'd from the coder on the worked tests."""
  seed = int(ctx.cfg["seed"])
  coder, coder_info = _train_probed_stage(
    ctx,
    _ProbedStage(
      "coder_sft",
      lambda: Qwen(model_cfg, rngs=nnx.Rngs(seed)),
      data.programs,
      2,
      coder_pass_rate,
      "pass_at_1",
    ),
  )
  clock.lap("coder_sft")
  tester, tester_info = _train_probed_stage(
    ctx,
    _ProbedStage(
      "tester_sft", lambda: coder, data.tests, 3, tester_accuracy, "ut_accuracy"
    ),
  )
  clock.lap("tester_sft")
  return _TrainedModels(coder, coder_info, tester, tester_info)


def _train_probed_stage(
  ctx: _StageContext, stage: _ProbedStage
) -> tuple[Qwen, dict]:
  """One SFT stage of cfg[stage.name] through the store, (model, info);
  probed every eval_every steps, stopped once its metric reaches target."""
  st = ctx.cfg[stage.name]
  return train_stage(
    ctx.store,
    stage.name,
    ctx.digest,  # every coding stage is keyed by the whole config
    stage.init,
    _samples(ctx.tok, stage.examples),
    sft_config(st),
    int(ctx.cfg["seed"]) + stage.seed_offset,
    ctx.tok.pad_token_id,
    ctx.log,
    probe=_stage_probe(ctx, stage),
    checkpoint_every=int(st["eval_every"]),
  )


def _stage_probe(ctx: _StageContext, stage: _ProbedStage) -> sft.Probe:
  """The stage's probe: stage.measure on the probe tasks every eval_every
  steps, done once stage.metric reaches the stage's target."""
  st = ctx.cfg[stage.name]
  return sft.Probe(
    int(st["eval_every"]),
    lambda m: stage.measure(
      m,
      ctx.tok,
      ctx.probe_tasks,
      ctx.cfg["probe"]["samples"],
      ctx.cfg["sampling"],
      ctx.cfg["probe"]["seed"],
      ctx.executor,
    ),
    lambda r: r[stage.metric] >= float(st["target"]),
  )


def _evaluate(ctx: _StageContext, models: _TrainedModels, eval_tasks) -> dict:
  """Stage 5: pass@1, greedy pass@1 and UT accuracy on the eval tasks
  (logged)."""
  ev, sampling, tok = ctx.cfg["eval"], ctx.cfg["sampling"], ctx.tok
  samples, seed, executor = ev["samples"], ev["seed"], ctx.executor
  metrics = {
    "coder": coder_pass_rate(
      models.coder, tok, eval_tasks, samples, sampling, seed, executor
    ),
    "coder_greedy": coder_pass_rate(
      models.coder, tok, eval_tasks, 1, sampling, seed, executor, greedy=True
    ),
    "tester": tester_accuracy(
      models.tester, tok, eval_tasks, samples, sampling, seed, executor
    ),
    "eval_tasks": len(eval_tasks),
  }
  ctx.log(f"[warmstart] coding eval: {json.dumps(metrics)}")
  return metrics


def _save_models(models: _TrainedModels, tok, out_dir: str) -> None:
  """Stage 6's models: the coder as policy/, the tester as reward/."""
  save_qwen(models.coder, os.path.join(out_dir, "policy"), tokenizer=tok)
  save_qwen(models.tester, os.path.join(out_dir, "reward"), tokenizer=tok)


def _report(
  digest: str,
  times: dict,
  data: CodingData,
  models: _TrainedModels,
  metrics: dict,
) -> dict:
  """The marker's report: config hash, stage timings, sizes, SFT curves
  and the evaluation metrics."""
  coder_params = nnx.state(models.coder, nnx.Param)
  return {
    "config_hash": digest,
    "timings_s": times,
    "num_train_tasks": len(data.train_tasks),
    "num_params": int(sum(x.size for x in jax.tree.leaves(coder_params))),
    "curves": {
      "coder_sft": models.coder_info,
      "tester_sft": models.tester_info,
    },
    **metrics,
  }
