"""Tests for rla_jax.metrics: writer (TensorBoard,
JSONL, terminal, resume) and reports."""

from __future__ import annotations

import glob
import io
import json
import math
import os
import struct

import numpy as np
import pytest

from rla_jax.metrics import (
  MetricsWriter,
  last_values,
  paired_change_lines,
  plot_ablation_curves,
  summary_markdown,
  write_ablation_table,
  write_summary,
)
from rla_jax.metrics.ablation import mean_and_sample_std
from rla_jax.metrics.ablation_curves import common_curve

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class FakeClock:
  """Deterministic wall clock: returns whatever the test set last."""

  def __init__(self, t: float = 1000.0):
    self.t = t

  def __call__(self) -> float:
    return self.t


def _masked_crc(data: bytes) -> int:
  # TFRecord framing: masked CRC-32C (Castagnoli), as specified by TensorFlow.
  from tensorboardX.crc32c import crc32c

  x = crc32c(data) & 0xFFFFFFFF
  return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_event_file(path: str) -> list:
  """Events of one TFRecord file, checking both CRCs of every record."""
  from tensorboardX.proto import event_pb2

  with open(path, "rb") as f:
    data = f.read()
  events, pos = [], 0
  while pos < len(
    data
  ):  # record: u64 length, u32 crc(length), data, u32 crc(data)
    header, payload_at = data[pos : pos + 8], pos + 12
    (length,) = struct.unpack("<Q", header)
    payload = data[payload_at : payload_at + length]
    crcs = struct.unpack("<I", data[pos + 8 : payload_at]) + struct.unpack(
      "<I", data[payload_at + length : payload_at + length + 4]
    )
    assert crcs == (_masked_crc(header), _masked_crc(payload)), (
      f"{path}: bad crc"
    )
    events.append(event_pb2.Event.FromString(payload))
    pos = payload_at + length + 4
  assert pos == len(data)
  return events


def tensorboard_scalars(logdir: str) -> dict[tuple[str, int], float]:
  """(tag, step) -> value as TensorBoard shows it: files in name order; a
  SessionLog.START at step s discards earlier events with step >= s."""
  from tensorboardX.proto import event_pb2

  scalars = {}
  for path in sorted(glob.glob(os.path.join(logdir, "*tfevents*"))):
    events = read_event_file(path)
    assert events[0].file_version == "brain.Event:2"
    for ev in events:
      if (
        ev.HasField("session_log")
        and ev.session_log.status == event_pb2.SessionLog.START
      ):
        scalars = {k: v for k, v in scalars.items() if k[1] < ev.step}
      for value in ev.summary.value:
        scalars[(value.tag, ev.step)] = value.simple_value
  return scalars


def _metrics_for(step: int, variant: float = 0.0) -> dict:
  m = {
    "train/rollout_accuracy": 0.1 * step + variant,
    "train/policy_loss": 2.0 / (step + 1),
    "env/accepted_total": 3 * step,
  }
  if step % 2 == 0:
    m["eval/in_distribution_success"] = 0.05 * step + variant
  return m


def _write_steps(workdir, steps, clock, variant=0.0, truncate=None):
  with MetricsWriter(workdir, display_stream=None, clock=clock) as w:
    if truncate is not None:
      w.truncate_after(truncate)
    for s in steps:
      clock.t = 1000.0 + 1.5 * s
      w.write(s, _metrics_for(s, variant))


# --- writer -------------------------------------------------------------------


