"""Component ablation in the layout of the paper's Table 1.

Runs the same config, seeds and budget in four stages:
  Policy   outcome-only policy training (R = O), no judge training, no env
  +Judge   + the step-wise judge signal (R = O + mean S), judge frozen
  +Reward  + judge training by consistency feedback
  +Env     + environment adaptation (full RLAnything)
and a "Before" row (every run's evaluation before any update). Extra
rows, run when named in --stages (e.g. --stages=Policy,GiGPO):
  GiGPO    outcome-only step credit without a judge: steps of one task
           group with identical prompts standardised together
           (reward.advantage="gigpo", as verl-agent on ALFWorld)
  ExpertS  +Judge with the judge's votes replaced by the expert's step
           labels (reward.step_signal="expert"): the step signal's bound
  ExpertC  ExpertS on only the step columns +Judge judges and trains on
           (reward.step_signal="expert_columns"): the labels without
           ExpertS's wider coverage of steps
  SFT      continued SFT on the warm start's demonstrations in place of
           every RL step (continued_sft.enabled), each for the mean RL
           step time of the seed's earlier stage runs (list it after
           them; alone it uses continued_sft.seconds or .updates)
Writes
ABLATION.md (table + command), ablation_curves.png and per-run workdirs;
a run's judge_eval.json (launch/judge_eval.py, run after it) adds its
judge change to the table.
A finished run leaves a record of its config (run_record.json): a later
invocation reads that run from its metrics and final outcomes instead of
running it again (so an ablation can span sessions or machines by
carrying those three small files; rla_jax.metrics.run_record), and
refuses a record of another config by name.

  python launch/ablation.py --config=alfworld --seeds=0,1 \
      --out=runs/ablation [--config.total_steps=8 ...]
"""

from __future__ import annotations

import json
import os
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from absl import app, flags
from ml_collections import config_flags

from launch.cli import (
  enable_compilation_cache,
  fail,
  log,
  parse_flags_or_fail,
  resolve_config_arg,
)
from rla_jax.errors import ConfigError

STAGES = {
  "Policy": {
    "reward.use_judge_signal": False,
    "reward.train_rm": False,
    "adaptation.enabled": False,
  },
  "+Judge": {
    "reward.use_judge_signal": True,
    "reward.train_rm": False,
    "adaptation.enabled": False,
  },
  "+Reward": {
    "reward.use_judge_signal": True,
    "reward.train_rm": True,
    "adaptation.enabled": False,
  },
  "+Env": {
    "reward.use_judge_signal": True,
    "reward.train_rm": True,
    "adaptation.enabled": True,
  },
}
EXTRA_STAGES = {
  "GiGPO": {
    "reward.use_judge_signal": False,
    "reward.train_rm": False,
    "reward.advantage": "gigpo",
    "adaptation.enabled": False,
  },
  "ExpertS": {
    "reward.use_judge_signal": True,
    "reward.step_signal": "expert",
    "reward.train_rm": False,
    "adaptation.enabled": False,
  },
  "ExpertC": {
    "reward.use_judge_signal": True,
    "reward.step_signal": "expert_columns",
    "reward.train_rm": False,
    "adaptation.enabled": False,
  },
  "SFT": {
    "continued_sft.enabled": True,
    "reward.use_judge_signal": False,
    "reward.train_rm": False,
    "adaptation.enabled": False,
  },
}
ALL_STAGES = {**STAGES, **EXTRA_STAGES}

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Base config.", lock_config=False
)
_SEEDS = flags.DEFINE_list("seeds", ["0"], "Seeds (one run per stage each).")
_OUT = flags.DEFINE_string("out", "runs/ablation", "Output directory.")
_STAGES = flags.DEFINE_list(
  "stages", list(STAGES), f"Stages to run (extra: {list(EXTRA_STAGES)})."
)
_FINISHED_ONLY = flags.DEFINE_bool(
  "finished_only",
  False,
  "Run nothing: the table and curves of the runs already finished in "
  "--out (the others are listed as not run yet).",
)

