"""The launchers' command line: config resolution, overrides and bad input.

Most cases run `python launch/tpu_run.py` in a subprocess and check that
bad input fails fast with one clear `error:` line and exit 2 (before
anything is compiled); the others check that any error other than a
ConfigError (a bug) propagates with its traceback instead.
"""

import os
import subprocess
import sys
import types

import ml_collections
import pytest

from rla_jax.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, "launch", "tpu_run.py")


def _run(args, env=None, timeout=240, script=LAUNCH):
  full_env = {**os.environ, **(env or {})}
  return subprocess.run(
    [sys.executable, script, *args],
    capture_output=True,
    text=True,
    timeout=timeout,
    env=full_env,
    cwd=ROOT,
  )


def _assert_one_error_line(proc, message: str) -> None:
  """Exit 2, no traceback, and `message` in the one `error:` line, which
  ends stderr."""
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
  errors = [
    line for line in proc.stderr.splitlines() if line.startswith("error:")
  ]
  assert len(errors) == 1, proc.stderr[-2000:]
  assert message in errors[0], errors[0]
  assert proc.stderr.rstrip().endswith(errors[0])


def test_unknown_config_name():
  proc = _run(["--config=nope", "--workdir=/tmp/unused"])
  assert proc.returncode != 0
  assert "unknown config 'nope'; known configs: alfworld, coding" in (
    proc.stderr
  )


def test_unknown_preset(tmp_path):
  proc = _run(["--config=alfworld:giant", f"--workdir={tmp_path}"])
  assert proc.returncode != 0
  assert "configs/alfworld.py: unknown preset 'giant'" in proc.stderr


def test_unknown_key(tmp_path):
  proc = _run(
    ["--config=alfworld", "--config.env.num_taskz=3", f"--workdir={tmp_path}"]
  )
  assert proc.returncode != 0
  assert "num_taskz" in proc.stderr


def test_unknown_nested_key(tmp_path):
  proc = _run(
    [
      "--config=alfworld",
      "--config.warmstart.settings.no_such_key=1",
      f"--workdir={tmp_path}",
    ]
  )
  assert proc.returncode == 2
  assert "no_such_key" in proc.stderr and "Traceback" not in proc.stderr


def test_every_warm_start_field_is_overridable_and_checked(tmp_path):
  # policy_answer is not set by the preset: it comes from the defaults
  proc = _run(
    [
      "--config=alfworld",
      "--config.warmstart.settings.policy_answer=essay",
      f"--workdir={tmp_path}",
    ],
  )
  assert proc.returncode == 2
  assert (
    "policy_answer must be one of" in proc.stderr and "'essay'" in proc.stderr
  )
  # a field the loop derives (from env.room_size) is not offered
  proc = _run(
    [
      "--config=alfworld",
      "--config.warmstart.settings.room_size=full",
      f"--workdir={tmp_path}",
    ]
  )
  assert proc.returncode == 2 and "room_size" in proc.stderr


def test_fewer_slots_than_tasks_per_step(tmp_path):
  from configs import alfworld

  num_tasks = alfworld.get_config().env.num_tasks
  proc = _run(
    ["--config=alfworld", "--config.env.num_slots=3", f"--workdir={tmp_path}"],
  )
  _assert_one_error_line(
    proc, f"config env.num_slots=3 must be >= env.num_tasks={num_tasks}"
  )


def test_bad_model_dtype_is_refused_before_the_warm_start(tmp_path):
  proc = _run(
    [
      "--config=alfworld",
      "--config.model.dtype=float16",
      f"--workdir={tmp_path}",
    ],
  )
  _assert_one_error_line(
    proc, "config model.dtype='float16' must be one of ['bfloat16', 'float32']"
  )