def test_jsonl_round_trip_with_numpy_bool_and_non_finite(tmp_path):
  clock = FakeClock(50.0)
  with MetricsWriter(str(tmp_path), display_stream=None, clock=clock) as w:
    clock.t = 51.25
    w.write(
      0,
      {
        "a": np.float32(0.5),
        "b": np.int64(7),
        "c": True,
        "d": float("nan"),
        "e": float("-inf"),
        "f": np.array(2.5),
        "g": 1e-12,
      },
    )
    clock.t = 52.5
    w.write(3, {"a": 0.75})
  lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
  assert len(lines) == 2
  assert json.loads(lines[0]) == {
    "step": 0,
    "time": 51.25,
    "a": 0.5,
    "b": 7,
    "c": 1,
    "d": None,
    "e": None,
    "f": 2.5,
    "g": 1e-12,
  }
  assert isinstance(json.loads(lines[0])["b"], int)
  assert MetricsWriter.read_history(str(tmp_path)) == [
    json.loads(x) for x in lines
  ]
  assert MetricsWriter.read_history(str(tmp_path))[1] == {
    "step": 3,
    "time": 52.5,
    "a": 0.75,
  }


def test_tensorboard_event_files_read_back(tmp_path):
  with MetricsWriter(str(tmp_path), display_stream=None) as w:
    w.write(0, {"x": 0.1, "n": 5, "bad": float("inf")})
    w.write(1, {"x": 0.2, "bad": 1.5})
    # Flushed per step: readable before close.
    mid = tensorboard_scalars(str(tmp_path / "tensorboard"))
    assert mid[("x", 1)] == pytest.approx(0.2)
  scalars = tensorboard_scalars(str(tmp_path / "tensorboard"))
  # simple_value is float32.
  assert scalars == {
    ("x", 0): np.float32(0.1),
    ("n", 0): 5.0,
    ("x", 1): np.float32(0.2),
    ("bad", 1): 1.5,
  }


def test_resume_truncation_reproduces_uninterrupted_run(tmp_path):
  full, resumed = str(tmp_path / "full"), str(tmp_path / "resumed")
  _write_steps(full, range(5), FakeClock())
  # Killed run: steps 3..5 were logged with other values after the last
  # checkpoint (at step 3), then the kill tore the JSONL line of step 6.
  _write_steps(resumed, range(3), FakeClock())
  _write_steps(
    resumed, [3, 4, 5], FakeClock(), variant=0.5
  )  # reopened: appends
  with open(os.path.join(resumed, "metrics.jsonl"), "a") as f:
    f.write('{"step": 6, "time": 10')
  killed_tb = tensorboard_scalars(os.path.join(resumed, "tensorboard"))
  assert killed_tb[("train/rollout_accuracy", 3)] == np.float32(0.8)
  _write_steps(resumed, [3, 4], FakeClock(), truncate=3)

  with open(os.path.join(full, "metrics.jsonl"), "rb") as f:
    expected = f.read()
  with open(os.path.join(resumed, "metrics.jsonl"), "rb") as f:
    assert f.read() == expected
  assert len(expected.splitlines()) == 5
  assert tensorboard_scalars(
    os.path.join(resumed, "tensorboard")
  ) == tensorboard_scalars(os.path.join(full, "tensorboard"))
  assert len(glob.glob(os.path.join(resumed, "tensorboard", "*tfevents*"))) == 3


def test_truncate_after_reports_drops_and_reopen_requires_it(tmp_path):
  _write_steps(str(tmp_path), range(5), FakeClock())
  with MetricsWriter(str(tmp_path), display_stream=None) as w:
    with pytest.raises(ValueError, match="truncate_after"):
      w.write(4, {"a": 1.0})
    assert w.truncate_after(10) == 0
    assert w.truncate_after(2) == 3
    w.write(2, {"a": 1.0})
  assert [e["step"] for e in MetricsWriter.read_history(str(tmp_path))] == [
    0,
    1,
    2,
  ]


def test_torn_last_line_is_dropped_and_repaired_corrupt_middle_line_raises(
  tmp_path,
):
  _write_steps(str(tmp_path), range(2), FakeClock())
  path = tmp_path / "metrics.jsonl"
  with open(path, "a") as f:
    f.write('{"step": 2, "ti')
  assert [e["step"] for e in MetricsWriter.read_history(str(tmp_path))] == [
    0,
    1,
  ]
  _write_steps(str(tmp_path), [2], FakeClock())
  assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [
    0,
    1,
    2,
  ]
  path.write_text('{"step": 0}\nnot json\n{"step": 2}\n')
  with pytest.raises(ValueError, match=r"metrics.jsonl:2"):
    MetricsWriter.read_history(str(tmp_path))


