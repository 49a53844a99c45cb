"""Loaders for local JSONL coding datasets -> Task lists.

Formats (``fmt``):
- "cure": Gen-Verse CodeContests_train / LiveBench-ReasonFlux / CURE items:
  {question, test_input[], test_output[], test_time_limit?, task_id|id?}
- "codecontests": DeepMind code_contests rows:
  {name, description, public_tests{input[],output[]}, private_tests{...},
  generated_tests{...}, time_limit{seconds,nanos}?, difficulty?}
- "livecodebench": {question_id, question_title, question_content, difficulty,
  public_test_cases, private_test_cases} where test cases are JSON (or base64 ->
  zlib -> pickle -> JSON) lists of {input, output, testtype}; only "stdin" tests
  are supported.
- "livebench": LiveBench coding rows {question_id, turns[], public_test_cases,
  private_test_cases, original_json{question_content}?} with the LiveCodeBench
  test encoding.

Malformed rows raise ``DatasetFormatError`` naming file and line, unless
``skip_malformed=True``, in which case they are listed in the returned report.
Well-formed rows this project cannot run (functional / LeetCode-style tests) are
always listed in ``report.unsupported``.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import pickle
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rla_jax.envs.coding.tasks import (
  Task,
  TaskFormatError,
  cap_tests,
  difficulty_from_label,
)

FORMATS = ("cure", "codecontests", "livecodebench", "livebench")
DEFAULT_TIME_LIMIT = {
  "cure": 2.0,
  "codecontests": 2.0,
  "livecodebench": 6.0,
  "livebench": 6.0,
}


class DatasetFormatError(ValueError):
  """A dataset row is malformed; the message names file:line and the offending
  key."""


class UnsupportedTaskError(ValueError):
  """A well-formed row whose tests cannot be run as stdin/stdout programs."""


@dataclasses.dataclass
class LoadReport:
  tasks: list[Task]
  malformed: list[str] = dataclasses.field(
    default_factory=list
  )  # "file:line: reason"
  unsupported: list[str] = dataclasses.field(default_factory=list)


def _require(row: Mapping, key: str, kind: type | tuple) -> Any:
  if key not in row:
    raise DatasetFormatError(f"missing key {key!r}")
  value = row[key]
  if not isinstance(value, kind):
    raise DatasetFormatError(
      f"key {key!r} must be {getattr(kind, '__name__', kind)}, got "
      f"{type(value).__name__}"
    )
  return value


def _str_list(row: Mapping, key: str) -> list[str]:
  values = _require(row, key, list)
  if not all(isinstance(v, str) for v in values):
    raise DatasetFormatError(f"key {key!r} must be a list of strings")
  return values


def _paired(
  inputs: list[str], outputs: list[str], where: str
) -> list[tuple[str, str]]:
  if len(inputs) != len(outputs):
    raise DatasetFormatError(
      f"{where}: {len(inputs)} inputs but {len(outputs)} outputs"
    )
  return list(zip(inputs, outputs, strict=True))


class _StrOnlyUnpickler(pickle.Unpickler):
  """LiveCodeBench pickles a JSON string: refuse anything that would import or
  call code."""

  def find_class(self, module, name):
    raise DatasetFormatError(
      f"refusing pickled object {module}.{name} in test cases"
    )


def decode_lcb_test_cases(value: Any, key: str) -> list[dict]:
  """LiveCodeBench test cases: a JSON list, or
  base64(zlib(pickle(JSON string)))."""
  if isinstance(value, list):
    cases = value
  elif isinstance(value, str):
    try:
      cases = json.loads(value) if value.strip() else []
    except ValueError:
      try:
        raw = zlib.decompress(base64.b64decode(value, validate=True))
        cases = json.loads(_StrOnlyUnpickler(io.BytesIO(raw)).load())
      except (
        ValueError,
        zlib.error,
        pickle.UnpicklingError,
        TypeError,
        EOFError,
      ) as e:
        raise DatasetFormatError(
          f"key {key!r}: not JSON nor base64/zlib/pickle test cases ({e})"
        ) from e
  else:
    raise DatasetFormatError(
      f"key {key!r} must be a list or an encoded string, got "
      f"{type(value).__name__}"
    )
  if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
    raise DatasetFormatError(f"key {key!r} must decode to a list of objects")
  for c in cases:
    if not isinstance(c.get("input"), str) or not isinstance(
      c.get("output"), str
    ):
      raise DatasetFormatError(
        f"key {key!r}: every case needs string 'input' and 'output'"
      )
  return cases


def _lcb_tests(row: Mapping) -> list[tuple[str, str]]:
  cases = decode_lcb_test_cases(
    row.get("public_test_cases", []), "public_test_cases"
  )
  cases += decode_lcb_test_cases(
    row.get("private_test_cases", []), "private_test_cases"
  )
  kinds = {c.get("testtype", "stdin") for c in cases}
  if kinds - {"stdin"}:
    raise UnsupportedTaskError(
      f"test types {sorted(kinds)}: only stdin tests are supported"
    )
  return [(c["input"], c["output"]) for c in cases]


@dataclasses.dataclass(frozen=True)
class _RowFields:
  """A row's task fields as its format gives them; time_limit_s is the
  row's own limit or the format's default."""

  task_id: str
  question: str
  tests: list[tuple[str, str]]
  time_limit_s: float
  difficulty: float


def _check_format(fmt: str) -> None:
  """ValueError unless `fmt` is one of FORMATS."""
  if fmt not in FORMATS:
    raise ValueError(
      f"unknown dataset format {fmt!r}; expected one of {FORMATS}"
    )


def _cure_fields(row: Mapping, default_id: str) -> _RowFields:
  """The task fields of a CURE row."""
  question = _require(row, "question", str)
  tests = _paired(
    _str_list(row, "test_input"),
    _str_list(row, "test_output"),
    "test_input/test_output",
  )
  task_id = str(row.get("task_id", row.get("id", default_id)))
  limit = DEFAULT_TIME_LIMIT["cure"]
  if "test_time_limit" in row:
    limit = _require(row, "test_time_limit", (int, float))
  difficulty = difficulty_from_label(row.get("difficulty"))
  return _RowFields(task_id, question, tests, limit, difficulty)


def _codecontests_fields(row: Mapping, default_id: str) -> _RowFields:
  """The task fields of a code_contests row."""
  question = _require(row, "description", str)
  task_id = str(row.get("name", default_id))
  tests = _codecontests_tests(row)
  limit = _codecontests_time_limit(row)
  difficulty = difficulty_from_label(row.get("difficulty"))
  return _RowFields(task_id, question, tests, limit, difficulty)


def _codecontests_tests(row: Mapping) -> list[tuple[str, str]]:
  """The public, private and generated tests of a code_contests row."""
  tests = []
  for key in ("public_tests", "private_tests", "generated_tests"):
    group = row.get(key, {"input": [], "output": []})
    if not isinstance(group, dict):
      raise DatasetFormatError(
        f"key {key!r} must be an object with input/output lists"
      )
    tests += _paired(_str_list(group, "input"), _str_list(group, "output"), key)
  return tests


def _codecontests_time_limit(row: Mapping) -> float:
  """A code_contests row's time_limit {seconds, nanos} in seconds, or the
  format's default when it is missing or zero."""
  tl = row.get("time_limit")
  if isinstance(tl, dict) and (tl.get("seconds") or tl.get("nanos")):
    return float(tl.get("seconds") or 0) + float(tl.get("nanos") or 0) / 1e9
  return DEFAULT_TIME_LIMIT["codecontests"]


