"""Counts XLA backend compilations, so tests and benchmarks can assert them.

JAX reports every backend compile through `jax.monitoring` under
`/jax/core/compile/backend_compile_duration`. The event times JAX's
compile-or-load, so a program loaded from the persistent compilation cache
counts too (tests/test_compilation_cache.py): the test suite shares one such
cache between its processes, and a retrace must not hide behind a cache
hit. One process-wide listener (registered once, on first use) increments
a counter. Nothing else is global: callers read `compile_count()` before
and after the code they measure, or use `CompileCounter` as a context
manager.
"""

from __future__ import annotations

import threading

import jax

_EVENT = "/jax/core/compile/backend_compile_duration"
_lock = threading.Lock()
_count = 0
_registered = False


def _listener(event: str, duration_secs: float, **_kw) -> None:
  del duration_secs
  global _count
  if event == _EVENT:
    with _lock:
      _count += 1


def _ensure_registered() -> None:
  global _registered
  with _lock:
    if not _registered:
      jax.monitoring.register_event_duration_secs_listener(_listener)
      _registered = True


def compile_count() -> int:
  """Number of XLA compilations in this process since counting began."""
  _ensure_registered()
  return _count


class CompileCounter:
  """`with CompileCounter() as c: ...; c.count` = compiles inside the block."""

  def __enter__(self):
    self._start = compile_count()
    self.count = 0
    return self

  def __exit__(self, *exc):
    self.count = compile_count() - self._start
    return False
