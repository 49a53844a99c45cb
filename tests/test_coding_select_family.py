"""The select coding family and the coding warm start's data and settings:
hand-computed answers, every reference style passes its tests in the
sandbox, variants move along the predicates, the demonstrations parse and
are correct, and a warm start built for other settings is refused naming
the build command."""

import json
import random

import pytest

from rla_jax.envs.coding import SandboxExecutor, extract_code
from rla_jax.envs.coding import offline_family as fam
from rla_jax.envs.coding import parse_generated_test as parse_test
from rla_jax.envs.coding import select_family as sf
from rla_jax.errors import ConfigError
from rla_jax.warmstart import coding_data, coding_settings


def test_solver_on_hand_computed_cases():
  stdin = "6 3\n-6 4 9 -1 2 12\n"
  assert sf.solve("sum", ["even"], stdin) == "12"  # -6 + 4 + 2 + 12
  assert sf.solve("count", ["div"], stdin) == "3"  # -6, 9, 12
  assert sf.solve("max", ["odd", "lt"], stdin) == "-1"  # 9 is not < 3
  assert sf.solve("min", ["positive", "ndiv"], stdin) == "2"
  assert sf.solve("max", ["negative", "div", "odd"], stdin) == "0"  # none
  assert sf.solve("sum", [], stdin) == "20"


def test_statement_counts_and_contradictions():
  assert [len(sf.predicate_sets(level)) for level in sf.LEVELS] == [
    1,
    8,
    23,
    28,
  ]
  for level in sf.LEVELS:
    for preds in sf.predicate_sets(level):
      assert not {"even", "odd"} <= set(preds)
      assert not {"negative", "gt"} <= set(preds)
      assert not {"gt", "lt"} <= set(preds)
  with pytest.raises(ValueError, match="bad predicates"):
    sf.build_select_task("sum", ["even", "odd"], 1, 0)
  with pytest.raises(ValueError, match="unknown aggregate"):
    sf.build_select_task("mean", ["even"], 1, 0)


def test_every_reference_style_passes_its_tests_at_every_level():
  tasks = sf.generate_select_tasks(8, seed=3, levels=sf.LEVELS)
  assert {json.loads(t.family_spec)["level"] for t in tasks} == set(sf.LEVELS)
  ex = SandboxExecutor(max_workers=2)
  try:
    for task in tasks:
      progs = [sf.reference_program(task, s) for s in range(sf.NUM_STYLES)]
      assert len(set(progs)) == sf.NUM_STYLES
      passed = ex.run(progs, list(task.tests), task.time_limit_s).passed
      assert passed.all(), (task.task_id, passed)
      # A program that forgets the "0 if none" rule fails test 0 of max/min.
      spec = json.loads(task.family_spec)
      if spec["agg"] in ("max", "min") and spec["preds"]:
        cond = " and ".join(sf.PREDICATES[p][1] for p in spec["preds"])
        wrong = (
          sf._READERS[0] + f"print({spec['agg']}(x for x in a if {cond}))\n"
        )
        assert not ex.run([wrong], list(task.tests), 2.0).passed[0, 0]
  finally:
    ex.close()


def test_tests_show_an_empty_and_a_non_empty_selection():
  for task in sf.generate_select_tasks(20, seed=5):
    preds = json.loads(task.family_spec)["preds"]
    counts = [sf.solve("count", preds, stdin) for stdin, _ in task.tests]
    assert counts[0] == "0" and counts[1] != "0", task.task_id
    assert f"Example input:\n{task.tests[1][0]}" in task.question


def test_variants_move_along_the_predicates():
  rng = random.Random(0)
  task = sf.build_select_task("count", ["even"], 1, 7)
  harder = fam.propose_variant(task, "harder", rng)
  spec = json.loads(harder.family_spec)
  assert spec["level"] == 3 and "even" in spec["preds"]
  assert harder.root_id == task.task_id and harder.parent_id == task.task_id
  easier = fam.propose_variant(task, "easier", rng)
  assert json.loads(easier.family_spec)["preds"] == []
  assert easier.tests != task.tests
  # At level 1 easier shrinks the size, and past size 1 there is nothing.
  top = sf.build_select_task("sum", [], 1, 1)
  assert fam.propose_variant(top, "easier", rng) is None
  full = sf.build_select_task("sum", ["even", "gt", "div"], sf.MAX_SIZE, 1)
  assert fam.propose_variant(full, "harder", rng) is None