def _livecodebench_fields(row: Mapping, default_id: str) -> _RowFields:
  """The task fields of a LiveCodeBench row (its id is required)."""
  del default_id
  return _lcb_style_fields(
    row, "livecodebench", lambda r: _require(r, "question_content", str)
  )


def _livebench_fields(row: Mapping, default_id: str) -> _RowFields:
  """The task fields of a LiveBench coding row (its id is required)."""
  del default_id
  return _lcb_style_fields(row, "livebench", _livebench_question)


def _lcb_style_fields(
  row: Mapping, fmt: str, question_of: Callable[[Mapping], str]
) -> _RowFields:
  """The task fields of a row with LiveCodeBench ids, test cases and
  difficulty; `question_of` reads the format's question."""
  task_id = str(_require(row, "question_id", (str, int)))
  question = question_of(row)
  tests = _lcb_tests(row)
  difficulty = difficulty_from_label(
    row.get("difficulty", (row.get("original_json") or {}).get("difficulty"))
  )
  return _RowFields(
    task_id, question, tests, DEFAULT_TIME_LIMIT[fmt], difficulty
  )


def _livebench_question(row: Mapping) -> str:
  """A LiveBench row's original_json.question_content, else its turns[0]."""
  original = (
    row.get("original_json")
    if isinstance(row.get("original_json"), dict)
    else {}
  )
  question = original.get("question_content") or (row.get("turns") or [None])[0]
  if not isinstance(question, str):
    raise DatasetFormatError(
      "needs original_json.question_content or a string turns[0]"
    )
  return question


