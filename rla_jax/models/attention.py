"""Softmax attention with a structured (causal-over-slots + key validity) mask.

One masking description serves the training forward and the cached
(prefill / decode) forward, so no [B, T, S] or [B, N, T, S] mask is built
by the callers:

  q_slot [T] or [B, T] int32: the cache slot each query sits at;
  kv_valid [B, S] bool: which key slots hold a real token.

Query i of row b attends key slot j iff j <= q_slot[b, i] and
kv_valid[b, j]. Training forward: q_slot = arange(T) (pass None), kv_valid
= the padding mask; cached forward: q_slot = end + arange(T), kv_valid =
the updated cache.valid.

Dimension letters as in `config.QwenConfig`: B batch, T queries, S key
slots, N query heads, K kv heads, G = N/K, H head_dim. q: [B, T, N, H];
k, v: [B, K, S, H]; output [B, T, N, H] in v's dtype. Scores and softmax in
float32: out = softmax(where(mask, q.k / sqrt(H), MASK_VALUE)) v.

A fully masked query row (a left-padding query: it sees only padded slots)
gets a finite output: with the finite MASK_VALUE every slot scores the
same, so einsum, blockwise and xla give the mean of v over the S slots and
the row passes no gradient to q or k (cudnn and pallas_tpu: finite, not
necessarily that mean). Callers ignore such rows.

Implementations (`implementation=`; `IMPLEMENTATIONS`):
  einsum      the full [B, K, G*T, S] score matrix (`ops.grouped_attention`
              layout): the reference, fastest on CPU for short sequences.
  blockwise   plain JAX online softmax over [block_q x block_k] tiles with
              a FlashAttention-2 style custom VJP (backward recomputes the
              tile probabilities from the saved row max and sum): nothing of
              size T x S in forward or backward.
  cudnn       jax.nn.dot_product_attention(implementation="cudnn") (GPU),
              with the structure as a [B, 1, T, S] bool mask (its
              seq-length model cannot express left padding).
  xla         the same call with implementation="xla" (CPU parity check).
  pallas_tpu  the Pallas TPU flash attention kernel (causal + segment ids):
              only for q_slot=None (S == T); a cache offset is not
              expressible in its mask model and falls back to blockwise.
              K/V are repeated to N heads (the kernel has no grouped heads).
  auto        tpu -> pallas_tpu; gpu -> cudnn for bfloat16/float16 inputs
              (cuDNN's fused attention takes no float32), else blockwise;
              cpu -> einsum while B*N*T*S <= EINSUM_MAX_SCORES, else
              blockwise.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from rla_jax.models.ops import MASK_VALUE, grouped_attention

_HALF = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
IMPLEMENTATIONS = ("auto", "einsum", "blockwise", "cudnn", "xla", "pallas_tpu")

# "auto" on CPU: the einsum path while the float32 score matrix has at most
# this many elements (256 MiB per call). Covers the embedded default's
# shapes: training B=16 x T<=512 (2^24) and the rollout prefill's 64 rows x
# 512 slots (2^26). One run on the 2-core CPU (load ~6, N/K/H=4/2/32,
# einsum vs blockwise ms): fwd+bwd B16 T256 123 vs 112, B16 T512 503 vs
# 413; prefill fwd B40 T448 S480 354 vs 393.
EINSUM_MAX_SCORES = 2**26


def check_implementation(name: str, where: str = "attention") -> None:
  """Raises ValueError naming `where` unless name is an implementation."""
  if name not in IMPLEMENTATIONS:
    raise ValueError(f"{where}={name!r} must be one of {list(IMPLEMENTATIONS)}")


def resolve(name: str, B: int, N: int, T: int, S: int, dtype=None) -> str:
  """The implementation "auto" stands for on this backend, shape and
  input dtype (module docstring)."""
  check_implementation(name)
  if name != "auto":
    return name
  backend = jax.default_backend()
  if backend == "tpu":
    return "pallas_tpu"
  if backend == "gpu":
    half = dtype is not None and jnp.dtype(dtype) in _HALF
    return "cudnn" if half else "blockwise"
  return "einsum" if B * N * T * S <= EINSUM_MAX_SCORES else "blockwise"


def attention(
  q,
  k,
  v,
  kv_valid,
  q_slot=None,
  *,
  implementation: str = "auto",
  block_q: int = 128,
  block_k: int = 128,
):
  """Masked grouped-head attention (module docstring: shapes and mask).

  q: [B, T, N, H]; k, v: [B, K, S, H]; kv_valid: [B, S] bool; q_slot: [T]
  or [B, T] int, None = arange(T). Returns [B, T, N, H] in v's dtype.
  """
  B, T, N, _ = q.shape
  S = k.shape[2]
  impl = resolve(implementation, B, N, T, S, q.dtype)
  if impl == "pallas_tpu" and (q_slot is not None or S != T):
    impl = "blockwise"  # a cache offset: not in the kernel's mask model
  if impl == "pallas_tpu":
    return _pallas_tpu(q, k, v, kv_valid)
  slots = jnp.arange(T, dtype=jnp.int32) if q_slot is None else q_slot
  slots = jnp.broadcast_to(jnp.asarray(slots, jnp.int32), (B, T))
  kv_valid = kv_valid.astype(bool)
  if impl == "einsum":
    return _einsum(q, k, v, slots, kv_valid)
  if impl == "blockwise":
    bq, bk = min(block_q, T), min(block_k, S)
    return _blockwise(bq, bk, q, k, v, slots, kv_valid)
  return _dot_product_attention(q, k, v, slots, kv_valid, impl)


def _mask(q_slot, kv_valid, k_slot):
  """[B, Tq, Sk] bool: k_slot[j] <= q_slot[b, i] and kv_valid[b, j]."""
  return (k_slot[None, None, :] <= q_slot[:, :, None]) & kv_valid[:, None, :]


def _einsum(q, k, v, q_slot, kv_valid):
  """The full [B, K, G*T, S] float32 scores: `ops.grouped_attention` with
  the [B, T, S] mask built from the structure."""
  S = k.shape[2]
  mask = _mask(q_slot, kv_valid, jnp.arange(S, dtype=jnp.int32))
  return grouped_attention(q, k, v, mask)


def _dot_product_attention(q, k, v, q_slot, kv_valid, impl):
  """jax.nn.dot_product_attention (grouped heads native) with the
  structure as a [B, 1, T, S] bool mask."""
  S = k.shape[2]
  mask = _mask(q_slot, kv_valid, jnp.arange(S, dtype=jnp.int32))[:, None]
  out = jax.nn.dot_product_attention(
    q,
    k.transpose(0, 2, 1, 3),
    v.transpose(0, 2, 1, 3),
    mask=mask,
    implementation=impl,
  )
  return out.astype(v.dtype)


# ----------------------------------------------------------------- blockwise
def _blocks(x, axis: int, b: int, fill=0):
  """Pads `axis` of x to a multiple of b and splits it into [n, ..., b, ...]
  (block index first, the within-block index kept at `axis`)."""
  n = -(-x.shape[axis] // b)
  pad = [(0, 0)] * x.ndim
  pad[axis] = (0, n * b - x.shape[axis])
  x = jnp.pad(x, pad, constant_values=fill)
  x = x.reshape(*x.shape[:axis], n, b, *x.shape[axis + 1 :])
  return jnp.moveaxis(x, axis, 0)


def _unblock(x, axis: int, size: int):
  """Inverse of `_blocks`: [n, ..., b, ...] -> [..., size, ...]."""
  x = jnp.moveaxis(x, 0, axis)
  x = x.reshape(*x.shape[:axis], -1, *x.shape[axis + 2 :])
  return jax.lax.slice_in_dim(x, 0, size, axis=axis)


def _block_layout(bq, bk, q, k, v, q_slot, kv_valid):
  """Tiles: q [nq, B, K, G, bq, H], q slots [nq, B, bq] (padding -1: sees
  nothing), k/v [nk, B, K, bk, H], validity [nk, B, bk], key slots and
  in-range flags [nk, bk] (padded keys get probability 0)."""
  B, T, N, H = q.shape
  K, S = k.shape[1], k.shape[2]
  qg = q.reshape(B, T, K, N // K, H).transpose(0, 2, 3, 1, 4)
  k_slot = _blocks(jnp.arange(S, dtype=jnp.int32), 0, bk, fill=S)
  return (
    _blocks(qg, 3, bq),
    _blocks(q_slot, 1, bq, fill=-1),
    _blocks(k, 2, bk),
    _blocks(v, 2, bk),
    _blocks(kv_valid, 1, bk, fill=False),
    k_slot,
    k_slot < S,
  )


def _tile_scores(qi, sqi, kj, vkj, kslj):
  """One tile's masked float32 scores [B, K, G, bq, bk] and its mask."""
  s = jnp.einsum(
    "bkgqh,bksh->bkgqs", qi, kj, preferred_element_type=jnp.float32
  )
  allowed = _mask(sqi, vkj, kslj)[:, None, None]
  s = jnp.where(allowed, s * (qi.shape[-1] ** -0.5), MASK_VALUE)
  return s, allowed


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _blockwise(bq, bk, q, k, v, q_slot, kv_valid):
  """Online-softmax attention over tiles (the `attention` contract)."""
  return _blockwise_fwd(bq, bk, q, k, v, q_slot, kv_valid)[0]