def test_non_primary_writes_nothing(tmp_path):
  workdir = tmp_path / "run"
  stream = io.StringIO()
  with MetricsWriter(
    str(workdir), is_primary=False, display_stream=stream
  ) as w:
    w.write(0, {"a": 1.0})
    assert w.truncate_after(0) == 0
    w.write(0, {"a": 2.0})
    with pytest.raises(TypeError, match="'a'"):  # input is still validated
      w.write(1, {"a": "x"})
  assert not workdir.exists()
  assert stream.getvalue() == ""


def test_display_line_shows_step_elapsed_and_chosen_keys(tmp_path):
  stream, clock = io.StringIO(), FakeClock(0.0)
  with MetricsWriter(
    str(tmp_path),
    display_keys=("b", "a", "missing"),
    display_stream=stream,
    clock=clock,
  ) as w:
    clock.t = 3725.0
    w.write(7, {"a": 0.123456, "b": 42, "c": 9.0})
  assert stream.getvalue() == "step 7 | 1:02:05 | b=42 | a=0.1235\n"


def test_bad_input_and_close_idempotent(tmp_path):
  w = MetricsWriter(str(tmp_path), display_stream=None)
  with pytest.raises(TypeError, match="'k'.*str"):
    w.write(0, {"k": "text"})
  with pytest.raises(ValueError, match="'step'"):
    w.write(0, {"step": 1.0})
  with pytest.raises(ValueError, match="step must be an int"):
    w.write(-1, {})
  with pytest.raises(ValueError, match="step must be an int"):
    w.write(1.0, {})
  w.write(0, {"k": 1.0})
  w.close()
  w.close()
  with pytest.raises(ValueError, match="closed"):
    w.write(1, {"k": 1.0})
  assert len(MetricsWriter.read_history(str(tmp_path))) == 1


# --- run summary --------------------------------------------------------------


def _synthetic_history():
  history = []
  eval_id = {0: 0.125, 5: 0.5, 10: 0.375, 15: 0.75, 20: 0.625}
  for step in range(21):
    entry = {
      "step": step,
      "time": 100.0 + step,
      "train/rollout_accuracy": 0.25 + 0.01 * step,
      "train/policy_loss": 3.0 - 0.1 * step + (0.5 if step == 20 else 0.0),
      "env/accepted_total": 2 * step,
    }
    if step in eval_id:
      entry["eval/in_distribution_success"] = eval_id[step]
      entry["eval/rm_process_accuracy"] = (
        None if step == 0 else 0.4 + step / 100
      )
    history.append(entry)
  return history


def _assert_png(path, min_bytes=10_000):
  with open(path, "rb") as f:
    data = f.read()
  assert data[:8] == PNG_SIGNATURE
  assert len(data) > min_bytes
  import matplotlib.image

  image = matplotlib.image.imread(path)
  assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200
  assert image[..., :3].std() > 0.01  # not a blank canvas


