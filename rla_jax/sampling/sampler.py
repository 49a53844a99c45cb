"""Batched, jit-compiled sampler with a donated KV cache.

Two programs (`rla_jax.sampling.programs`) do all the work:
  * prefill: one forward pass that appends a left-padded chunk [B, T] to
    the cache and returns the last position's logits [B, V];
  * decode: a `lax.while_loop` that samples a token, appends it to the cache
    and computes the next logits, until every row has hit a stop token or
    its budget (early exit).
Prefill can run in bounded pieces (`prefill_rows` rows per batch shard,
`prefill_tokens` columns per cache-continuing slice; `rla_jax.sampling
.prefill`): the same outputs with a fraction of the whole batch's
temporaries. Both donate the cache, so it is updated in place. Every
sampled token is written to the cache (including the stop token), so a
`Session` (`rla_jax.sampling.session`) continues an agent's conversation
by appending only the new observation tokens: per-turn cost grows with the
new tokens, not with the history.

Compiled shapes are bounded: chunk length and batch size are rounded up to
buckets; temperature, top-p, top-k, greedy, the token budget, the seed and
the row seeds are traced values.

Sampling noise: without row seeds one key, key(seed) folded with the decode
step, draws the whole batch's noise, so a row's draws depend on its position
and on the batch bucket. With `row_seeds` (one int per prompt), sample j of
prompt i draws its noise at decode step t from
fold_in(fold_in(fold_in(key(seed), row_seeds[i]), j), t) alone: the same in
any batch, at any position, in any bucket, whatever the other rows do
(common random numbers for paired comparisons).

Multi-process (a mesh spanning several hosts): every process calls
`generate` / `Session.turn` with the same global rows and sampling
arguments (checked: a mismatch raises on every process); inputs are placed
shard by shard with `distributed.put_global` and the outputs are gathered to
every process, so each host gets the full `SampleOutput`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from rla_jax import distributed
from rla_jax import sharding as shd
from rla_jax.models.kv_cache import KVCache
from rla_jax.models.qwen import Qwen
from rla_jax.sampling import image_prefill, length_groups, param_copy, programs
from rla_jax.sampling import prefill as pieces
from rla_jax.sampling import rows as rows_io
from rla_jax.sampling.buckets import geometric_buckets, pick_bucket
from rla_jax.sampling.cache_factory import KVCacheFactory
from rla_jax.sampling.placement import Placement
from rla_jax.sampling.rows import ChunkInputs, SampleOutput
from rla_jax.sampling.session import Session


@dataclasses.dataclass(frozen=True)
class _SamplingArgs:
  """One call's sampling arguments, traced by the decode program (budget:
  the tokens to generate, in [1, max_new_tokens]; row_seeded: whether
  row seeds were given)."""

  seed: int
  temperature: float
  top_p: float
  top_k: int
  greedy: bool
  budget: int
  row_seeded: bool


class Sampler:
  """Samples continuations of token-id prompts from a `Qwen` model.

  Args:
    model: the policy or reward model (its parameters are re-read by
      `update_params`, e.g. after a training step).
    max_prompt_len: longest chunk (prompt or continuation) accepted.
    max_new_tokens: static cap on tokens generated per call.
    stop_token_ids: generation stops at any of these ids.
    pad_id: id written for padding and finished rows.
    prompt_buckets / batch_buckets: allowed padded shapes.
    mesh / rules: optional device mesh and logical-axis rules; the batch is
      sharded by the "batch" rule and weights by the sampling rules.
    prefill_rows: most rows per prefill piece on each batch shard (each
      device's rows; without a mesh, of the batch); 0 = the whole batch in
      one piece. Bounds prefill's temporaries (`rla_jax.sampling.prefill`).
    prefill_tokens: most prompt columns per prefill piece (the chunk is
      appended as successive cache-continuing slices); 0 = the whole chunk.
    limit_key: where max_prompt_len was configured (e.g.
      "config.rollout.max_prompt_len"), named by the too-long-prompt error.
    image_grids: (Qwen3-VL) the patch grids (h, w) images may have; None
      accepts any. images_per_grid: the fewest images a grid's group is
      padded to (counts round up to powers of two; `image_prefill`).
    split_by_length: row-seeded text calls run one call per prompt bucket
      (`generate`).
  """

  def __init__(
    self,
    model: Qwen,
    *,
    max_prompt_len: int,
    max_new_tokens: int,
    stop_token_ids: Sequence[int] = (),
    pad_id: int = 0,
    prompt_buckets: Sequence[int] | None = None,
    batch_buckets: Sequence[int] | None = None,
    mesh: Mesh | None = None,
    rules=shd.SAMPLE_RULES,
    prefill_rows: int = 0,
    prefill_tokens: int = 0,
    limit_key: str = "",
    image_grids: Sequence[tuple[int, int]] | None = None,
    images_per_grid: int = 1,
    split_by_length: bool = True,
  ):
    self.cfg = model.cfg
    self.split_by_length = bool(split_by_length)
    self.vl_cfg = getattr(model, "vl_cfg", None)  # a Qwen3-VL model
    self.image_grids = (
      None if image_grids is None else {tuple(g) for g in image_grids}
    )
    self.images_per_grid = int(images_per_grid)
    self.limit_key = limit_key
    self.max_prompt_len = int(max_prompt_len)
    self.max_new_tokens = int(max_new_tokens)
    self.stop_token_ids = np.asarray(list(stop_token_ids) or [-1], np.int32)
    self.pad_id = int(pad_id)
    # 4 sizes per octave: at most 25 % padding (a policy turn of 36 agents
    # padded to 64 rows x 512 slots ran 1.8x slower than at 40 x 448).
    self.prompt_buckets = tuple(
      sorted(
        prompt_buckets
        or geometric_buckets(16, self.max_prompt_len, per_octave=4, multiple=16)
      )
    )
    if self.prompt_buckets[-1] < self.max_prompt_len:
      self.prompt_buckets += (self.max_prompt_len,)
    self.batch_buckets = tuple(
      sorted(batch_buckets or geometric_buckets(1, 4096, per_octave=4))
    )
    self.placement = Placement(mesh, rules)
    self.prefill_plan = self._piece_plan(int(prefill_rows), int(prefill_tokens))
    self.caches = KVCacheFactory(self.cfg, self.placement, self.max_new_tokens)
    self._copy_layers = param_copy.LayerCopier(self.placement)
    self.update_params(model)

  # ----------------------------------------------------------- params
  def update_params(self, model: Qwen) -> None:
    """Takes the current parameters of `model` (placed for sampling): the
    sampler's own copy, unstacked per layer, floating parameters in the
    model's compute dtype (`rla_jax.sampling.param_copy`)."""
    model = self.placement.module(model)
    compute = jnp.dtype(model.dtype)
    self.params = self._copy_layers(model, compute)
    if self.vl_cfg is not None:  # the vision tower's sampling copy
      self.vision_graphdef, self.vision_state = param_copy.vision(
        model, compute
      )
    self.dtype = compute
    self.caches.follow(self.params, model.dtype)
    self.attention = model.attention

  # ----------------------------------------------------------- checks
  def check_rows(self, rows: Sequence[Sequence[int]], allow_empty: bool):
    """`rows.check_prompt_rows` against this sampler's limits."""
    rows_io.check_prompt_rows(
      rows,
      allow_empty=allow_empty,
      max_prompt_len=self.max_prompt_len,
      vocab_size=self.cfg.vocab_size,
      limit_key=self.limit_key,
    )

  check_row_seeds = staticmethod(rows_io.check_row_seeds)

  def batch_bucket(self, n: int) -> int:
    """The padded batch size of n rows (a multiple of the batch shards)."""
    b = pick_bucket(n, self.batch_buckets, "batch size")
    div = self.placement.batch_shards
    return -(-b // div) * div  # the batch axis must divide evenly

  def _piece_plan(self, rows: int, tokens: int) -> pieces.PiecePlan:
    if rows < 0 or tokens < 0:
      raise ValueError(
        f"prefill_rows={rows} / prefill_tokens={tokens} must be >= 0"
      )
    axes = self.placement.batch_axes
    return pieces.PiecePlan(
      rows=rows,
      tokens=tokens,
      shards=self.placement.batch_shards,
      mesh=self.placement.mesh if axes else None,
      batch_axes=axes or None,
    )

  def _prefill_program(self):
    """(jitted prefill, its leading arguments) as `_prefill_chunk` calls
    it: the whole-batch forward, or the pieces of `prefill_plan`."""
    if self.prefill_plan.whole:
      return programs.prefill_whole, (self.cfg, self.dtype, self.params)
    plan = self.prefill_plan
    return pieces.prefill, (self.cfg, self.dtype, plan, self.params)

  def lower_prefill(self, cache: KVCache, tokens, mask) -> jax.stages.Lowered:
    """The prefill program `run_chunk` runs, lowered for these inputs (for
    checks of its compiled memory and collectives)."""
    prefill, lead = self._prefill_program()
    return prefill.lower(*lead, cache, tokens, mask, attention=self.attention)

  # ----------------------------------------------------------- core
  def run_chunk(
    self,
    cache: KVCache,
    rows,
    active_rows: np.ndarray,
    *,
    seed,
    temperature,
    top_p,
    top_k,
    greedy,
    max_new_tokens,
    num_samples: int = 1,
    row_seeds=None,
    image_layout=None,
  ) -> tuple[KVCache, SampleOutput]:
    """Prefills `rows` into `cache`, then decodes num_samples continuations
    per row (rows of the output are row-major: row i, sample j -> i*m+j).
    row_seeds (checked by the caller): one int per row, or None.
    image_layout: the chunk's images laid out by `image_chunk` (Qwen3-VL),
    or None for a text chunk. Returns the updated cache and the output."""
    budget = int(max_new_tokens or self.max_new_tokens)
    if not 1 <= budget <= self.max_new_tokens:
      raise ValueError(
        f"max_new_tokens={budget} outside [1, {self.max_new_tokens}]"
      )
    bucket = self.chunk_bucket(rows)
    used = int(cache.end)
    self.caches.check_room(used, bucket, cache.num_slots)
    chunk = rows_io.chunk_inputs(
      rows,
      active_rows,
      num_samples,
      row_seeds,
      bucket=bucket,
      cache_rows=cache.batch_size,
      used=used,
      pad_id=self.pad_id,
    )
    args = _SamplingArgs(
      seed, temperature, top_p, top_k, greedy, budget, row_seeds is not None
    )
    self._check_same_call(chunk, args)
    cache, logits = self._prefill_chunk(cache, chunk, image_layout)
    m, active = int(num_samples), chunk.active
    if m > 1:
      cache, logits = programs.repeat_rows(cache, logits, m)
      active = np.repeat(active, m)
    cache, tok, lp, stopped = self._decode(cache, logits, active, chunk, args)
    n = len(rows) * m
    return cache, rows_io.trim_rows(
      tok[:n], lp[:n], stopped[:n], active, budget, self._stop_set
    )

  def _check_same_call(self, chunk: ChunkInputs, args: _SamplingArgs) -> None:
    """On a mesh spanning several processes, raises on every process if
    the chunk or the sampling arguments differ between them."""
    if not self.placement.spans_processes:
      return
    ints = [args.seed, args.top_k, bool(args.greedy), args.budget, chunk.used]
    distributed.assert_same_on_all_processes(
      "Sampler call (rows and sampling arguments)",
      chunk.ids,
      chunk.mask,
      chunk.active,
      chunk.seeds,
      np.asarray([*ints, not args.row_seeded], np.int64),
      np.asarray([args.temperature, args.top_p], np.float64),
    )

  def _decode(self, cache, logits, active, chunk, args: _SamplingArgs):
    """The decode program from the prefilled rows' logits: (cache, tokens,
    log-probs, stopped), the last three gathered to the host."""
    place = self.placement.place
    cache, tok, lp, stopped, _ = programs.decode(
      self.cfg,
      self.dtype,
      self.max_new_tokens,
      self.params,
      cache,
      logits,
      place(active, ("batch",)),
      jax.random.key(args.seed),
      place(chunk.seeds, ("batch",)),
      place(chunk.samples, ("batch",)),
      jnp.bool_(args.row_seeded),
      jnp.float32(args.temperature),
      jnp.float32(args.top_p),
      jnp.int32(args.top_k),
      jnp.bool_(args.greedy),
      jnp.int32(args.budget),
      jnp.asarray(self.stop_token_ids),
      jnp.int32(self.pad_id),
      attention=self.attention,
    )
    return cache, *distributed.to_host((tok, lp, stopped))

  def _prefill_chunk(self, cache: KVCache, chunk: ChunkInputs, image_layout):
    """(cache, last-position logits [B, V]) after appending the chunk: the
    text prefill program, or the Qwen3-VL one with the chunk's images."""
    place = self.placement.place
    ids = place(chunk.ids, ("batch", "length"))
    mask = place(chunk.mask, ("batch", "length"))
    if image_layout is None:
      prefill, lead = self._prefill_program()
      return prefill(*lead, cache, ids, mask, attention=self.attention)
    return image_prefill.prefill_with_images(
      self.cfg,
      self.dtype,
      self.vision_graphdef,
      self.params,
      self.vision_state,
      cache,
      ids,
      mask,
      place(image_layout.offsets, ("batch", "length", None)),
      place(image_layout.feature_rows, ("batch", "length")),
      jax.tree.map(lambda x: place(x, (None,) * x.ndim), image_layout.images),
      attention=self.attention,
    )

  def chunk_bucket(self, rows) -> int:
    """The padded length of a chunk of rows (its prompt bucket)."""
    return pick_bucket(
      max(1, max(len(r) for r in rows)), self.prompt_buckets, "prompt length"
    )

  def image_chunk(self, rows, images, T: int, B: int):
    """The chunk's images laid out (`qwen3_vl.inputs.ImageLayout`, checked
    by `image_prefill.image_chunk`), or None for a text chunk
    (no images given, or none in any row)."""
    if images is None or not any(images):
      return None
    if self.vl_cfg is None:
      raise ValueError("images were given to a sampler of a text-only model")
    return image_prefill.image_chunk(
      rows, images, T, B, self.vl_cfg, self.image_grids, self.images_per_grid
    )

  @property
  def _stop_set(self) -> set[int]:
    return set(int(t) for t in self.stop_token_ids)

  def generate(
    self,
    prompts: Sequence[Sequence[int]],
    *,
    seed: int = 0,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    greedy: bool = False,
    max_new_tokens: int | None = None,
    num_samples: int = 1,
    row_seeds: Sequence[int] | None = None,
    images=None,
  ) -> SampleOutput:
    """Samples num_samples continuations per prompt (a fresh cache per
    call); the prompt is prefilled once and its cache shared by its
    samples. Output row i * num_samples + j is sample j of prompt i.

    row_seeds: None (one noise stream for the batch), or one int in
    [0, 2**32) per prompt: sample j of prompt i then draws from its own
    stream named by (seed, row_seeds[i], j), independent of the other rows,
    its position and the batch bucket (module docstring). Prompts given the
    same row seed share noise. images (Qwen3-VL): per prompt, the
    `qwen3_vl.inputs.Image`s of its image-pad tokens, in order.

    With row_seeds and split_by_length (text prompts), the rows are
    sampled in one call per prompt bucket (`length_groups`): the same
    tokens, each row padded only to its own bucket."""
    self.check_rows(prompts, allow_empty=False)
    self.check_row_seeds(row_seeds, len(prompts))
    if num_samples < 1:
      raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    kw = dict(
      seed=seed,
      temperature=temperature,
      top_p=top_p,
      top_k=top_k,
      greedy=greedy,
      max_new_tokens=max_new_tokens,
      num_samples=num_samples,
    )
    if self.split_by_length and row_seeds is not None and images is None:
      return self._generate_by_length(prompts, row_seeds, **kw)
    return self._generate_call(prompts, row_seeds, images, **kw)

  def _generate_by_length(self, prompts, row_seeds, **kw) -> SampleOutput:
    """Row-seeded text prompts sampled in one `_generate_call` per prompt
    bucket (`length_groups`), the rows put back in prompt order."""
    groups = length_groups.bucket_groups(
      [len(p) for p in prompts], self.prompt_buckets
    )
    if len(groups) == 1:
      return self._generate_call(prompts, row_seeds, None, **kw)
    parts = [
      (
        g,
        self._generate_call(
          [prompts[i] for i in g], [row_seeds[i] for i in g], None, **kw
        ),
      )
      for g in groups
    ]
    return SampleOutput(
      *(
        length_groups.merge_rows(
          [(g, getattr(out, name)) for g, out in parts],
          len(prompts),
          kw["num_samples"],
        )
        for name in ("tokens", "logprobs", "stopped")
      )
    )

  def _generate_call(self, prompts, row_seeds, images, **kw) -> SampleOutput:
    """One sampler call over all of `prompts` (checked by `generate`); kw:
    `run_chunk`'s sampling keywords."""
    B = self.batch_bucket(len(prompts))
    T = self.chunk_bucket(prompts)
    # Laid out (and bad images refused) before anything compiles.
    layout = self.image_chunk(prompts, images, T, B)
    cache = self.caches.new(B, T + self.max_new_tokens)
    _, out = self.run_chunk(
      cache,
      prompts,
      np.ones(len(prompts), bool),
      row_seeds=row_seeds,
      image_layout=layout,
      **kw,
    )
    return out

  def session(self, batch_size: int, num_slots: int) -> Session:
    """A multi-turn session whose rows keep their cache between turns."""
    return Session(self, batch_size, num_slots)
