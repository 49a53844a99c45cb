"""The launchers' persistent XLA compilation cache (`launch.cli.
enable_compilation_cache`): what it stores, how it is bounded, and that
`CompileCounter` counts a program loaded from it as a compile. The test
suite shares one such cache between its processes (tests/conftest.py), so
a retrace must not hide behind a cache hit; JAX's backend-compile event
times the compile-or-load, and this pins that.

Each probe runs in a fresh process, under the launchers' settings as a
user gets them: the session's unbounded RLA_JAX_XLA_CACHE_MAX_MB is not
inherited."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PREAMBLE = """
import os, sys
sys.path.insert(0, {root!r})
import jax, jax.numpy as jnp, numpy as np
from launch.cli import enable_compilation_cache
enable_compilation_cache()
"""

_STORE_PROBE = """
jax.jit(lambda x: jnp.tanh(x) * 2.0)(jnp.ones((3,))).block_until_ready()
names = os.listdir(os.environ["RLA_JAX_XLA_CACHE"])
print(jax.config.jax_compilation_cache_max_size)
print(sum(name.endswith("-cache") for name in names))
"""

_COUNT_PROBE = """
from rla_jax.compile_counter import CompileCounter
f = jax.jit(lambda x: jnp.tanh(x) * 3.0)
x5, x6 = np.ones((5,), np.float32), np.ones((6,), np.float32)
with CompileCounter() as first:
  f(x5).block_until_ready()
with CompileCounter() as again:  # the in-memory cache: nothing obtained
  f(x5).block_until_ready()
with CompileCounter() as new_shape:
  f(x6).block_until_ready()
print(first.count, again.count, new_shape.count)
"""


def _probe(script, cache, **env) -> list[int]:
  """The integers `script` prints, run after the launchers' cache setup
  with RLA_JAX_XLA_CACHE = cache (plus `env`)."""
  inherited = {
    k: v for k, v in os.environ.items() if k != "RLA_JAX_XLA_CACHE_MAX_MB"
  }
  proc = subprocess.run(
    [sys.executable, "-c", _PREAMBLE.format(root=ROOT) + script],
    capture_output=True,
    text=True,
    timeout=120,
    env={**inherited, "RLA_JAX_XLA_CACHE": str(cache), **env},
    cwd=ROOT,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  return [int(n) for n in proc.stdout.split()]


def test_compilation_cache_keeps_programs_that_compile_quickly(tmp_path):
  """The launchers' persistent XLA cache stores every program, even one
  that compiles in milliseconds (the sampling programs compile in ~0.45 s
  each, under JAX's own 1 s threshold), RLA_JAX_XLA_CACHE names it and
  RLA_JAX_XLA_CACHE_MAX_MB bounds it."""
  bound, stored = _probe(_STORE_PROBE, tmp_path / "xla")
  assert stored >= 1
  # Bounded (least recently used evicted), 2 GiB unless told otherwise;
  # RLA_JAX_XLA_CACHE_MAX_MB=0 stores nothing (JAX: caching off).
  assert bound == 2048 * 2**20
  off = _probe(_STORE_PROBE, tmp_path / "off", RLA_JAX_XLA_CACHE_MAX_MB="0")
  assert off == [0, 0]


def test_programs_loaded_from_the_persistent_cache_are_counted(tmp_path):
  cache = tmp_path / "xla"
  # A cold cache compiles each shape once; a second process loads both
  # from disk, and each load counts as the compile it stands for.
  assert _probe(_COUNT_PROBE, cache) == [1, 0, 1]
  assert _probe(_COUNT_PROBE, cache) == [1, 0, 1]
  assert sum(name.endswith("-cache") for name in os.listdir(cache)) == 2