def test_summary_table_and_learning_curves(tmp_path):
  history = _synthetic_history()
  md_path, png_path = write_summary(
    history, str(tmp_path / "out"), title="Run A"
  )
  text = open(md_path).read()
  assert text == summary_markdown(history, title="Run A")
  rows = {
    line.split(" | ")[0].lstrip("| "): line
    for line in text.splitlines()
    if line.startswith("| ") and "/" in line
  }
  assert rows["eval/in_distribution_success"] == (
    "| eval/in_distribution_success | 0.125 (0) | 0.625 (20) | 0.75 (15, max) "
    "| 0.5 | 5 |"
  )
  # None at step 0 is "not evaluated": first value is at step 5.
  assert rows["eval/rm_process_accuracy"].startswith(
    "| eval/rm_process_accuracy | 0.45 (5) | 0.6 (20) | 0.6 (20, max)"
  )
  assert rows["env/accepted_total"] == (
    "| env/accepted_total | 0 (0) | 40 (20) | 40 (20, max) | 40 | 21 |"
  )
  # Loss: best is the minimum (step 19: 3.0 - 1.9 = 1.1),
  # not the last value (1.5).
  assert rows["train/policy_loss"].startswith(
    "| train/policy_loss | 3 (0) | 1.5 (20) | 1.1 (19, min)"
  )
  assert "train/rollout_accuracy" in rows
  assert (
    "Not logged: eval/out_of_distribution_success, eval/rm_outcome_accuracy."
    in text
  )
  assert os.path.basename(png_path) == "learning_curves.png"
  _assert_png(png_path)


def test_summary_lists_optional_eval_keys_only_when_logged():
  history = [
    {"step": 0, "eval/rm_positive_rate": 0.25},
    {"step": 1, "eval/rm_positive_rate": 0.0},
  ]
  text = summary_markdown(history, title="Run")
  assert "| eval/rm_positive_rate | 0.25 (0) | 0 (1) |" in text
  assert "eval/rm_process_balanced_accuracy" not in text


def test_a_coding_summary_lists_the_coding_keys_first_and_only_them_missing():
  from rla_jax.metrics import keys as K

  history = [
    {"step": 0, "eval/code": 0.25, "eval/ut": 0.5, "eval/rm_positive_rate": 1},
    {"step": 1, "env/accepted_total": 2, "train/code": 0.5},
    {"step": 2, "eval/code": 0.5, "eval/ut": 0.75},
  ]
  text = summary_markdown(history, title="c", expected=K.CODING_SUMMARY_KEYS)
  metric_rows = [
    line.split(" | ")[0].lstrip("| ")
    for line in text.splitlines()
    if line.startswith("| ") and "/" in line
  ]
  assert metric_rows == [
    "eval/code",
    "eval/ut",
    "env/accepted_total",
    "eval/rm_positive_rate",
    "train/code",
  ]
  assert "| eval/code | 0.25 (0) | 0.5 (2) | 0.5 (2, max) | 0.25 | 2 |" in text
  assert (
    "Not logged: eval/detect, eval/selected_code, eval/random_code." in text
  )
  assert "in_distribution" not in text


def test_summary_tolerates_missing_keys_and_empty_history(tmp_path):
  md, png = write_summary(
    [{"step": 0}, {"step": 1, "other/x": 1.0}],
    str(tmp_path / "a"),
    title="sparse",
  )
  assert "Not logged: eval/in_distribution_success" in open(md).read()
  _assert_png(png, min_bytes=1000)
  md, png = write_summary([], str(tmp_path / "b"), title="empty")
  assert "Empty history" in open(md).read()
  with pytest.raises(
    ValueError, match=r"history\[1\] step 0 does not increase"
  ):
    summary_markdown([{"step": 0}, {"step": 0}], title="x")


def test_summary_from_writer_jsonl(tmp_path):
  _write_steps(str(tmp_path), range(5), FakeClock())
  text = summary_markdown(
    MetricsWriter.read_history(str(tmp_path)), title="from disk"
  )
  assert (
    "| eval/in_distribution_success | 0 (0) | 0.2 (4) | 0.2 (4, max) "
    "| 0.2 | 3 |" in text
  )


def test_last_values_skips_unevaluated_steps():
  history = [
    {"step": 0, "time": 1.0, "a": 0.5, "b": 1.0},
    {"step": 1, "a": None, "c": 2},
    {"step": 2, "a": float("nan"), "b": 3.0},
  ]
  assert last_values(history) == {"a": 0.5, "b": 3.0, "c": 2}


# --- ablation -----------------------------------------------------------------


