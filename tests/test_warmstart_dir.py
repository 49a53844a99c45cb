"""The ALFWorld warm start is built by `launch/build_warmstart.py` and only
loaded by the loop: the command's marker and provenance, the loop loading
it without importing the builder, and the refusals (changed settings, a
missing or incomplete directory, bad input to the command) that name the
build command to run."""

import datetime
import json
import os
import shutil
import subprocess
import sys

import pytest

from rla_jax.errors import ConfigError
from rla_jax.warmstart import settings as ws
from rla_jax.warmstart.config import config_hash
from rla_jax.warmstart.directory import MARKER

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "launch", "build_warmstart.py")


def _smoke(warm_dir):
  from configs import alfworld

  c = alfworld.get_config("smoke")
  c.warmstart.dir = warm_dir
  return c


def _git_head() -> str | None:
  proc = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
  )
  return proc.stdout.strip() if proc.returncode == 0 else None


def _run_build(args, timeout=120):
  return subprocess.run(
    [sys.executable, BUILD, *args],
    capture_output=True,
    text=True,
    timeout=timeout,
    cwd=ROOT,
  )


def _one_error_line(proc) -> str:
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
  errors = [s for s in proc.stderr.splitlines() if s.startswith("error:")]
  assert len(errors) == 1, proc.stderr[-2000:]
  return errors[0]


# A subprocess: make_loop on the built warm start, reporting its log and
# whether the builder module was ever imported.
_LOAD_SCRIPT = """
import json, sys
from configs import alfworld
from rla_jax.rl.loops import make_loop
c = alfworld.get_config("smoke")
c.warmstart.dir = sys.argv[1]
lines = []
loop = make_loop(c, sys.argv[2], log=lines.append)
print(json.dumps({
  "log": lines,
  "builder_imported": "rla_jax.warmstart.build" in sys.modules,
  "policy_dir": loop.warm_start.policy_dir,
}))
"""


@pytest.mark.slow
def test_build_command_writes_provenance_and_the_loop_only_loads(
  smoke_warm_start, tmp_path
):
  with open(os.path.join(smoke_warm_start.dir, MARKER)) as f:
    marker = json.load(f)
  settings = ws.resolved_settings(_smoke(smoke_warm_start.dir))
  assert marker["config_hash"] == config_hash(settings)
  assert marker["config"] == json.loads(json.dumps(settings))
  assert marker["report"]["policy"]["num_games"] == 4
  prov = marker["provenance"]
  assert prov["command"] == " ".join(["python", *smoke_warm_start.argv])
  assert prov["commit"] == (_git_head() or "unknown")
  assert prov["dirty"] in (True, False)
  age = datetime.datetime.now(
    datetime.timezone.utc
  ) - datetime.datetime.fromisoformat(prov["date"])
  assert datetime.timedelta(0) <= age < datetime.timedelta(hours=6)
  assert f"--config.warmstart.dir={smoke_warm_start.dir}" in (
    smoke_warm_start.stderr
  )

  proc = subprocess.run(
    [sys.executable, "-c", _LOAD_SCRIPT, smoke_warm_start.dir, str(tmp_path)],
    capture_output=True,
    text=True,
    timeout=300,
    cwd=ROOT,
    env={**os.environ, "PYTHONPATH": ROOT},
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert out["builder_imported"] is False
  assert out["policy_dir"] == os.path.join(smoke_warm_start.dir, "policy")
  loaded = [s for s in out["log"] if s.startswith("warm start: loaded")]
  assert loaded == [
    f"warm start: loaded {smoke_warm_start.dir} (config "
    f"{marker['config_hash'][:12]}, commit {prov['commit'][:12]}"
    f"{' (dirty tree)' if prov['dirty'] else ''}, built {prov['date']})"
  ]


@pytest.mark.slow
def test_a_changed_setting_is_refused_naming_the_rebuild_command(
  smoke_warm_start, tmp_path
):
  from rla_jax.rl.loops import make_loop

  built = _smoke(smoke_warm_start.dir)
  c = _smoke(smoke_warm_start.dir)
  c.warmstart.settings.policy_sft.steps = 13
  c.env.history_steps = 1
  with pytest.raises(ConfigError) as err:
    make_loop(c, str(tmp_path / "run"), log=lambda msg: None)
  msg = str(err.value)
  assert repr(smoke_warm_start.dir) in msg
  for cfg in (built, c):
    assert config_hash(ws.resolved_settings(cfg))[:12] in msg
  assert (
    "python launch/build_warmstart.py --config=alfworld:smoke "
    "--config.env.history_steps=1 "
    "--config.warmstart.settings.policy_sft.steps=13 --out=DIR"
  ) in msg
  assert "policy_sft.steps: 12 -> 13" in msg
  assert not os.path.exists(tmp_path / "run"), "the run began"


def test_a_missing_directory_is_refused_naming_the_build_command(tmp_path):
  from rla_jax.rl.loops import make_loop

  missing = str(tmp_path / "nowhere")
  with pytest.raises(ConfigError) as err:
    make_loop(_smoke(missing), str(tmp_path / "run"), log=lambda msg: None)
  msg = str(err.value)
  assert f"config.warmstart.dir={missing!r}: no warm start there" in msg
  assert (
    f"python launch/build_warmstart.py --config=alfworld:smoke --out={missing}"
  ) in msg
  # a directory without its models: the first missing files are named
  os.makedirs(missing)
  with open(os.path.join(missing, MARKER), "w") as f:
    json.dump({"config_hash": "0" * 64}, f)
  with pytest.raises(ConfigError, match=r"missing tokenizer/tokenizer\.json"):
    make_loop(_smoke(missing), str(tmp_path / "run"), log=lambda msg: None)
  assert not os.path.exists(tmp_path / "run"), "the run began"


def test_the_launcher_refuses_a_missing_warm_start_in_one_line(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      os.path.join(ROOT, "launch", "tpu_run.py"),
      "--config=alfworld",
      f"--config.warmstart.dir={tmp_path / 'ws'}",
      f"--workdir={tmp_path / 'run'}",
    ],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
  )
  line = _one_error_line(proc)
  assert (
    f"build it with: python launch/build_warmstart.py --config=alfworld "
    f"--out={tmp_path / 'ws'}"
  ) in line


