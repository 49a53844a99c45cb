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

import dataclasses
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
  enable_compilation_cache()
  base = _CONFIG.value
  try:  # every stage's keys exist in the config, before any run
    for stage in _STAGES.value:
      _stage_config(base, stage, 0)
  except ConfigError as e:
    fail(e)
  records, t_start = AblationRecords(), time.time()
  for stage in _STAGES.value:
    records.start_stage(stage)
    for seed in _SEEDS.value:
      config = _stage_config(base, stage, int(seed))
      # Same seed and warm start: the evaluation before any update is the
      # same for every stage (deterministic), so only the first stage run
      # of a seed measures it; later stages reuse that row, unless it came
      # from the recorded start evaluation: then every stage replays and
      # loads it (seconds, not minutes) and logs its own paired changes.
      config.eval.at_start = records.measures_start(seed)
      seconds = records.mean_step_seconds(seed)
      if stage == "SFT" and seconds:
        config.continued_sft.seconds = seconds  # the same wall time
        log(f"ablation: SFT for {seconds:.1f} s per step (RL runs' mean)")
      workdir = os.path.join(_OUT.value, stage.strip("+"), f"seed{seed}")
      if _run_or_read(stage, seed, config, workdir):
        records.add(stage, seed, workdir)
      else:
        records.missing.append(f"{stage} seed {seed}")
  if not records.results["Before"]:
    fail(
      ConfigError(
        f"--out={_OUT.value}: none of the runs asked for has finished"
      )
    )
  import jax

  if jax.process_index() == 0:  # one writer on a multi-host run
    _write_outputs(records, base, time.time() - t_start)


def _stage_config(base, stage: str, seed: int):
  """The base config with `seed` and the stage's settings (ConfigError
  naming the key if the config has none of that name)."""
  config = base.copy_and_resolve_references()
  config.seed = seed
  for k, v in ALL_STAGES[stage].items():
    _set(config, k, v, stage)
  return config


@dataclasses.dataclass
class AblationRecords:
  """What the finished (stage, seed) runs give the table and the curves.

  results: stage -> per-seed final metrics ("Before": each seed's
  evaluation before any update); curves: stage -> per-seed metric
  histories; end_outcomes: stage -> seed -> split -> [N] final per-run
  outcomes; judge_evals: stage -> seed -> judge_eval.json's "all" table;
  missing: runs left out (--finished_only).
  """

  results: dict = dataclasses.field(default_factory=lambda: {"Before": []})
  curves: dict = dataclasses.field(default_factory=dict)
  end_outcomes: dict = dataclasses.field(default_factory=dict)
  judge_evals: dict = dataclasses.field(default_factory=dict)
  missing: list = dataclasses.field(default_factory=list)
  # seed -> metrics row 0 (the evaluation before any update)
  before: dict = dataclasses.field(default_factory=dict)
  # seed -> wall seconds of its RL stage runs' steps
  step_seconds: dict = dataclasses.field(default_factory=dict)

  def start_stage(self, stage: str) -> None:
    self.results[stage], self.curves[stage] = [], []

  def measures_start(self, seed: str) -> bool:
    """Whether a run of this seed evaluates before training: its first
    run, or every run when that evaluation is the recorded one."""
    from rla_jax.metrics.keys import EVAL_START_RECORDED

    row = self.before.get(seed)
    return row is None or row.get(EVAL_START_RECORDED) == 1

  def mean_step_seconds(self, seed: str) -> float | None:
    """The mean RL step time of the seed's (non-SFT) runs read so far."""
    seconds = self.step_seconds.get(seed)
    return sum(seconds) / len(seconds) if seconds else None

  def add(self, stage: str, seed: str, workdir: str) -> None:
    """Reads a finished run's metrics, final outcomes and judge_eval.json
    (if any; `launch/judge_eval.py`)."""
    from rla_jax.metrics import MetricsWriter, last_values, rl_step_seconds
    from rla_jax.rl.evaluation import read_run_outcomes

    history = MetricsWriter.read_history(workdir)
    if seed not in self.before:
      if not history or not any(k.startswith("eval/") for k in history[0]):
        raise RuntimeError(
          f"{workdir}: metrics row 0 has no evaluation "
          "before training (was eval.at_start off?)"
        )
      self.before[seed] = history[0]
      self.results["Before"].append(
        {k: v for k, v in history[0].items() if k.startswith("eval/")}
      )
    elif not history or history[0].get("step") != 0:
      history = [self.before[seed]] + history
    if stage != "SFT":
      self.step_seconds.setdefault(seed, []).extend(rl_step_seconds(history))
    self.curves[stage].append(history)
    rows = read_run_outcomes(workdir)
    if rows and max(rows) > 0:  # the final evaluation's per-run outcomes
      self.end_outcomes.setdefault(stage, {})[seed] = rows[max(rows)]
    self.results[stage].append(last_values(history))
    judged = os.path.join(workdir, "judge_eval.json")
    if os.path.exists(judged):
      with open(judged) as f:
        self.judge_evals.setdefault(stage, {})[seed] = json.load(f)["all"]


def _write_outputs(records: AblationRecords, base, seconds: float) -> None:
  """table.md, ablation_curves.png and ABLATION.md in --out, in Table-1
  order whatever order the stages ran in; prints the table."""
  from rla_jax.metrics import plot_ablation_curves, write_ablation_table

  results = {
    "Before": records.results["Before"],
    **{s: records.results[s] for s in ALL_STAGES if records.results.get(s)},
  }
  curves = {s: records.curves[s] for s in ALL_STAGES if records.curves.get(s)}
  os.makedirs(_OUT.value, exist_ok=True)
  table = write_ablation_table(
    results,
    os.path.join(_OUT.value, "table.md"),
    records.end_outcomes,
    records.judge_evals,
  )
  plot_ablation_curves(curves, os.path.join(_OUT.value, "ablation_curves.png"))
  command = " ".join(["python"] + (_ARGV or sys.argv))  # as typed
  with open(os.path.join(_OUT.value, "ABLATION.md"), "w") as f:
    f.write(
      f"# Ablation ({base.name}:{base.preset})\n\n"
      f"Command: `{command}`\n\nSeeds: {', '.join(_SEEDS.value)}; "
      f"steps per run: {base.total_steps}; this invocation's wall time "
      f"{seconds / 60:.1f} min.\n\n{table}\n"
    )
    if records.missing:
      f.write(f"\nNot run yet (left out): {', '.join(records.missing)}.\n")
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