_ROW_FIELDS: dict[str, Callable[[Mapping, str], _RowFields]] = {
  "cure": _cure_fields,
  "codecontests": _codecontests_fields,
  "livecodebench": _livecodebench_fields,
  "livebench": _livebench_fields,
}


def row_to_task(
  row: Any, fmt: str, default_id: str, time_limit_s: float | None = None
) -> Task:
  """One parsed JSON row -> Task (raises DatasetFormatError /
  UnsupportedTaskError)."""
  _check_format(fmt)
  if not isinstance(row, dict):
    raise DatasetFormatError(
      f"row must be a JSON object, got {type(row).__name__}"
    )
  fields = _ROW_FIELDS[fmt](row, default_id)
  if not fields.tests:
    raise DatasetFormatError("row has no tests")
  return _task_from_fields(fields, time_limit_s)


def _task_from_fields(fields: _RowFields, time_limit_s: float | None) -> Task:
  """The Task of `fields`, its time limit overridden by `time_limit_s` unless
  None; DatasetFormatError for fields Task refuses."""
  limit = fields.time_limit_s if time_limit_s is None else time_limit_s
  try:
    return Task(
      task_id=fields.task_id,
      question=fields.question,
      tests=cap_tests(fields.tests),
      time_limit_s=limit,
      difficulty=fields.difficulty,
    )
  except TaskFormatError as e:
    raise DatasetFormatError(str(e)) from None


def _iter_lines(path: str) -> Iterable[tuple[int, str]]:
  with open(path, encoding="utf-8") as f:
    for line_no, line in enumerate(f, start=1):
      if line.strip():
        yield line_no, line


def load_jsonl_tasks(
  path: str,
  fmt: str,
  *,
  skip_malformed: bool = False,
  time_limit_s: float | None = None,
) -> LoadReport:
  """Read one JSONL file of ``fmt`` rows into Tasks (tests capped at 8; ids must
  be unique)."""
  _check_format(fmt)
  report = LoadReport(tasks=[])
  seen: set[str] = set()
  for line_no, line in _iter_lines(path):
    where = f"{path}:{line_no}"
    try:
      try:
        row = json.loads(line)
      except ValueError as e:
        raise DatasetFormatError(f"invalid JSON ({e})") from None
      task = row_to_task(
        row, fmt, default_id=f"{fmt}-{line_no}", time_limit_s=time_limit_s
      )
      if task.task_id in seen:
        raise DatasetFormatError(f"duplicate task id {task.task_id!r}")
    except UnsupportedTaskError as e:
      report.unsupported.append(f"{where}: {e}")
      continue
    except DatasetFormatError as e:
      if not skip_malformed:
        raise DatasetFormatError(f"{where}: {e}") from None
      report.malformed.append(f"{where}: {e}")
      continue
    seen.add(task.task_id)
    report.tasks.append(task)
  return report
