"""rla_jax.models.attention: every implementation against the einsum
reference (outputs and gradients), blockwise memory, the models and the
sampler with blockwise attention, and the config check."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TINY_QWEN3
from flax import nnx

from rla_jax.errors import ConfigError
from rla_jax.models import Qwen, init_cache, unrolled
from rla_jax.models import attention as attn
from rla_jax.sampling.sampler import Sampler

TOL = 1e-5


@dataclasses.dataclass(frozen=True)
class Case:
  """B rows, T queries at slots end + arange(T) (end None: q_slot=None,
  S == T), S key slots; padded[b] leading slots invalid; slots at or past
  `written` (default S) invalid (a cache not yet filled)."""

  T: int
  S: int
  end: int | None
  padded: tuple[int, ...]
  written: int | None = None
  B: int = 2
  N: int = 4
  K: int = 2
  H: int = 8

  def inputs(self, seed=0):
    ks = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(ks[0], (self.B, self.T, self.N, self.H))
    k = jax.random.normal(ks[1], (self.B, self.K, self.S, self.H))
    v = jax.random.normal(ks[2], (self.B, self.K, self.S, self.H))
    slots = np.arange(self.S)
    valid = np.stack([slots >= p for p in self.padded])
    valid &= slots < (self.written or self.S)
    q_slot = None if self.end is None else self.end + jnp.arange(self.T)
    return q, k, v, jnp.asarray(valid), q_slot

  def seen(self):
    """[B, T] bool: the query sees at least one key (not fully masked)."""
    _, _, _, valid, q_slot = self.inputs()
    q_slot = jnp.arange(self.T) if q_slot is None else q_slot
    mask = (jnp.arange(self.S)[None, None] <= q_slot[None, :, None]) & valid[
      :, None
    ]
    return np.asarray(mask.any(-1))


CASES = {
  # training forward: causal, left padding (row 1's first 4 queries see
  # nothing but padding: fully masked rows)
  "train_left_pad": Case(T=10, S=10, end=None, padded=(0, 4)),
  # prefill into a cache: queries at slots [7, 12), slots >= 12 unwritten
  "cache_offset": Case(T=5, S=19, end=7, padded=(2, 6), written=12),
  # one decode step at slot 15
  "decode": Case(T=1, S=23, end=15, padded=(0, 9), written=16),
  # row 1 wholly padded: every one of its queries is fully masked
  "fully_padded_row": Case(T=6, S=6, end=None, padded=(1, 6)),
}


def _run(case, impl, weight_rows, **kw):
  """(output, grads of sum(out * w) w.r.t. q, k, v); w is zero on the
  rows where weight_rows is False."""
  q, k, v, valid, q_slot = case.inputs()
  w = jax.random.normal(jax.random.key(9), q.shape)
  w = w * jnp.asarray(weight_rows)[:, :, None, None]

  def f(q, k, v):
    return attn.attention(q, k, v, valid, q_slot, implementation=impl, **kw)

  out = jax.jit(f)(q, k, v)
  grad = jax.grad(lambda *a: jnp.sum(f(*a) * w), argnums=(0, 1, 2))
  grads = jax.jit(grad)(q, k, v)
  return np.asarray(out), [np.asarray(g) for g in grads]


def _assert_close(case, impl, rows=None, **kw):
  rows = np.ones((case.B, case.T), bool) if rows is None else rows
  ref, ref_grads = _run(case, "einsum", rows)
  out, grads = _run(case, impl, rows, **kw)
  assert np.isfinite(out).all()
  np.testing.assert_allclose(out[rows], ref[rows], atol=TOL, rtol=0)
  for g, r in zip(grads, ref_grads, strict=True):
    np.testing.assert_allclose(g, r, atol=TOL, rtol=0)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("blocks", [(3, 4), (128, 128)])
def test_blockwise_equals_einsum(case, blocks):
  """Tiles that do not divide T or S (padded inside), and one tile; fully
  masked rows included (both give the mean of v there)."""
  _assert_close(CASES[case], "blockwise", block_q=blocks[0], block_k=blocks[1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_xla_dot_product_attention_equals_einsum(case):
  """The cudnn path's call and mask, with implementation="xla" (CPU)."""
  _assert_close(CASES[case], "xla")


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cudnn: no GPU")
@pytest.mark.parametrize("case", sorted(CASES))
def test_cudnn_equals_einsum(case):
  c = CASES[case]
  _assert_close(c, "cudnn", rows=c.seen())


