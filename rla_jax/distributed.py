"""Multi-controller helpers: host data <-> global arrays, host gathers.

rla_jax runs one identical program per host (JAX's multi-controller
runtime). Every process calls every jitted program with the same global
shapes; device arrays span all processes' devices. Host-side data follows
one convention:

  * "global" host data (prompt lists, training samples, metrics) is the same
    on every process; `put_global` places it on a sharding that may span
    processes (each process transfers only its addressable shards);
  * "process-local" host data (a process's own environments) is exchanged
    with `allgather_objects`, so every process ends up with the global list;
  * device results are brought back with `to_host`, which gathers shards
    held by other processes.

On a single process every helper reduces to the plain call (device_put,
device_get, a one-element list), so single-process runs pay nothing.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Sequence
from typing import Any, TypeVar

import jax
import numpy as np
from jax.experimental import multihost_utils

T = TypeVar("T")


def is_multiprocess() -> bool:
  return jax.process_count() > 1


def process_slice(
  n: int, process_index: int | None = None, process_count: int | None = None
) -> slice:
  """This process's contiguous block of n work items.

  Process p of P owns items [p * n // P, (p + 1) * n // P): blocks differ in
  size by at most one, and concatenating the blocks in process order gives
  the items in their original order (so a gathered result lines up with a
  single-process run). A process may own zero items when n < P.
  """
  p = jax.process_index() if process_index is None else process_index
  P = jax.process_count() if process_count is None else process_count
  if not 0 <= p < P:
    raise ValueError(f"process index {p} outside [0, {P})")
  return slice(p * n // P, (p + 1) * n // P)


def put_global(x, sharding: jax.sharding.Sharding) -> jax.Array:
  """Places a host array that is identical on every process.

  Single process (or a fully addressable sharding): `jax.device_put`. A
  sharding that spans processes: `jax.make_array_from_callback`, so each
  process copies only the slices its own devices hold.
  """
  if sharding.is_fully_addressable:
    return jax.device_put(x, sharding)
  x = np.asarray(x)
  return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])


def place(x, sharding: jax.sharding.Sharding) -> jax.Array:
  """`jax.device_put` that also moves a process-local array onto a
  sharding spanning processes (the value must be the same everywhere).

  jax 0.10's device_put of a single-process array to a replicated
  cross-process sharding returns an array whose shards cannot be read back
  (Orbax then fails with "input arrays must have one shard each"), so that
  case goes through the host and `put_global`.
  """
  if (
    sharding.is_fully_addressable
    or not isinstance(x, jax.Array)
    or not x.is_fully_addressable
  ):
    return jax.device_put(x, sharding)
  return put_global(np.asarray(x), sharding)


def to_host(tree: Any) -> Any:
  """Numpy copies of (possibly cross-process) arrays, on every process.

  Fully addressable or fully replicated arrays are read locally; arrays
  with shards on other processes are all-gathered (a collective: every
  process must call this with the same tree).
  """
  if all(
    not isinstance(x, jax.Array) or x.is_fully_addressable
    for x in jax.tree.leaves(tree)
  ):
    return jax.device_get(tree)  # one batched transfer, as before

  def one(x):
    if not isinstance(x, jax.Array) or x.is_fully_addressable:
      return np.asarray(jax.device_get(x))
    if x.is_fully_replicated:
      return np.asarray(x.addressable_data(0))
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))

  return jax.tree.map(one, tree)


def _bucket(n: int) -> int:
  """Next power of two >= max(n, 64): bounds the gather's compiled shapes."""
  return 1 << max(6, (max(n, 1) - 1).bit_length())


def allgather_bytes(data: bytes) -> list[bytes]:
  """Every process's byte string, in process order (a collective)."""
  if not is_multiprocess():
    return [data]
  sizes = multihost_utils.process_allgather(np.asarray([len(data)], np.int64))[
    :, 0
  ]
  buf = np.zeros(_bucket(int(sizes.max())), np.uint8)
  buf[: len(data)] = np.frombuffer(data, np.uint8)
  rows = multihost_utils.process_allgather(buf)
  return [rows[p, : int(sizes[p])].tobytes() for p in range(len(sizes))]


def allgather_objects(obj: T) -> list[T]:
  """Every process's picklable `obj`, in process order (a collective).

  Single process: [obj] (no copy, no pickling).
  """
  if not is_multiprocess():
    return [obj]
  return [
    pickle.loads(b)
    for b in allgather_bytes(
      pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    )
  ]


def allgather_lists(items: Sequence[T]) -> list[T]:
  """Concatenation, in process order, of every process's list of items."""
  if not is_multiprocess():
    return list(items)
  return [x for part in allgather_objects(list(items)) for x in part]


def global_any(flag: bool) -> bool:
  """True if `flag` is True on any process (a collective)."""
  if not is_multiprocess():
    return bool(flag)
  return bool(
    multihost_utils.process_allgather(np.asarray([bool(flag)], np.bool_)).any()
  )


def fingerprint(*arrays) -> int:
  """A 32-bit checksum of the given arrays' bytes, shapes and dtypes."""
  h = 0
  for a in arrays:
    a = np.ascontiguousarray(a)
    h = zlib.crc32(repr((a.shape, a.dtype.str)).encode(), h)
    h = zlib.crc32(a.tobytes(), h)
  return h


def assert_same_on_all_processes(what: str, *arrays) -> None:
  """Raises on every process if the arrays differ between processes.

  Used before a collective program whose host inputs must be identical
  everywhere (e.g. a sampler batch): a divergent process then fails with a
  message naming `what`, instead of hanging or silently mixing inputs.
  """
  if not is_multiprocess():
    return
  h = np.asarray([fingerprint(*arrays)], np.int64)
  got = multihost_utils.process_allgather(h)[:, 0]
  if (got != got[0]).any():
    raise RuntimeError(
      f"{what}: processes passed different host inputs (checksums by "
      f"process: {got.tolist()}); every process must call with the same "
      f"global data"
    )
