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

import json
import os
import random
from collections.abc import Callable

import jax
import numpy as np
from flax import nnx

from rla_jax.envs.coding import SandboxExecutor, extract_code
from rla_jax.envs.coding import parse_generated_test as parse_test
from rla_jax.envs.coding import select_family as sf
from rla_jax.models import Qwen, save_qwen
from rla_jax.rl import agent_text
from rla_jax.tokenizer import load_tokenizer
from rla_jax.warmstart import sft
from rla_jax.warmstart.bpe_tokenizer import train_bpe_tokenizer
from rla_jax.warmstart.coding_data import (
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
  return [e.prompt_text for e in programs[:300] + tests[:300]] + [
    e.response_text for e in programs + tests
  ]


def _samples(tok, examples) -> list[tuple]:
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
  seed, clock = int(cfg["seed"]), StageClock(log)
  train = sf.generate_select_tasks(
    int(cfg["train_tasks"]), seed, cfg["sft_levels"]
  )
  seen = {t.task_id for t in train}
  held = [
    t
    for t in sf.generate_select_tasks(
      cfg["probe"]["tasks"] + cfg["eval"]["tasks"] + 64,
      seed + 7_000_001,
      cfg["levels"],
    )
    if t.task_id not in seen
  ]
  probe_tasks = held[: cfg["probe"]["tasks"]]
  eval_tasks = held[cfg["probe"]["tasks"] :][: cfg["eval"]["tasks"]]
  programs, tests = make_examples(train, seed + 1)
  clock.lap("data")

  tok_dir = os.path.join(out_dir, "tokenizer")
  train_bpe_tokenizer(
    _tokenizer_corpus(programs, tests), int(cfg["vocab_size"]), tok_dir
  )
  tok = load_tokenizer(tok_dir)
  pad = tok.pad_token_id
  clock.lap("tokenizer")

  model_cfg = model_config(cfg, tok)
  executor = SandboxExecutor(max_workers=2)
  sampling = cfg["sampling"]
  try:

    def probed_stage(name, init, examples, seed_offset, measure, metric):
      """One SFT stage of cfg[name], probed on the probe tasks by
      `measure` and stopped once `metric` reaches the stage's target."""
      st = cfg[name]
      return train_stage(
        store,
        name,
        digest,  # every coding stage is keyed by the whole config
        init,
        _samples(tok, examples),
        sft_config(st),
        seed + seed_offset,
        pad,
        log,
        probe=sft.Probe(
          int(st["eval_every"]),
          lambda m: measure(
            m,
            tok,
            probe_tasks,
            cfg["probe"]["samples"],
            sampling,
            cfg["probe"]["seed"],
            executor,
          ),
          lambda r: r[metric] >= float(st["target"]),
        ),
        checkpoint_every=int(st["eval_every"]),
      )

    coder, coder_info = probed_stage(
      "coder_sft",
      lambda: Qwen(model_cfg, rngs=nnx.Rngs(seed)),
      programs,
      2,
      coder_pass_rate,
      "pass_at_1",
    )
    clock.lap("coder_sft")
    tester, tester_info = probed_stage(
      "tester_sft", lambda: coder, tests, 3, tester_accuracy, "ut_accuracy"
    )
    clock.lap("tester_sft")
    ev = cfg["eval"]
    metrics = {
      "coder": coder_pass_rate(
        coder, tok, eval_tasks, ev["samples"], sampling, ev["seed"], executor
      ),
      "coder_greedy": coder_pass_rate(
        coder, tok, eval_tasks, 1, sampling, ev["seed"], executor, greedy=True
      ),
      "tester": tester_accuracy(
        tester, tok, eval_tasks, ev["samples"], sampling, ev["seed"], executor
      ),
      "eval_tasks": len(eval_tasks),
    }
    log(f"[warmstart] coding eval: {json.dumps(metrics)}")
    clock.lap("eval")
  finally:
    executor.close()
  save_qwen(coder, os.path.join(out_dir, "policy"), tokenizer=tok)
  save_qwen(tester, os.path.join(out_dir, "reward"), tokenizer=tok)
  clock.lap("save")
  times = clock.finish()
  report = {
    "config_hash": digest,
    "timings_s": times,
    "num_train_tasks": len(train),
    "num_params": int(
      sum(x.size for x in jax.tree.leaves(nnx.state(coder, nnx.Param)))
    ),
    "curves": {"coder_sft": coder_info, "tester_sft": tester_info},
    **metrics,
  }
  write_marker(out_dir, digest, cfg, report, provenance)
  log(f"[warmstart] coding done in {times['total']:.1f}s")
  return report