def test_missing_model_directory(tmp_path):
  proc = _run(
    [
      "--config=coding:smoke",
      f"--workdir={tmp_path}",
      "--config.model.policy_dir=/nonexistent/policy",
      "--config.model.tokenizer_dir=/nonexistent/tok",
      "--config.model.reward_dir=/nonexistent/rm",
    ]
  )
  _assert_one_error_line(
    proc,
    "config.model.tokenizer_dir: directory '/nonexistent/tok' does not exist",
  )


@pytest.mark.slow
def test_incompatible_checkpoint_is_refused(tmp_path):
  work = str(tmp_path / "run")
  first = _run(
    ["--config=coding:smoke", "--config.total_steps=1", f"--workdir={work}"],
  )
  assert first.returncode == 0, first.stderr[-2000:]
  assert os.path.isdir(os.path.join(work, "checkpoints", "0"))
  second = _run(
    [
      "--config=coding:smoke",
      "--config.total_steps=2",
      "--config.env.programs_per_task=3",
      f"--workdir={work}",
    ],
  )
  _assert_one_error_line(second, "was written with config fingerprint")
  assert "use a new --workdir" in second.stderr


def _run_tpu_main_in_process(monkeypatch, tmp_path, make_loop):
  """launch.tpu_run.main with its flags stubbed and rla_jax.rl.loops'
  make_loop replaced by `make_loop` (nothing is parsed or built)."""
  from launch import tpu_run
  from rla_jax.rl import loops

  config = ml_collections.ConfigDict({"name": "alfworld", "preset": "smoke"})
  monkeypatch.setattr(tpu_run, "_CONFIG", types.SimpleNamespace(value=config))
  monkeypatch.setattr(
    tpu_run, "_WORKDIR", types.SimpleNamespace(value=str(tmp_path))
  )
  monkeypatch.setenv("RLA_JAX_XLA_CACHE", "")  # no persistent XLA cache
  monkeypatch.setattr(loops, "make_loop", make_loop)
  tpu_run.main([])


def test_internal_error_in_loop_construction_keeps_its_traceback(
  monkeypatch, tmp_path
):
  def make_loop(config, workdir, **kw):
    raise ValueError("internal bug deep inside loop construction")

  # a plain ValueError is not bad input: no `error:` line, no exit 2
  with pytest.raises(ValueError, match="internal bug deep inside") as info:
    _run_tpu_main_in_process(monkeypatch, tmp_path, make_loop)
  assert not isinstance(info.value, ConfigError)
  assert info.traceback[-1].name == "make_loop"


def test_config_error_in_loop_construction_is_one_line(
  monkeypatch, tmp_path, capsys
):
  def make_loop(config, workdir, **kw):
    raise ConfigError("config env.num_tasks=0 must be >= 1")

  with pytest.raises(SystemExit) as info:
    _run_tpu_main_in_process(monkeypatch, tmp_path, make_loop)
  assert info.value.code == 2
  err = capsys.readouterr().err
  assert err.splitlines()[-1] == "error: config env.num_tasks=0 must be >= 1"
  assert "Traceback" not in err


@pytest.mark.parametrize(
  ("section", "key", "value", "message"),
  [
    ("model", "remat", "some", "config model.remat='some' must be one of"),
    ("model", "param_dtype", "fp8", "config model.param_dtype='fp8'"),
    ("mesh", "data", 0, "config mesh.data=0 must be an int >= 1 or -1"),
    ("mesh", "data", -1, "at most one of mesh.data/fsdp/tensor may be -1"),
  ],
)
def test_common_config_checks_name_the_key(section, key, value, message):
  from configs import coding
  from rla_jax.rl.loops import check_common_config

  config = coding.get_config("smoke")
  check_common_config(config)  # the preset itself is fine
  with config.unlocked():
    config[section][key] = value
  with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
    check_common_config(config)


_ABLATION = os.path.join(ROOT, "launch", "ablation.py")