def test_pallas_tpu_equals_einsum_in_interpret_mode():
  """The Pallas TPU kernel in the TPU interpreter (slow: one small case,
  T not a multiple of its 128-row block). Fully masked rows are finite but
  are not the mean of v (padded key slots count there), so they are left
  out of the comparison and carry no gradient."""
  from jax.experimental.pallas import tpu as pltpu

  c = CASES["train_left_pad"]
  if jax.default_backend() == "tpu":
    _assert_close(c, "pallas_tpu", rows=c.seen())
    return
  with pltpu.force_tpu_interpret_mode():
    _assert_close(c, "pallas_tpu", rows=c.seen())


@pytest.mark.parametrize("case", ["cache_offset", "decode"])
def test_pallas_tpu_falls_back_to_blockwise_with_a_cache_offset(case):
  """A cache offset is outside the kernel's mask model: blockwise runs
  (no Pallas call, so this runs on CPU without the interpreter)."""
  _assert_close(CASES[case], "pallas_tpu")
  jaxpr = str(
    jax.make_jaxpr(
      lambda q, k, v, m, s: attn.attention(
        q, k, v, m, s, implementation="pallas_tpu"
      )
    )(*CASES[case].inputs())
  )
  assert "pallas_call" not in jaxpr and "custom_vjp_call" in jaxpr


def test_einsum_equals_the_old_grouped_attention():
  """The reference is today's ops.grouped_attention with the mask built
  from q_slot and kv_valid."""
  from rla_jax.models.ops import grouped_attention

  c = CASES["cache_offset"]
  q, k, v, valid, q_slot = c.inputs()
  mask = (jnp.arange(c.S)[None, None] <= q_slot[None, :, None]) & valid[:, None]
  new = attn.attention(q, k, v, valid, q_slot, implementation="einsum")
  np.testing.assert_array_equal(new, grouped_attention(q, k, v, mask))


def test_bfloat16_inputs_give_bfloat16_close_to_float32():
  c = CASES["cache_offset"]
  q, k, v, valid, q_slot = c.inputs()
  ref = attn.attention(q, k, v, valid, q_slot, implementation="einsum")
  for impl in ("einsum", "blockwise", "xla"):
    bf = [x.astype(jnp.bfloat16) for x in (q, k, v)]
    out = attn.attention(*bf, valid, q_slot, implementation=impl, block_k=4)
    assert out.dtype == jnp.bfloat16
    assert float(jnp.abs(out.astype(jnp.float32) - ref).max()) < 0.05


def _temp_bytes(f, *args):
  return jax.jit(f).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_blockwise_keeps_nothing_of_size_t_by_s():
  """T = S = 1024: the compiled forward's and gradient's temporaries stay
  below a quarter of one float32 score matrix (B*N*T*S*4 = 16 MiB; they
  are mostly the inputs in tile layout and one tile's scores); the einsum
  path's do not (the check can fail)."""
  B, T, N, K, H = 1, 1024, 4, 2, 32
  ks = jax.random.split(jax.random.key(0), 3)
  q = jax.random.normal(ks[0], (B, T, N, H))
  k = jax.random.normal(ks[1], (B, K, T, H))
  v = jax.random.normal(ks[2], (B, K, T, H))
  valid = jnp.ones((B, T), bool).at[:, :100].set(False)
  scores = B * N * T * T * 4

  def fwd(impl):
    return lambda q, k, v: attn.attention(q, k, v, valid, implementation=impl)

  def grad(impl):
    return jax.grad(lambda *a: jnp.sum(fwd(impl)(*a) ** 2), argnums=(0, 1, 2))

  sizes = {
    (impl, which): _temp_bytes(make(impl), q, k, v)
    for impl in ("blockwise", "einsum")
    for which, make in (("fwd", fwd), ("grad", grad))
  }
  print({key: f"{n / 2**20:.2f} MiB" for key, n in sizes.items()})
  assert sizes["blockwise", "fwd"] < scores / 4
  assert sizes["blockwise", "grad"] < scores / 4
  assert sizes["einsum", "fwd"] >= scores
  assert sizes["einsum", "grad"] >= scores


