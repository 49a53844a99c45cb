"""TFDS builder package for local coding-task JSONL files (see
rla_coding_tasks_dataset_builder)."""

from .rla_coding_tasks_dataset_builder import Builder

__all__ = ["Builder"]