def _blockwise_fwd(bq, bk, q, k, v, q_slot, kv_valid):
  """Per query tile, a scan over key tiles keeps the running max m, sum l
  and l-scaled output acc ([B, K, G, bq(, H)] float32): m' = max(m, max s),
  l' = l e^(m - m') + sum e^(s - m'), acc' = acc e^(m - m') + e^(s - m') v.
  Returns out and the residuals (tiles, out, m, l)."""
  B, T, N, H = q.shape
  lay = _block_layout(bq, bk, q, k, v, q_slot, kv_valid)
  qb, sqb, kb, vb, vkb, kslb, kinb = lay

  def q_tile(x):
    qi, sqi = x

    def k_tile(c, y):
      m, total, acc = c
      kj, vj, vkj, kslj, kinj = y
      s, _ = _tile_scores(qi, sqi, kj, vkj, kslj)
      m_new = jnp.maximum(m, s.max(-1))
      p = jnp.where(kinj, jnp.exp(s - m_new[..., None]), 0.0)
      corr = jnp.exp(m - m_new)
      pv = jnp.einsum(
        "bkgqs,bksh->bkgqh",
        p.astype(vj.dtype),
        vj,
        preferred_element_type=jnp.float32,
      )
      return (m_new, total * corr + p.sum(-1), acc * corr[..., None] + pv), None

    shape = qi.shape[:-1]
    init = (
      jnp.full(shape, MASK_VALUE, jnp.float32),
      jnp.zeros(shape, jnp.float32),
      jnp.zeros(qi.shape, jnp.float32),
    )
    (m, total, acc), _ = jax.lax.scan(k_tile, init, (kb, vb, vkb, kslb, kinb))
    return (acc / total[..., None]).astype(v.dtype), m, total

  ob, mb, lb = jax.lax.map(q_tile, (qb, sqb))
  out = _unblock(ob, 3, T).transpose(0, 3, 1, 2, 4).reshape(B, T, N, H)
  return out, (lay, ob, mb, lb, q_slot, kv_valid)  # the last two: T and S