# The command as typed, before --config is rewritten (when run as a script;
# a caller of main gets sys.argv as it stands).
_ARGV: list[str] = []


def _set(config, dotted: str, value, stage: str) -> None:
  """config.<dotted> = value; ConfigError if the config has no such key
  (a stage made for another setting, e.g. GiGPO with --config=coding)."""
  *path, last = dotted.split(".")
  node = config
  for p in path + [last]:
    if p not in node:
      raise ConfigError(
        f"--stages={stage}: the config has no key {dotted!r} "
        f"(stage {stage} sets it)"
      )
    parent, node = node, node[p]
  parent[last] = value


def check_stages_and_seeds(stages: list[str], seeds: list[str]) -> None:
  """Raises ConfigError naming the flag of an unknown stage or a seed that
  is not an integer (before any run starts)."""
  unknown = [s for s in stages if s not in ALL_STAGES]
  if unknown:
    raise ConfigError(
      f"--stages: unknown stage(s) {unknown}; known: {list(ALL_STAGES)}"
    )
  for seed in seeds:
    try:
      int(seed)
    except ValueError:
      raise ConfigError(f"--seeds: {seed!r} is not an integer") from None


def main(argv):
  del argv
  try:
    check_stages_and_seeds(_STAGES.value, _SEEDS.value)
  except ConfigError as e:
    fail(e)
  import jax

  from rla_jax.metrics import (
    MetricsWriter,
    last_values,
    plot_ablation_curves,
    rl_step_seconds,
    write_ablation_table,
  )
  from rla_jax.metrics.keys import EVAL_START_RECORDED
  from rla_jax.rl.evaluation import read_run_outcomes

  enable_compilation_cache()
  base = _CONFIG.value
  try:  # every stage's keys exist in the config, before any run
    for stage in _STAGES.value:
      probe = base.copy_and_resolve_references()
      for k, v in ALL_STAGES[stage].items():
        _set(probe, k, v, stage)
  except ConfigError as e:
    fail(e)
  results, curves = {"Before": []}, {}
  before = {}  # seed -> metrics row 0 (evaluation before any update)
  recorded = {}  # seed -> whether that row is the recorded start evaluation
  end_outcomes = {}  # stage -> seed -> split -> [N] final per-run outcomes
  step_seconds = {}  # seed -> wall seconds of its RL stage runs' steps
  missing = []  # (with --finished_only) the runs not finished yet
  judge_evals = {}  # stage -> seed -> judge_eval.json's "all" table
  t_start = time.time()
  for stage in _STAGES.value:
    results[stage], curves[stage] = [], []
    for seed in _SEEDS.value:
      config = base.copy_and_resolve_references()
      config.seed = int(seed)
      for k, v in ALL_STAGES[stage].items():
        _set(config, k, v, stage)
      # Same seed and warm start: the evaluation before any update is the
      # same for every stage (deterministic), so only the first stage run
      # of a seed measures it; later stages reuse that row, unless it came
      # from the recorded start evaluation: then every stage replays and
      # loads it (seconds, not minutes) and logs its own paired changes.
      config.eval.at_start = seed not in before or recorded.get(seed, False)
      if stage == "SFT" and step_seconds.get(seed):
        seconds = sum(step_seconds[seed]) / len(step_seconds[seed])
        config.continued_sft.seconds = seconds  # the same wall time
        log(f"ablation: SFT for {seconds:.1f} s per step (RL runs' mean)")
      workdir = os.path.join(_OUT.value, stage.strip("+"), f"seed{seed}")
      if not _run_or_read(stage, seed, config, workdir):
        missing.append(f"{stage} seed {seed}")
        continue
      history = MetricsWriter.read_history(workdir)
      if seed not in before:
        if not history or not any(k.startswith("eval/") for k in history[0]):
          raise RuntimeError(
            f"{workdir}: metrics row 0 has no evaluation "
            "before training (was eval.at_start off?)"
          )
        before[seed] = history[0]
        recorded[seed] = history[0].get(EVAL_START_RECORDED) == 1
        results["Before"].append(
          {k: v for k, v in history[0].items() if k.startswith("eval/")}
        )
      elif not history or history[0].get("step") != 0:
        history = [before[seed]] + history
      if stage != "SFT":
        step_seconds.setdefault(seed, []).extend(rl_step_seconds(history))
      curves[stage].append(history)
      rows = read_run_outcomes(workdir)
      if rows and max(rows) > 0:  # the final evaluation's per-run outcomes
        end_outcomes.setdefault(stage, {})[seed] = rows[max(rows)]
      results[stage].append(last_values(history))
      judged = os.path.join(workdir, "judge_eval.json")
      if os.path.exists(judged):  # launch/judge_eval.py's measurement
        with open(judged) as f:
          judge_evals.setdefault(stage, {})[seed] = json.load(f)["all"]
  if not results["Before"]:
    fail(
      ConfigError(
        f"--out={_OUT.value}: none of the runs asked for has finished"
      )
    )
  # Table and curves in Table-1 order, whatever order the stages ran in.
  results = {
    "Before": results["Before"],
    **{s: results[s] for s in ALL_STAGES if results.get(s)},
  }
  curves = {s: curves[s] for s in ALL_STAGES if curves.get(s)}
  if jax.process_index() != 0:  # one writer on a multi-host run
    return
  os.makedirs(_OUT.value, exist_ok=True)
  table = write_ablation_table(
    results, os.path.join(_OUT.value, "table.md"), end_outcomes, judge_evals
  )
  plot_ablation_curves(curves, os.path.join(_OUT.value, "ablation_curves.png"))
  command = " ".join(["python"] + (_ARGV or sys.argv))  # as typed
  with open(os.path.join(_OUT.value, "ABLATION.md"), "w") as f:
    f.write(
      f"# Ablation ({base.name}:{base.preset})\n\n"
      f"Command: `{command}`\n\nSeeds: {', '.join(_SEEDS.value)}; "
      f"steps per run: {base.total_steps}; this invocation's wall time "
      f"{(time.time() - t_start) / 60:.1f} min.\n\n{table}\n"
    )
    if missing:
      f.write(f"\nNot run yet (left out): {', '.join(missing)}.\n")
  print(table)


