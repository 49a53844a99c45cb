"""The embedded models' build cache (rla_jax.warmstart.coding.EmbeddedCache):
one build per settings hash, however many processes ask at once."""

import os
import subprocess
import sys
import textwrap

import pytest

from rla_jax.warmstart.coding import EmbeddedCache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A process that asks for the cache at `root`; its build appends its pid to
# `log` and takes long enough that the two processes' requests overlap.
_ASK = textwrap.dedent(
  """
  import os, sys, time
  from rla_jax.warmstart.coding import EmbeddedCache

  root, log = sys.argv[1], sys.argv[2]

  def build(dirs):
    with open(log, "a") as f:
      f.write(f"{os.getpid()}\\n")
    time.sleep(2.0)
    for d in dirs.values():
      os.makedirs(d)

  print(sorted(EmbeddedCache(root, {"k": 1}).built(build)))
  """
)


def test_concurrent_requests_build_once_and_share_the_build(tmp_path):
  root, log = str(tmp_path / "gui" / "abc"), str(tmp_path / "builds.log")
  procs = [
    subprocess.Popen(
      [sys.executable, "-c", _ASK, root, log],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for _ in range(2)
  ]
  outs = [p.communicate(timeout=120) for p in procs]
  assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
  with open(log) as f:
    assert len(f.read().split()) == 1  # one build, by one of the two
  assert outs[0][0] == outs[1][0]  # both were given the same dirs
  assert all(os.path.isdir(os.path.join(root, d)) for d in ("policy", "reward"))


def test_a_build_that_fails_leaves_no_marker_and_is_redone(tmp_path):
  cache = EmbeddedCache(str(tmp_path / "coding" / "abc"), {"k": 1})
  calls = []

  def failing(dirs):
    calls.append("failed")
    raise RuntimeError("killed part-way")

  with pytest.raises(RuntimeError, match="killed part-way"):
    cache.built(failing)
  assert not cache.complete
  dirs = cache.built(lambda d: calls.append("built"))
  assert calls == ["failed", "built"] and cache.complete
  cache.built(lambda d: calls.append("again"))  # complete: not rebuilt
  assert calls == ["failed", "built"]
  assert dirs["policy_dir"] == os.path.join(cache.root, "policy")
