"""TFDS builder package for local coding-task JSONL files (see
rla_coding_tasks_dataset_builder)."""

# The absolute module path alone is wider than 80 columns and cannot be split.
from rla_jax.envs.coding.tfds_builder.rla_coding_tasks.rla_coding_tasks_dataset_builder import (  # noqa: E501
  Builder,
)

__all__ = ["Builder"]