def test_split_is_disjoint_and_deterministic():
  train, evals = sf.select_train_eval_split(40, 40, seed=2)
  assert len(train) == len(evals) == 40
  assert not {t.task_id for t in train} & {t.task_id for t in evals}
  again, _ = sf.select_train_eval_split(40, 40, seed=2)
  assert [t.to_json() for t in again] == [t.to_json() for t in train]


def test_demonstrations_parse_and_are_correct():
  tasks = sf.generate_select_tasks(30, seed=4, levels=sf.LEVELS)
  programs, tests = coding_data.make_examples(tasks, seed=0)
  ex = SandboxExecutor(max_workers=2)
  try:
    for task, prog, test in zip(tasks, programs, tests, strict=True):
      code = extract_code(prog.response_text)
      assert code is not None
      assert ex.run([code], list(task.tests), 2.0).passed.all()
      stdin, out = parse_test(test.response_text)
      preds = json.loads(task.family_spec)["preds"]
      agg = json.loads(task.family_spec)["agg"]
      assert out.strip() == sf.solve(agg, preds, stdin)
      assert task.question.strip() in test.prompt_text
  finally:
    ex.close()


def _coding_config(warm_dir=""):
  from configs import coding

  c = coding.get_config()
  c.warmstart.dir = warm_dir
  return c


def test_settings_refuse_unknown_and_derived_keys():
  c = _coding_config()
  c.warmstart.settings.coder_sft.steps = 7
  assert coding_settings.warmstart_settings(c)["coder_sft"]["steps"] == 7
  c.warmstart.settings.unlock()
  c.warmstart.settings.levels = [2]
  with pytest.raises(ConfigError, match="set from config.env.levels"):
    coding_settings.warmstart_settings(c)
  with pytest.raises(ConfigError, match="unknown key 'coder_sft.stepz'"):
    coding_settings.resolve_coding_settings({"coder_sft": {"stepz": 1}})
  with pytest.raises(ConfigError, match="sft_levels"):
    coding_settings.resolve_coding_settings({"sft_levels": [9]})


def test_a_warm_start_for_other_settings_is_refused(tmp_path):
  from rla_jax.rl.loops import make_loop

  warm = tmp_path / "ws"
  for sub in ("tokenizer", "policy", "reward"):
    (warm / sub).mkdir(parents=True)
  for f in (
    "tokenizer/tokenizer.json",
    "policy/config.json",
    "policy/model.safetensors",
    "reward/config.json",
    "reward/model.safetensors",
  ):
    (warm / f).write_text("{}")
  built = coding_settings.warmstart_settings(_coding_config())
  built["coder_sft"]["steps"] = 5
  (warm / "warmstart.json").write_text(
    json.dumps(
      {
        "config_hash": coding_settings.coding_config_hash(built),
        "config": built,
      }
    )
  )
  c = _coding_config(str(warm))
  with pytest.raises(ConfigError) as err:
    make_loop(c, str(tmp_path / "run"), log=lambda msg: None)
  msg = str(err.value)
  assert "python launch/build_warmstart.py --config=coding" in msg
  assert "coder_sft.steps: 5 -> 2000" in msg
  assert not (tmp_path / "run").exists()


def test_the_config_hash_covers_the_answer_formats(monkeypatch):
  cfg = coding_settings.resolve_coding_settings({})
  before = coding_settings.coding_config_hash(cfg)
  monkeypatch.setattr(
    coding_data, "_AGG_WORDS", {**coding_data._AGG_WORDS, "sum": "the total"}
  )
  assert coding_settings.coding_config_hash(cfg) != before