# Runs launch/ablation.py's main with rla_jax.rl.loops.make_loop replaced by
# one raising the exception named by argv[1] (test-only: the product code
# has no such hook).
_ABLATION_WITH_FAILING_LOOP = """
import sys
from absl import app
from launch import ablation
from rla_jax.errors import ConfigError
from rla_jax.rl import loops
kind = sys.argv.pop(1)
def make_loop(config, workdir, **kw):
  raise {"config": ConfigError, "bug": ValueError}[kind](f"{kind} in make_loop")
loops.make_loop = make_loop
app.run(ablation.main, flags_parser=ablation._parse_flags)
"""


def _run_ablation_with_failing_loop(kind, tmp_path):
  full_env = {**os.environ, "RLA_JAX_XLA_CACHE": ""}
  return subprocess.run(
    [
      sys.executable,
      "-c",
      _ABLATION_WITH_FAILING_LOOP,
      kind,
      f"--config={os.path.join(ROOT, 'configs', 'alfworld.py')}:smoke",
      f"--out={tmp_path}",
      "--stages=Policy",
    ],
    capture_output=True,
    text=True,
    timeout=240,
    env=full_env,
    cwd=ROOT,
  )


# Runs launch/ablation.py's main with a stand-in loop that only writes a
# run's metrics (start and final evaluation) and says it ran: the runner's
# bookkeeping, not the loop, is under test.
_ABLATION_WITH_METRICS_ONLY_LOOP = """
from absl import app
from launch import ablation
from rla_jax.metrics import MetricsWriter
from rla_jax.rl import loops
class MetricsOnlyLoop:
  def __init__(self, config, workdir):
    self.config, self.workdir = config, workdir
  def run(self):
    print("loop ran", self.workdir)
    with MetricsWriter(self.workdir, display_stream=None) as w:
      for step in range(self.config.total_steps + 1):
        ends = step in (0, self.config.total_steps)
        w.write(step, {"eval/in_distribution_success": 0.25 + 0.1 * step}
                if ends else {"train/rollout_accuracy": 0.5})
loops.make_loop = lambda config, workdir, **kw: MetricsOnlyLoop(config, workdir)
app.run(ablation.main, flags_parser=ablation._parse_flags)
"""


def test_ablation_reads_a_finished_run_instead_of_running_it(tmp_path):
  def ablation(*extra):
    return subprocess.run(
      [
        sys.executable,
        "-c",
        _ABLATION_WITH_METRICS_ONLY_LOOP,
        f"--config={os.path.join(ROOT, 'configs', 'alfworld.py')}:smoke",
        f"--out={tmp_path}",
        "--stages=Policy,+Judge",
        *extra,
      ],
      capture_output=True,
      text=True,
      timeout=240,
      env={**os.environ, "RLA_JAX_XLA_CACHE": ""},
      cwd=ROOT,
    )

  first = ablation()
  assert first.returncode == 0, first.stderr[-2000:]
  assert first.stdout.count("loop ran") == 2
  assert os.path.exists(tmp_path / "Policy" / "seed0" / "run_record.json")
  table = (tmp_path / "ABLATION.md").read_text()
  # Carried to another machine without checkpoints: read, not run again.
  second = ablation()
  assert second.returncode == 0, second.stderr[-2000:]
  assert second.stdout.count("loop ran") == 0
  assert "finished earlier" in second.stderr
  assert (tmp_path / "ABLATION.md").read_text().split("wall time")[1].split(
    "\n", 1
  )[1] == table.split("wall time")[1].split("\n", 1)[1]
  # A table of the finished runs only: nothing is run, the rest is listed.
  fourth = ablation("--stages=Policy,+Reward", "--finished_only")
  assert fourth.returncode == 0, fourth.stderr[-2000:]
  assert fourth.stdout.count("loop ran") == 0
  text = (tmp_path / "ABLATION.md").read_text()
  assert "| Policy |" in text and "| +Reward |" not in text
  assert "Not run yet (left out): +Reward seed 0." in text
  none = ablation("--stages=+Env", "--finished_only")
  _assert_one_error_line(none, "none of the runs asked for has finished")
  # The same workdirs under another optimiser are another run: refused.
  third = ablation("--config.optim.policy.learning_rate=1e-5")
  _assert_one_error_line(third, "run_record.json: this run was made with")
  assert third.stdout.count("loop ran") == 0