def test_mean_and_sample_std_by_hand():
  # mean 0.3; squared deviations 0.04, 0.01, 0.09 -> /(3-1) = 0.07.
  mean, std = mean_and_sample_std([0.1, 0.2, 0.6])
  assert mean == pytest.approx(0.3) and std == pytest.approx(math.sqrt(0.07))
  assert mean_and_sample_std([0.4]) == (0.4, None)


def test_ablation_table_values(tmp_path):
  cols = (
    "eval/in_distribution_success",
    "eval/out_of_distribution_success",
    "eval/rm_process_accuracy",
    "eval/rm_outcome_accuracy",
  )
  # A seed may give only the first columns (the rest absent): zip truncates.

  def seed(*values):
    return dict(zip(cols, values, strict=False))

  results = {
    "Before": [seed(0.39, 0.449, 0.47, 0.596)],
    "Policy": [
      seed(0.5, 0.1, 0.47, 0.596),
      seed(0.6, 0.2, 0.47, 0.596),
      seed(0.7, 0.6, 0.47, 0.596),
    ],
    "+Env": [seed(0.6, 0.64), seed(0.6, 0.62)],
  }
  out = tmp_path / "table1.md"
  text = write_ablation_table(results, str(out))
  assert out.read_text() == text
  lines = text.splitlines()
  assert lines[0] == (
    "| Stage | seeds | Policy in-distribution | Policy OOD | RM process "
    "| RM outcome |"
  )
  assert lines[2] == "| Before | 1 | 39.0 | 44.9 | 47.0 | 59.6 |"
  # ID: mean 60, sample std 10; OOD: mean 30, sample std sqrt(0.07) = 26.46%.
  assert (
    lines[3]
    == "| Policy | 3 | 60.0 ± 10.0 | 30.0 ± 26.5 | 47.0 ± 0.0 | 59.6 ± 0.0 |"
  )
  # OOD: mean 63, std sqrt(2 * 0.01^2 / 1) = 1.41%.
  assert lines[4] == "| +Env | 2 | 60.0 ± 0.0 | 63.0 ± 1.4 | — | — |"
  assert "sample std (ddof=1)" in text


def test_ablation_table_states_each_change_with_its_paired_stderr(tmp_path):
  def seed(d_id, se_id, d_ood, se_ood):
    return {
      "eval/in_distribution_success": 0.5,
      "eval/in_distribution_success_change": d_id,
      "eval/in_distribution_success_change_stderr": se_id,
      "eval/out_of_distribution_success_change": d_ood,
      "eval/out_of_distribution_success_change_stderr": se_ood,
    }

  results = {
    "Before": [{"eval/in_distribution_success": 0.4}],
    "Policy": [seed(0.10, 0.03, 0.02, 0.04), seed(0.04, 0.04, 0.0, 0.03)],
    "+Env": [seed(0.06, 0.05, -0.01, 0.02)],
  }
  lines = write_ablation_table(results, str(tmp_path / "t.md")).splitlines()
  at = lines.index("| Stage | seeds | Policy in-distribution | Policy OOD |")
  # ID: mean 7, s.e. sqrt(3^2 + 4^2) / 2 = 2.5, std sqrt(2 * 3^2) = 4.24;
  # OOD: mean 1, s.e. 5 / 2 = 2.5, std 1.41. One seed: no std.
  assert lines[at + 2] == "| Policy | 2 | +7.0 (2.5; 4.2) | +1.0 (2.5; 1.4) |"
  assert lines[at + 3] == "| +Env | 1 | +6.0 (5.0) | -1.0 (2.0) |"
  assert len(lines) == at + 4  # Before logs no change: no row


