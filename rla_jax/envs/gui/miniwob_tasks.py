"""The MiniWoB++ task pages the ``miniwob`` pip package ships.

Task ids are page names under ``miniwob/html/miniwob/`` (e.g.
"click-button", "enter-text"); they are found without importing the package
(which registers gymnasium environments). The FlightWoB ``flight.*`` tasks
need an HTTP server and are not offered.
"""

from __future__ import annotations

import importlib.util
import pathlib

from rla_jax.envs.gui.chromium import ChromiumNotFoundError


def miniwob_pages_dir() -> pathlib.Path:
  """The ``miniwob`` package's task pages (``html/miniwob``)."""
  spec = importlib.util.find_spec("miniwob")
  if spec is None or not spec.submodule_search_locations:
    raise ChromiumNotFoundError("the miniwob package is not installed")
  return pathlib.Path(spec.submodule_search_locations[0]) / "html" / "miniwob"


def task_page(task_id: str) -> pathlib.Path:
  """The page of MiniWoB++ task ``task_id`` (e.g. "click-button").

  Raises:
    ValueError: Unknown or unsupported (FlightWoB) task id.
  """
  pages = miniwob_pages_dir()
  if not isinstance(task_id, str) or task_id.startswith("flight."):
    raise ValueError(f"unsupported MiniWoB++ task id {task_id!r}")
  page = pages / f"{task_id}.html"
  if "/" in task_id or not page.is_file():
    raise ValueError(f"unknown MiniWoB++ task id {task_id!r} (no {page})")
  return page


def task_ids() -> list[str]:
  """Every supported MiniWoB++ task id, sorted."""
  return sorted(page.stem for page in miniwob_pages_dir().glob("*.html"))