def test_derived_fields_are_unknown_keys_in_the_settings():
  c = _smoke("")
  c.warmstart.settings.room_size = "full"  # set from env.room_size
  with pytest.raises(ConfigError, match="unknown key 'room_size'"):
    ws.resolved_settings(c)
  c = _smoke("")
  c.warmstart.seed = 5
  c.env.update(room_size="full", levels=(2,), history_steps=-1)
  got = ws.warmstart_settings(c)
  assert (got["seed"], got["room_size"]) == (5, "full")
  assert (got["levels"], got["history_steps"]) == ([2], None)


def test_warm_start_dir_resolution():
  import rla_jax

  package = os.path.dirname(os.path.abspath(rla_jax.__file__))
  shipped = os.path.join(package, "warmstart", "shipped", "alfworld")
  assert ws.warm_start_dir("") == shipped
  from configs import alfworld

  assert ws.warm_start_dir(alfworld.get_config().warmstart.dir) == shipped
  assert ws.warm_start_dir("runs/ws") == os.path.join(
    os.path.dirname(package), "runs", "ws"
  )
  assert ws.warm_start_dir("/abs/ws") == "/abs/ws"


def test_build_command_refuses_bad_input_before_building(tmp_path):
  line = _one_error_line(
    _run_build(
      [
        "--config=alfworld:smoke",
        "--config.warmstart.settings.rm_init=magic",
        f"--out={tmp_path / 'a'}",
      ]
    )
  )
  assert "warm-start config: rm_init must be" in line
  line = _one_error_line(
    _run_build(
      ["--config=alfworld:smoke", "--config.warmstart.settings.seed=1"]
    )
  )
  assert "unknown config key" in line and "seed" in line
  # coding:smoke uses no warm start (warmstart.dir=""): --out is needed
  line = _one_error_line(_run_build(["--config=coding:smoke"]))
  assert "warmstart.dir is '' (no warm start): pass --out=DIR" in line
  line = _one_error_line(
    _run_build(
      [
        "--config=coding:smoke",
        "--config.warmstart.settings.coder_sft.stepz=1",
        f"--out={tmp_path / 'a'}",
      ]
    )
  )
  assert "unknown config key 'stepz'" in line
  # --reuse_from must name a finished warm start
  line = _one_error_line(
    _run_build(
      [
        "--config=alfworld:smoke",
        f"--reuse_from={tmp_path}",
        f"--out={tmp_path / 'a'}",
      ]
    )
  )
  assert f"--reuse_from={str(tmp_path)!r}: no readable warm start" in line
  # an --out holding another config's warm start is not replaced silently
  other = tmp_path / "other"
  other.mkdir()
  (other / MARKER).write_text(json.dumps({"config_hash": "ab" * 32}))
  line = _one_error_line(
    _run_build(["--config=alfworld:smoke", f"--out={other}"])
  )
  assert "holds a warm start for config abababababab" in line
  assert "--overwrite" in line
  assert sorted(os.listdir(other)) == [MARKER]
  assert not os.path.exists(tmp_path / "a")


@pytest.mark.slow
def test_a_copied_warm_start_loads_from_its_new_place(
  smoke_warm_start, tmp_path
):
  """The marker holds no paths: a warm start moved elsewhere (as the shipped
  one is, into an installed package) loads from there."""
  from rla_jax.warmstart.directory import load_warm_start_dir

  moved = str(tmp_path / "moved")
  shutil.copytree(smoke_warm_start.dir, moved)
  c = _smoke(moved)
  record = load_warm_start_dir(
    ws.warm_start_dir(c.warmstart.dir),
    ws.resolved_settings(c),
    ws.build_command(c),
  )
  assert record.policy_dir == os.path.join(moved, "policy")
  assert record.provenance["command"].startswith(
    "python launch/build_warmstart.py"
  )