def test_ablation_table_rejects_bad_input(tmp_path):
  path = str(tmp_path / "t.md")
  with pytest.raises(ValueError, match=r"'Policy', seed 1.*45"):
    write_ablation_table(
      {
        "Policy": [
          {"eval/in_distribution_success": 0.4},
          {"eval/in_distribution_success": 45.0},
        ]
      },
      path,
    )
  with pytest.raises(ValueError, match=r"missing from seed\(s\) \[0\]"):
    write_ablation_table(
      {"Policy": [{}, {"eval/in_distribution_success": 0.4}]}, path
    )
  with pytest.raises(ValueError, match="no seed results"):
    write_ablation_table({"Before": []}, path)
  assert not os.path.exists(path)


def test_ablation_curves_mean_and_band(tmp_path):
  key = "eval/in_distribution_success"
  seed_a = [
    {"step": 0, key: 0.1},
    {"step": 5, key: 0.3},
    {"step": 10, key: 0.5},
  ]
  seed_b = [{"step": 0, key: 0.3}, {"step": 5, key: 0.5}, {"step": 7, key: 0.9}]
  steps, mean, lo, hi = common_curve("Policy", key, [seed_a, seed_b])
  assert steps == [0, 5]
  assert (
    mean == pytest.approx([0.2, 0.4]) and lo == [0.1, 0.3] and hi == [0.3, 0.5]
  )
  assert common_curve("Policy", "absent", [seed_a, seed_b]) is None
  with pytest.raises(ValueError, match="share no step"):
    common_curve(
      "Policy", key, [[{"step": 1, key: 0.1}], [{"step": 2, key: 0.1}]]
    )
  histories = {
    "Policy": [seed_a, seed_b],
    "+Env": [_synthetic_history(), _synthetic_history()],
  }
  png = plot_ablation_curves(histories, str(tmp_path / "ablation.png"))
  _assert_png(png)


def test_summary_states_each_success_change_with_its_paired_stderr():
  """The end-of-run text: per split, start -> end, the paired change with
  its s.e. and N, from the last step logging a change; start = end -
  change; a nan s.e. (one run, written as null) is n/a."""
  history = [
    {
      "step": 0,
      "eval/in_distribution_success": 0.3125,
      "eval/in_distribution_runs": 256,
    },
    {
      "step": 4,
      "eval/in_distribution_success": 0.5,
      "eval/in_distribution_success_change": 0.1875,
      "eval/in_distribution_success_change_stderr": 0.04,
      "eval/in_distribution_runs": 256,
    },
    {"step": 5, "train/rollout_accuracy": 0.5},
    {
      "step": 8,
      "eval/in_distribution_success": 0.375,
      "eval/in_distribution_success_change": 0.0625,
      "eval/in_distribution_success_change_stderr": 0.0214,
      "eval/in_distribution_runs": 256,
      "eval/out_of_distribution_success": 1.0,
      "eval/out_of_distribution_success_change": 1.0,
      "eval/out_of_distribution_success_change_stderr": None,
      "eval/out_of_distribution_runs": 1,
    },
  ]
  assert paired_change_lines(history) == [
    "in_distribution_success 0.312 -> 0.375 "
    "(+0.062 +- 0.021 paired s.e., 256 runs)",
    "out_of_distribution_success 0.000 -> 1.000 "
    "(+1.000 +- n/a paired s.e., 1 runs)",
  ]
  text = summary_markdown(history, title="Run")
  for line in paired_change_lines(history):
    assert f"- {line}\n" in text
  assert paired_change_lines(history[:1]) == []
  assert "paired" not in summary_markdown(history[:1], title="Run")