def test_ablation_refuses_bad_config_and_keeps_tracebacks_of_bugs(tmp_path):
  proc = _run_ablation_with_failing_loop("config", tmp_path)
  _assert_one_error_line(proc, "config in make_loop")
  proc = _run_ablation_with_failing_loop("bug", tmp_path)
  assert proc.returncode not in (0, 2), proc.stderr[-2000:]
  assert "Traceback" in proc.stderr
  assert "ValueError: bug in make_loop" in proc.stderr
  assert "error: bug" not in proc.stderr


def test_ablation_bad_preset_stage_and_seed_are_one_line(tmp_path):
  proc = _run(["--config=coding:giant", f"--out={tmp_path}"], script=_ABLATION)
  _assert_one_error_line(proc, "configs/coding.py: unknown preset 'giant'")
  proc = _run(
    ["--config=coding:smoke", f"--out={tmp_path}", "--stages=Policy,+Nope"],
    script=_ABLATION,
  )
  _assert_one_error_line(proc, "--stages: unknown stage(s) ['+Nope']")
  # The stages set ALFWorld reward keys; another config is refused, not
  # given keys nothing reads.
  proc = _run(
    ["--config=coding:smoke", f"--out={tmp_path}", "--stages=GiGPO"],
    script=_ABLATION,
  )
  _assert_one_error_line(
    proc, "--stages=GiGPO: the config has no key 'reward.use_judge_signal'"
  )
  proc = _run(
    ["--config=coding:smoke", f"--out={tmp_path}", "--seeds=0,one"],
    script=_ABLATION,
  )
  _assert_one_error_line(proc, "--seeds: 'one' is not an integer")
  assert not os.listdir(tmp_path), "a run began"


@pytest.mark.parametrize(
  ("overrides", "message"),
  [
    ({"name": "chess"}, "config.name 'chess': no loop of that name"),
    ({"env.task_types": "fly_to_moon"}, "config env.task_types='fly_to_moon'"),
    ({"env.num_slots": 1}, "config env.num_slots=1 must be >= env.num_tasks=2"),
    ({"eval.rollouts_per_game": 0}, "config eval.rollouts_per_game=0"),
    (
      {"optim.reward.max_samples": -1},
      "config optim.reward.max_samples=-1 must be an int >= 0",
    ),
    ({"reward.step_signal": "oracle"}, "config reward.step_signal='oracle'"),
    (
      {"reward.step_signal": "expert"},
      "replaces the judge's votes by the expert's step labels: set "
      "reward.train_rm=False",
    ),
    (
      {"reward.step_signal": "expert_columns"},
      "config reward.step_signal='expert_columns' replaces the judge's votes",
    ),
    (
      {"reward.advantage": "gigpo"},
      "config.reward.advantage='gigpo' is step credit without a judge",
    ),
    (
      {"warmstart.settings.rm_init": "magic"},
      "warm-start config: rm_init must be",
    ),
    (
      {"model.tokenizer_dir": "/nonexistent/tok", "model.policy_dir": "/x"},
      "config.model.tokenizer_dir: directory '/nonexistent/tok' does not",
    ),
  ],
)
def test_make_loop_raises_config_error_naming_the_key(
  overrides, message, tmp_path
):
  from configs import alfworld
  from rla_jax.rl.loops import make_loop

  config = alfworld.get_config("smoke")
  for dotted, value in overrides.items():
    *path, last = dotted.split(".")
    node = config
    for part in path:
      node = node[part]
    node[last] = value
  with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
    make_loop(config, str(tmp_path / "run"), log=lambda msg: None)
