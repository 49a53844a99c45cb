"""Layer kernels on XLA:CPU: rank-2 GEMMs vs the rank-3/5 einsums they replaced.

    python benchmarks/bench_layer_kernels.py [--batch 16 --seq 256 --hidden 128]

Times forward and forward+backward (CPU ms, median of --runs, after one
warm-up) of (a) the MLP block written as `rla_jax.models.qwen.dense` (one
[B*T, D] x [D, F] GEMM) vs the einsum "btd,df->btf" form, and (b)
`grouped_attention` vs the 5-d einsum formulation it replaced
("btkgh,bksh->bkgts"). Both variants of each pair are checked to agree
(1e-4) before timing. Shapes default to the embedded warm-start model.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from rla_jax.models.ops import dense, grouped_attention


def _einsum_mlp(x, w_gate, w_up, w_down):
  gate = jnp.einsum("btd,df->btf", x, w_gate)
  up = jnp.einsum("btd,df->btf", x, w_up)
  return jnp.einsum("btf,fd->btd", jax.nn.silu(gate) * up, w_down)


def _dense_mlp(x, w_gate, w_up, w_down):
  return dense(jax.nn.silu(dense(x, w_gate)) * dense(x, w_up), w_down)


def _einsum_attention(q, k, v, mask):
  B, T, N, H = q.shape
  K = k.shape[1]
  q = q.reshape(B, T, K, N // K, H)
  scores = jnp.einsum("btkgh,bksh->bkgts", q, k) * (H**-0.5)
  scores = jnp.where(mask[:, None, None], scores, -1e30)
  out = jnp.einsum("bkgts,bksh->btkgh", jax.nn.softmax(scores, -1), v)
  return out.reshape(B, T, N, H)


def _time(fn, args, runs):
  jax.block_until_ready(fn(*args))
  out = []
  for _ in range(runs):
    t = time.process_time()
    jax.block_until_ready(fn(*args))
    out.append((time.process_time() - t) * 1e3)
  return float(np.median(out))


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--seq", type=int, default=256)
  ap.add_argument("--hidden", type=int, default=128)
  ap.add_argument("--mlp", type=int, default=384)
  ap.add_argument("--heads", type=int, default=4)
  ap.add_argument("--kv-heads", type=int, default=2)
  ap.add_argument("--head-dim", type=int, default=32)
  ap.add_argument("--runs", type=int, default=10)
  a = ap.parse_args()
  rng = np.random.default_rng(0)

  def f32(*s):
    return jnp.asarray(rng.normal(size=s) * 0.05, jnp.float32)

  B, T = a.batch, a.seq
  mlp_args = (
    f32(B, T, a.hidden),
    f32(a.hidden, a.mlp),
    f32(a.hidden, a.mlp),
    f32(a.mlp, a.hidden),
  )
  mask = jnp.broadcast_to(jnp.tril(jnp.ones((T, T), bool)), (B, T, T))
  att_args = (
    f32(B, T, a.heads, a.head_dim),
    f32(B, a.kv_heads, T, a.head_dim),
    f32(B, a.kv_heads, T, a.head_dim),
    mask,
  )
  print(
    f"B={B} T={T} D={a.hidden} F={a.mlp} N/K/H={a.heads}/{a.kv_heads}/"
    f"{a.head_dim}; CPU ms per call, median of {a.runs}"
  )
  print("| kernel | variant | fwd ms | fwd+bwd ms |\n|---|---|---|---|")
  for name, pair, args in (
    ("MLP block", (_einsum_mlp, _dense_mlp), mlp_args),
    ("attention", (_einsum_attention, grouped_attention), att_args),
  ):
    ref = pair[0](*args)
    np.testing.assert_allclose(pair[1](*args), ref, atol=1e-4)
    for label, fn in zip(
      ("einsum (old)", "rank-2 GEMMs (rla_jax)"), pair, strict=True
    ):
      n_diff = 3 if name == "attention" else 4

      def loss(*x, fn=fn):
        return jnp.sum(fn(*x) ** 2)

      grad = jax.jit(jax.grad(loss, argnums=tuple(range(n_diff))))
      print(
        f"| {name} | {label} | {_time(jax.jit(fn), args, a.runs):.1f} | "
        f"{_time(grad, args, a.runs):.1f} |"
      )


if __name__ == "__main__":
  main()
