"""JSONL loaders (CURE / CodeContests / LiveCodeBench /
LiveBench) and the TFDS builder without TensorFlow."""

import base64
import json
import pickle
import subprocess
import sys
import textwrap
import zlib

import pytest

from rla_jax.envs.coding import datasets as D
from rla_jax.envs.coding.tasks import Task


def _write(path, rows):
  with open(path, "w") as f:
    for r in rows:
      f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
  return str(path)


def _lcb_private(cases):
  return base64.b64encode(
    zlib.compress(pickle.dumps(json.dumps(cases)))
  ).decode()


CURE_ROW = {
  "question": "Add.",
  "test_input": [f"{i} 1\n" for i in range(10)],
  "test_output": [f"{i + 1}\n" for i in range(10)],
  "test_time_limit": 1,
}
CC_ROW = {
  "name": "cc-1",
  "description": "Double it.",
  "public_tests": {"input": ["2\n"], "output": ["4\n"]},
  "private_tests": {"input": ["3\n"], "output": ["6\n"]},
  "generated_tests": {"input": [], "output": []},
  "time_limit": {"seconds": 3, "nanos": 500000000},
  "difficulty": 2,
}
LCB_ROW = {
  "question_id": "abc300_a",
  "question_title": "t",
  "question_content": "Echo.",
  "difficulty": "easy",
  "public_test_cases": json.dumps(
    [{"input": "x\n", "output": "x\n", "testtype": "stdin"}]
  ),
  "private_test_cases": _lcb_private(
    [{"input": "y\n", "output": "y\n", "testtype": "stdin"}]
  ),
}
LB_ROW = {
  "question_id": "lb-1",
  "turns": ["Full prompt."],
  "original_json": {"question_content": "Echo twice."},
  "public_test_cases": json.dumps(
    [{"input": "a\n", "output": "aa\n", "testtype": "stdin"}]
  ),
  "private_test_cases": "[]",
}


def test_loaders_all_formats(tmp_path):
  cure = D.load_jsonl_tasks(
    _write(tmp_path / "c.jsonl", [CURE_ROW]), "cure"
  ).tasks[0]
  assert (
    cure.task_id == "cure-1"
    and len(cure.tests) == 8
    and cure.tests[7] == ("7 1\n", "8\n")
  )
  assert cure.time_limit_s == 1.0
  cc = D.load_jsonl_tasks(
    _write(tmp_path / "cc.jsonl", [CC_ROW]), "codecontests"
  ).tasks[0]
  assert (cc.task_id, cc.tests, cc.time_limit_s, cc.difficulty) == (
    "cc-1",
    (("2\n", "4\n"), ("3\n", "6\n")),
    3.5,
    2.0,
  )
  lcb = D.load_jsonl_tasks(
    _write(tmp_path / "l.jsonl", [LCB_ROW]), "livecodebench"
  ).tasks[0]
  assert (
    lcb.tests == (("x\n", "x\n"), ("y\n", "y\n"))
    and lcb.difficulty == 1.0
    and lcb.time_limit_s == 6.0
  )
  lb = D.load_jsonl_tasks(
    _write(tmp_path / "lb.jsonl", [LB_ROW]), "livebench"
  ).tasks[0]
  assert lb.question == "Echo twice." and lb.tests == (("a\n", "aa\n"),)


def test_functional_tests_are_reported_as_unsupported(tmp_path):
  row = dict(
    LCB_ROW,
    question_id="lc-1",
    public_test_cases=json.dumps(
      [{"input": "[1,2]", "output": "3", "testtype": "functional"}]
    ),
  )
  rep = D.load_jsonl_tasks(
    _write(tmp_path / "l.jsonl", [row, LCB_ROW]), "livecodebench"
  )
  assert [t.task_id for t in rep.tasks] == ["abc300_a"]
  assert (
    len(rep.unsupported) == 1
    and "l.jsonl:1" in rep.unsupported[0]
    and "functional" in rep.unsupported[0]
  )


@pytest.mark.parametrize(
  "bad, needle",
  [
    ("{not json", "invalid JSON"),
    (
      {"question": "q", "test_input": ["1"], "test_output": []},
      "1 inputs but 0 outputs",
    ),
    ({"test_input": ["1"], "test_output": ["1"]}, "missing key 'question'"),
    (
      {"question": "q", "test_input": "1", "test_output": ["1"]},
      "key 'test_input' must be list",
    ),
    ({"question": "q", "test_input": [], "test_output": []}, "no tests"),
  ],
)
def test_malformed_rows_fail_with_file_and_line(tmp_path, bad, needle):
  path = _write(tmp_path / "bad.jsonl", [CURE_ROW, bad])
  with pytest.raises(D.DatasetFormatError, match=needle) as err:
    D.load_jsonl_tasks(path, "cure")
  assert f"{path}:2" in str(err.value)
  rep = D.load_jsonl_tasks(path, "cure", skip_malformed=True)
  assert (
    len(rep.tasks) == 1
    and len(rep.malformed) == 1
    and rep.malformed[0].startswith(f"{path}:2")
  )