def test_summary_states_coding_changes_from_their_logged_start():
  """Coding's paired metrics (eval/code, eval/ut) are stated as well; a
  logged change_start (the paired runs' start mean where it is not the
  metric's value, here UT) is the start; eval/selection_gain, not a
  paired change, is in the table only."""
  history = [
    {"step": 0, "eval/code": 0.25, "eval/ut": 0.5, "eval/code_runs": 8},
    {
      "step": 3,
      "eval/code": 0.5,
      "eval/code_change": 0.25,
      "eval/code_change_stderr": 0.125,
      "eval/code_runs": 8,
      "eval/ut": 0.75,
      "eval/ut_change": 0.125,
      "eval/ut_change_stderr": 0.0625,
      "eval/ut_change_start": 0.375,
      "eval/ut_runs": 4,
      "eval/selection_gain": 0.25,
    },
  ]
  assert paired_change_lines(history) == [
    "code 0.250 -> 0.500 (+0.250 +- 0.125 paired s.e., 8 runs)",
    "ut 0.375 -> 0.500 (+0.125 +- 0.062 paired s.e., 4 runs)",
  ]
  text = summary_markdown(history, title="Run")
  assert "| eval/selection_gain | 0.25 (3) |" in text
  assert "| eval/code | 0.25 (0) | 0.5 (3) |" in text


def test_stage_difference_pairs_end_outcomes_run_by_run():
  from rla_jax.metrics.ablation import stage_difference_markdown

  ref = {"in_distribution": [0, 0, 1, 1], "out_of_distribution": [0, 1, 0, 1]}
  s0 = {"in_distribution": [1, 0, 1, 1], "out_of_distribution": [0, 1, 0, 1]}
  s1 = {"in_distribution": [1, 1, 1, 1], "out_of_distribution": [0, 0, 0, 1]}
  text = stage_difference_markdown(
    {"Policy": {"0": ref, "1": ref}, "+Env": {"0": s0, "1": s1}}
  )
  # seed 0: ID d = (1,0,0,0): +0.25, s.e. sqrt(0.25/4) = 0.25; seed 1: ID
  # d = (1,1,0,0): +0.5, s.e. sqrt((1/3)/4); mean +0.375, s.e.
  # sqrt(0.0625 + 1/12)/2, std of (0.25, 0.5)
  se = np.sqrt(0.0625 + 1 / 12) / 2 * 100
  std = np.std([0.25, 0.5], ddof=1) * 100
  # OOD: seed 0 d = 0 (s.e. 0), seed 1 d = (0,-1,0,0): -0.25, s.e. 0.25
  ood_se = np.sqrt(0.0625) / 2 * 100
  ood_std = np.std([0.0, -0.25], ddof=1) * 100
  assert (
    f"| +Env | 2 | +37.5 ({se:.1f}; {std:.1f}) | -12.5 ({ood_se:.1f}; "
    f"{ood_std:.1f}) |"
  ) in text
  assert "| Policy |" not in text
  assert stage_difference_markdown({"+Env": {"0": s0}}) == ""


def test_successive_difference_pairs_consecutive_stages():
  from rla_jax.metrics.ablation import (
    TABLE1_STAGES,
    counterpart_difference_markdown,
    stage_difference_markdown,
    successive_difference_markdown,
  )

  ref = {"in_distribution": [0, 0, 1, 1], "out_of_distribution": [0, 1, 0, 1]}
  env = {"in_distribution": [1, 0, 1, 1], "out_of_distribution": [0, 0, 0, 1]}
  runs = {"Policy": {"0": ref}, "+Judge": {"0": ref}, "+Env": {"0": env}}
  text = successive_difference_markdown(runs, TABLE1_STAGES)
  # +Judge equals Policy run by run; +Env - +Judge: ID d = (1,0,0,0), +25.0
  # s.e. sqrt(0.25/4) = 25.0; OOD d = (0,-1,0,0): -25.0 (25.0)
  assert "| +Judge - Policy | 1 | +0.0 (0.0) | +0.0 (0.0) |" in text
  assert "| +Env - +Judge | 1 | +25.0 (25.0) | -25.0 (25.0) |" in text
  assert "+Env - Policy" not in text
  versus_policy = stage_difference_markdown(runs)
  assert "| +Env | 1 | +25.0 (25.0) | -25.0 (25.0) |" in versus_policy
  assert (
    successive_difference_markdown({"+Env": {"0": env}}, TABLE1_STAGES) == ""
  )
  extra = counterpart_difference_markdown({**runs, "ExpertS": {"0": env}})
  assert "| ExpertS - +Judge | 1 | +25.0 (25.0) | -25.0 (25.0) |" in extra
  assert "SFT" not in extra and counterpart_difference_markdown(runs) == ""


