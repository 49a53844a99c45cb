"""TFDS GeneratorBasedBuilder turning local coding JSONL files into array_record
splits.

Works without TensorFlow: always prepared with ``file_format="array_record"``
and read through ``tfds.data_source`` (random access by index). The builder
lives in its own package directory
(``rla_coding_tasks/rla_coding_tasks_dataset_builder.py`` defining ``Builder``),
the layout ``dataset_info_from_configs`` needs; the registered dataset name is
``rla_coding_tasks``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow_datasets as tfds

from rla_jax.envs.coding.datasets import (
  FORMATS,
  DatasetFormatError,
  load_jsonl_tasks,
)

SplitSources = Mapping[
  str, Sequence[tuple[str, str]]
]  # split -> [(jsonl path, format)]


class Builder(tfds.core.GeneratorBasedBuilder):
  """Coding tasks (question, stdin/stdout tests, limits, lineage) from local
  JSONL files."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}

  def __init__(
    self,
    *,
    sources: SplitSources | None = None,
    skip_malformed: bool = False,
    **kwargs,
  ):
    self._sources = dict(sources or {})
    for split, files in self._sources.items():
      for path, fmt in files:
        if fmt not in FORMATS:
          raise ValueError(
            f"split {split!r}: unknown format {fmt!r} for {path}; expected one "
            f"of {FORMATS}"
          )
    self._skip_malformed = skip_malformed
    self.preparation_report: dict[str, list[str]] = {
      "malformed": [],
      "unsupported": [],
    }
    super().__init__(**kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
      features=tfds.features.FeaturesDict(
        {
          "task_id": tfds.features.Text(),
          "question": tfds.features.Text(),
          "test_inputs": tfds.features.Sequence(tfds.features.Text()),
          "test_outputs": tfds.features.Sequence(tfds.features.Text()),
          "time_limit_s": np.float64,
          "difficulty": np.float64,
          "root_id": tfds.features.Text(),
          "parent_id": tfds.features.Text(),
          "family_spec": tfds.features.Text(),
        }
      ),
      description="Stdin/stdout coding tasks prepared from local JSONL files.",
    )

  def _split_generators(self, dl_manager):
    if not self._sources:
      raise DatasetFormatError(
        "rla_coding_tasks: nothing to prepare; pass sources={split: [(path, "
        "format)]}"
      )
    return {
      split: self._generate_examples(files)
      for split, files in self._sources.items()
    }

  def _generate_examples(self, files):
    for path, fmt in files:
      report = load_jsonl_tasks(path, fmt, skip_malformed=self._skip_malformed)
      self.preparation_report["malformed"] += report.malformed
      self.preparation_report["unsupported"] += report.unsupported
      for task in report.tasks:
        yield (
          f"{path}::{task.task_id}",
          {
            "task_id": task.task_id,
            "question": task.question,
            "test_inputs": [t[0] for t in task.tests],
            "test_outputs": [t[1] for t in task.tests],
            "time_limit_s": task.time_limit_s,
            "difficulty": task.difficulty,
            "root_id": task.root_id,
            "parent_id": task.parent_id or "",
            "family_spec": task.family_spec,
          },
        )