def test_duplicate_ids_and_hostile_pickle_rejected(tmp_path):
  path = _write(
    tmp_path / "dup.jsonl",
    [dict(CURE_ROW, task_id="a"), dict(CURE_ROW, task_id="a")],
  )
  with pytest.raises(
    D.DatasetFormatError, match="dup.jsonl:2: duplicate task id 'a'"
  ):
    D.load_jsonl_tasks(path, "cure")

  class Evil:
    def __reduce__(self):
      return (print, ("pwned",))

  evil = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
  with pytest.raises(D.DatasetFormatError, match="refusing pickled object"):
    D.load_jsonl_tasks(
      _write(tmp_path / "e.jsonl", [dict(LCB_ROW, private_test_cases=evil)]),
      "livecodebench",
    )
  with pytest.raises(ValueError, match="unknown dataset format"):
    D.load_jsonl_tasks(path, "parquet")


# A script run as is in a subprocess: its long lines stay unsplit.
TFDS_SCRIPT = textwrap.dedent("""
    import json, sys
    import importlib.util
    assert importlib.util.find_spec("tensorflow") is None, "tensorflow must not be installed for this test"
    from rla_jax.envs.coding.tfds_builder import prepare_coding_dataset, TaskDataSource
    from rla_jax.envs.coding.datasets import DatasetFormatError
    data_dir, train, test, bad = sys.argv[1:5]
    report = prepare_coding_dataset(data_dir, {"train": [(train, "cure")], "test": [(test, "livecodebench")]})
    try:
        prepare_coding_dataset(data_dir + "_bad", {"train": [(bad, "cure")]})
        bad_error = None
    except DatasetFormatError as e:
        bad_error = str(e)
    skipped = prepare_coding_dataset(data_dir + "_skip", {"train": [(bad, "cure")]}, skip_malformed=True)
    train_ds, test_ds = TaskDataSource(data_dir, "train"), TaskDataSource(data_dir, "test")
    out = {"train": [train_ds[i].to_dict() for i in range(len(train_ds))],
           "test": [t.to_dict() for t in test_ds[list(range(len(test_ds)))]],
           "report": report, "bad_error": bad_error, "skipped": skipped,
           "tf_loaded": "tensorflow" in sys.modules}
    print("RESULT" + json.dumps(out))
""")  # noqa: E501


def test_tfds_builder_prepares_and_reads_back_without_tensorflow(tmp_path):
  from rla_jax.envs.coding.offline_family import generate_offline_tasks

  family = generate_offline_tasks(5, seed=3)
  train_rows = [
    {
      "task_id": t.task_id,
      "question": t.question,
      "test_input": [a for a, _ in t.tests],
      "test_output": [b for _, b in t.tests],
      "test_time_limit": 2,
    }
    for t in family
  ]
  train = _write(tmp_path / "train.jsonl", train_rows)
  test = _write(tmp_path / "test.jsonl", [LCB_ROW])
  bad = _write(tmp_path / "bad.jsonl", [CURE_ROW, "{oops"])
  proc = subprocess.run(
    [
      sys.executable,
      "-c",
      TFDS_SCRIPT,
      str(tmp_path / "tfds"),
      train,
      test,
      bad,
    ],
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.split("RESULT", 1)[1])
  assert out["tf_loaded"] is False
  got = sorted(
    (Task.from_dict(d) for d in out["train"]), key=lambda t: t.task_id
  )
  want = sorted(
    (
      Task(
        task_id=t.task_id, question=t.question, tests=t.tests, time_limit_s=2.0
      )
      for t in family
    ),
    key=lambda t: t.task_id,
  )
  assert got == want
  assert [Task.from_dict(d).tests for d in out["test"]] == [
    (("x\n", "x\n"), ("y\n", "y\n"))
  ]
  assert out["report"] == {"malformed": [], "unsupported": []}
  assert out["bad_error"] is not None and f"{bad}:2" in out["bad_error"]
  assert len(out["skipped"]["malformed"]) == 1 and out["skipped"]["malformed"][
    0
  ].startswith(f"{bad}:2")