def _judge_table(start, end, stderr, rate):
  return {
    "balanced_start": start,
    "balanced_end": end,
    "change": end - start,
    "stderr": stderr,
    "positive_rate_end": rate,
    "label_positive_rate": 0.25,
    "num_steps": 100,
    "num_episodes": 8,
  }


def test_judge_change_table_by_hand():
  from rla_jax.metrics.ablation import judge_change_markdown

  text = judge_change_markdown(
    {
      "Policy": {"0": _judge_table(0.6, 0.6, 0.0, 0.2)},
      "+Reward": {
        "0": _judge_table(0.6, 0.56, 0.03, 0.1),
        "1": _judge_table(0.6, 0.62, 0.04, 0.3),
      },
    }
  )
  # +Reward: changes -0.04, +0.02 -> mean -0.01, s.e. sqrt(0.03^2 +
  # 0.04^2) / 2 = 0.025, std of (-0.04, 0.02); end 0.59, +1 rate 0.2.
  std = np.std([-0.04, 0.02], ddof=1) * 100
  assert f"| +Reward | 2 | 60.0 | 59.0 | -1.0 (2.5; {std:.1f}) | 20.0 |" in text
  assert "| Policy | 1 | 60.0 | 60.0 | +0.0 (0.0) | 20.0 |" in text
  assert "100 steps of 8 reference episodes" in text
  assert "+1 share 25.0" in text
  assert judge_change_markdown({}) == ""
  other = dict(_judge_table(0.6, 0.6, 0.0, 0.2), num_steps=99)
  with pytest.raises(ValueError, match="different steps"):
    judge_change_markdown(
      {"Policy": {"0": other, "1": _judge_table(0.6, 0.6, 0, 0.2)}}
    )


def _finished_workdir(tmp_path, config, steps: int) -> str:
  """A workdir whose metrics reach `steps`, the last with an evaluation,
  and a run record of `config`."""
  from rla_jax.metrics.run_record import write_run_record

  workdir = str(tmp_path / "run")
  with MetricsWriter(workdir, display_stream=None) as w:
    for step in range(steps + 1):
      row = {"train/rollout_accuracy": 0.5}
      if step in (0, steps):
        row["eval/in_distribution_success"] = 0.25 + 0.1 * step
      w.write(step, row)
  write_run_record(workdir, config, stage="+Env", seed=0)
  return workdir


def test_finished_run_reads_only_a_record_of_the_same_config(tmp_path):
  import ml_collections

  from rla_jax.errors import ConfigError
  from rla_jax.metrics.run_record import RECORD_FILE, finished_run

  config = ml_collections.ConfigDict(
    {"total_steps": 3, "seed": 0, "optim": {"learning_rate": 3e-4}}
  )
  assert not finished_run(str(tmp_path / "never_run"), config)
  workdir = _finished_workdir(tmp_path, config, steps=3)
  assert finished_run(workdir, config)
  record = json.load(open(os.path.join(workdir, RECORD_FILE)))
  assert record["stage"] == "+Env" and record["seed"] == 0
  assert record["config"]["optim"]["learning_rate"] == 3e-4
  # Another optimiser setting is another run: refused by name, not reused.
  other = config.copy_and_resolve_references()
  other.optim.learning_rate = 1e-4
  with pytest.raises(ConfigError, match=f"{RECORD_FILE}: this run was made"):
    finished_run(workdir, other)
  # A record whose metrics stop before the final evaluation is refused.
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = f.readlines()
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    f.writelines(rows[:-1])
  with pytest.raises(ConfigError, match="ends at step 2 without the final"):
    finished_run(workdir, config)