def _blockwise_bwd(bq, bk, res, g):
  """FlashAttention-2 backward: per key tile, a scan over query tiles
  recomputes p = e^(s - m) / l (m and l kept apart, not lse = m + log l:
  a fully masked row's m is MASK_VALUE, which absorbs log l) and
  accumulates dv += p^T dO, ds = p (dO v^T - D) (0 where masked),
  dk += ds^T q / sqrt(H); dq += ds k / sqrt(H) is summed over key tiles.
  D = rowsum(dO * out)."""
  (qb, sqb, kb, vb, vkb, kslb, kinb), ob, mb, lb, q_slot, kv_valid = res
  _, B, K, G, _, H = qb.shape
  T, S, N = q_slot.shape[1], kv_valid.shape[1], K * G
  gb = _blocks(g.reshape(B, T, K, N // K, H).transpose(0, 2, 3, 1, 4), 3, bq)
  db = jnp.sum(gb.astype(jnp.float32) * ob.astype(jnp.float32), axis=-1)
  scale = H**-0.5

  def k_tile(dq, y):
    kj, vj, vkj, kslj, kinj = y

    def q_tile(c, x):
      dk, dv = c
      qi, sqi, gi, mi, li, di = x
      s, allowed = _tile_scores(qi, sqi, kj, vkj, kslj)
      p = jnp.where(kinj, jnp.exp(s - mi[..., None]) / li[..., None], 0.0)
      f32 = functools.partial(jnp.einsum, preferred_element_type=jnp.float32)
      dv = dv + f32("bkgqs,bkgqh->bksh", p.astype(gi.dtype), gi)
      dp = f32("bkgqh,bksh->bkgqs", gi, vj)
      ds = jnp.where(allowed, p * (dp - di[..., None]), 0.0) * scale
      dk = dk + f32("bkgqs,bkgqh->bksh", ds, qi.astype(jnp.float32))
      return (dk, dv), f32("bkgqs,bksh->bkgqh", ds, kj.astype(jnp.float32))

    zero = jnp.zeros(kj.shape, jnp.float32)
    (dk, dv), dqj = jax.lax.scan(
      q_tile, (zero, zero), (qb, sqb, gb, mb, lb, db)
    )
    return dq + dqj, (dk, dv)

  dq0 = jnp.zeros(qb.shape, jnp.float32)
  dqb, (dkb, dvb) = jax.lax.scan(k_tile, dq0, (kb, vb, vkb, kslb, kinb))
  dq = _unblock(dqb, 3, T).transpose(0, 3, 1, 2, 4).reshape(B, T, N, H)
  dk = _unblock(dkb, 2, S).astype(kb.dtype)
  dv = _unblock(dvb, 2, S).astype(vb.dtype)
  return dq.astype(qb.dtype), dk, dv, None, None


_blockwise.defvjp(_blockwise_fwd, _blockwise_bwd)


# ---------------------------------------------------------------- pallas_tpu
def _pallas_tpu(q, k, v, kv_valid):
  """Pallas TPU flash attention for q_slot = arange(T), S == T: causal=True
  and segment ids (queries 1, keys 1 where valid else 0). K/V repeated to
  N heads; T padded to a multiple of the kernel's 128-row blocks (padded
  keys get segment 0). On CPU it runs (slowly) inside
  `jax.experimental.pallas.tpu.force_tpu_interpret_mode()` (the tests)."""
  from jax.experimental.pallas.ops.tpu import flash_attention as fa

  B, T, N, H = q.shape
  K = k.shape[1]
  tp = -(-T // 128) * 128
  pad = ((0, 0), (0, 0), (0, tp - T), (0, 0))
  qn = jnp.pad(q.transpose(0, 2, 1, 3), pad)
  kn = jnp.pad(jnp.repeat(k, N // K, axis=1), pad)
  vn = jnp.pad(jnp.repeat(v, N // K, axis=1), pad)
  seg_kv = jnp.pad(kv_valid.astype(jnp.int32), ((0, 0), (0, tp - T)))
  seg = fa.SegmentIds(q=jnp.ones((B, tp), jnp.int32), kv=seg_kv)
  call = functools.partial(
    fa.flash_attention, causal=True, sm_scale=H**-0.5, segment_ids=seg
  )
  return call(qn, kn, vn)[:, :, :T].transpose(0, 2, 1, 3).astype(v.dtype)