def _run_or_read(stage: str, seed: str, config, workdir: str) -> bool:
  """Runs one (stage, seed) into workdir, or reads it if it finished
  earlier with this config (its run_record.json). With --finished_only a
  run not finished yet is left out (returns False) instead of run. A bad
  config or a record of another config ends the ablation with one line;
  any other error is a bug and keeps its traceback."""
  import jax

  from rla_jax.metrics.run_record import finished_run, write_run_record
  from rla_jax.rl.loops import make_loop

  try:
    if finished_run(workdir, config):
      log(
        f"ablation: stage {stage}, seed {seed}: finished earlier in "
        f"{workdir}; read, not run again"
      )
      return True
    if _FINISHED_ONLY.value:
      log(f"ablation: stage {stage}, seed {seed}: not run yet; left out")
      return False
    log(f"ablation: stage {stage}, seed {seed} -> {workdir}")
    make_loop(config, workdir, log=log).run()
  except ConfigError as e:
    fail(e)
  if jax.process_index() == 0:
    write_run_record(workdir, config, stage=stage, seed=int(seed))
  return True


def _parse_flags(argv: list[str]) -> list[str]:
  """Parses flags; a bad config file, preset or override is one message."""
  return parse_flags_or_fail(argv, _CONFIG)


if __name__ == "__main__":
  _ARGV[:] = sys.argv
  sys.argv = resolve_config_arg(sys.argv)
  app.run(main, flags_parser=_parse_flags)
