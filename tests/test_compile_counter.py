"""`CompileCounter` counts every program a process obtains: compiled, or
loaded from the persistent compilation cache (which the test suite shares
between its processes, so a retrace must not hide behind a cache hit).
JAX's backend-compile event times the compile-or-load; this pins that."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROBE = """
import sys
sys.path.insert(0, {root!r})
import jax, jax.numpy as jnp, numpy as np
from launch.cli import enable_compilation_cache
from rla_jax.compile_counter import CompileCounter
enable_compilation_cache()
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


def _counts(cache):
  proc = subprocess.run(
    [sys.executable, "-c", _PROBE.format(root=ROOT)],
    capture_output=True,
    text=True,
    timeout=120,
    env={**os.environ, "RLA_JAX_XLA_CACHE": str(cache)},
    cwd=ROOT,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  return [int(n) for n in proc.stdout.split()[-3:]]


def test_programs_loaded_from_the_persistent_cache_are_counted(tmp_path):
  cache = tmp_path / "xla"
  # A cold cache compiles each shape once; a second process loads both
  # from disk, and each load counts as the compile it stands for.
  assert _counts(cache) == [1, 0, 1]
  assert _counts(cache) == [1, 0, 1]
  assert sum(name.endswith("-cache") for name in os.listdir(cache)) == 2