def test_auto_picks_by_backend_size_and_dtype(monkeypatch):
  n, f32, bf16 = attn.EINSUM_MAX_SCORES, jnp.float32, jnp.bfloat16
  monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
  assert attn.resolve("auto", 1, 1, 1, n, f32) == "einsum"
  assert attn.resolve("auto", 1, 1, 2, n, f32) == "blockwise"
  assert attn.resolve("xla", 9, 9, 9, n) == "xla"
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  assert attn.resolve("auto", 1, 1, 1, 1, bf16) == "cudnn"
  assert attn.resolve("auto", 1, 1, 1, 1, f32) == "blockwise"
  monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
  assert attn.resolve("auto", 1, 1, 1, 1, f32) == "pallas_tpu"


def test_unknown_implementation_is_named():
  with pytest.raises(ValueError, match="attention='flash' must be one of"):
    attn.attention(*CASES["decode"].inputs()[:4], implementation="flash")
  with pytest.raises(ValueError, match="attention='flash' must be one of"):
    Qwen(CFG, rngs=nnx.Rngs(0), attention="flash")


def test_config_model_attention_is_checked_before_any_model():
  from configs import alfworld
  from rla_jax.rl.loops import check_common_config

  config = alfworld.get_config("smoke")
  assert config.model.attention == "auto"
  check_common_config(config)
  config.model.attention = "flash"
  with pytest.raises(
    ConfigError,
    match=r"config\.model\.attention='flash' must be one of \['auto', ",
  ):
    check_common_config(config)


def test_attention_key_leaves_the_shipped_warm_start_loadable():
  """model.attention is not a warm-start setting: the shipped warm start's
  hash still matches the default config, whatever the kernel."""
  from configs import alfworld
  from rla_jax.warmstart import settings as ws
  from rla_jax.warmstart.directory import load_warm_start_dir

  for impl in ("auto", "blockwise"):
    config = alfworld.get_config()
    config.model.attention = impl
    load_warm_start_dir(ws.SHIPPED_DIR, ws.resolved_settings(config), "x")


# ------------------------------------------------------------ model level
CFG = TINY_QWEN3


def _model(impl):
  return Qwen(CFG, rngs=nnx.Rngs(0), attention=impl)


def _training_logits(impl, tokens, mask):
  graphdef, state = nnx.split(_model(impl))
  run = jax.jit(lambda st, t, m: nnx.merge(graphdef, st)(t, m)[0])
  return run(state, tokens, jnp.asarray(mask))


def test_training_and_cached_forward_logits_unchanged_with_blockwise():
  """Training forward (scanned, causal + left padding) and a prefill of 13
  tokens then 8 more through the cache (a cache offset)."""
  rng = np.random.RandomState(0)
  tokens = jnp.asarray(rng.randint(0, 211, (3, 21)))
  mask = np.ones((3, 21), np.int32)
  mask[1, :6], mask[2, :1] = 0, 0
  real = mask.astype(bool)
  ref = _training_logits("einsum", tokens, mask)
  got = _training_logits("blockwise", tokens, mask)
  np.testing.assert_allclose(
    np.asarray(got)[real], np.asarray(ref)[real], atol=TOL
  )
  outs = {}
  for impl in ("einsum", "blockwise"):
    m = _model(impl)
    params, cache = unrolled.unstack(m), init_cache(CFG, 3, 40)
    step = jax.jit(functools.partial(unrolled.forward, CFG, attention=impl))
    _, cache = step(params, tokens[:, :13], jnp.asarray(mask[:, :13]), cache)
    h2, _ = step(params, tokens[:, 13:], jnp.asarray(mask[:, 13:]), cache)
    outs[impl] = np.asarray(unrolled.logits(CFG, params, h2))
  np.testing.assert_allclose(outs["blockwise"], outs["einsum"], atol=TOL)
  np.testing.assert_allclose(
    outs["einsum"][real[:, 13:]], np.asarray(ref)[:, 13:][real[:, 13:]],
    atol=TOL,
  )  # fmt: skip


def test_sampler_greedy_tokens_and_logprobs_unchanged_with_blockwise():
  rng = np.random.RandomState(1)
  prompts = [list(map(int, rng.randint(3, 211, size=n))) for n in (3, 17, 9)]
  outs = {
    impl: Sampler(_model(impl), max_prompt_len=32, max_new_tokens=8).generate(
      prompts, greedy=True
    )
    for impl in ("einsum", "blockwise")
  }
  assert outs["blockwise"].tokens == outs["einsum"].tokens
  got, ref = outs["blockwise"].logprobs, outs["einsum"].logprobs
  for a, b in zip(got, ref, strict=True):
    np.testing.assert_allclose(a, b, atol=TOL)
