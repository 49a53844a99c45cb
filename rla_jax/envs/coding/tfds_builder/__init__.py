"""tensorflow-datasets integration for coding tasks, without TensorFlow.

``prepare_coding_dataset`` writes array_record splits once; ``TaskDataSource``
reads them back by index through ``tfds.data_source`` and decodes each record
into a ``Task``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import tensorflow_datasets as tfds

from rla_jax.envs.coding.tasks import Task
from rla_jax.envs.coding.tfds_builder.rla_coding_tasks import Builder

DATASET_NAME = "rla_coding_tasks"


def prepare_coding_dataset(
  data_dir: str,
  sources: dict[str, Sequence[tuple[str, str]]],
  *,
  skip_malformed: bool = False,
) -> dict[str, list[str]]:
  """Prepare splits {split: [(jsonl path, format)]} under ``data_dir`` as
  array_record.

  Returns the preparation report {"malformed": [...], "unsupported": [...]}
  ("file:line: reason"). Malformed rows abort preparation (DatasetFormatError
  naming file:line) unless skip_malformed.
  """
  for split, files in sources.items():
    for path, _ in files:
      if not os.path.isfile(path):
        raise FileNotFoundError(
          f"split {split!r}: source file not found: {path}"
        )
  builder = Builder(
    data_dir=data_dir, sources=sources, skip_malformed=skip_malformed
  )
  builder.download_and_prepare(
    file_format="array_record",
    download_config=tfds.download.DownloadConfig(try_download_gcs=False),
  )
  return builder.preparation_report


def _text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def record_to_task(record: dict) -> Task:
  """Decode one tfds record (bytes for Text features) into a Task."""
  tests = tuple(
    (_text(i), _text(o))
    for i, o in zip(record["test_inputs"], record["test_outputs"], strict=True)
  )
  return Task(
    task_id=_text(record["task_id"]),
    question=_text(record["question"]),
    tests=tests,
    time_limit_s=float(record["time_limit_s"]),
    difficulty=float(record["difficulty"]),
    root_id=_text(record["root_id"]),
    parent_id=_text(record["parent_id"]) or None,
    family_spec=_text(record["family_spec"]),
  )


class TaskDataSource:
  """Random-access Tasks of one prepared split: ``len(ds)``, ``ds[i]``,
  ``ds[[i, j]]``."""

  def __init__(self, data_dir: str, split: str):
    self._source = tfds.data_source(
      DATASET_NAME, split=split, data_dir=data_dir, download=False
    )

  def __len__(self) -> int:
    return len(self._source)

  def __getitem__(self, index):
    if isinstance(index, (list, tuple)):
      return [record_to_task(r) for r in self._source.__getitems__(list(index))]
    return record_to_task(self._source[index])
