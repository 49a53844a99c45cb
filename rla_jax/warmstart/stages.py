"""What every warm-start build shares (the ALFWorld `build` and the coding
`coding_build`): the stage store that lets an interrupted build continue
(and a changed build rerun only the stages whose settings changed),
one SFT stage through it and its SFTConfig, the stage clock, the Qwen3
config of the settings' model section, and the marker write that
completes a build."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable

from rla_jax.models import QwenConfig, load_qwen, save_qwen
from rla_jax.warmstart import sft
from rla_jax.warmstart.bpe_tokenizer import IM_END
from rla_jax.warmstart.directory import MARKER


class StageStore:
  """Finished stages of a build under a work dir, each under the key of the
  settings it depends on: model stages as HF directories, results in
  `stages.json`, SFT checkpoints under `checkpoints/<stage>`. A stage whose
  key changed runs again (its checkpoints cleared first); the others are
  reused, so a build that changes only the judge's settings keeps the
  policy's stages. A work dir of another layout is cleared."""

  VERSION = 2

  def __init__(self, work_dir: str, log):
    self.root, self.log = work_dir, log
    self.path = os.path.join(work_dir, "stages.json")
    state = {}
    if os.path.isfile(self.path):
      with open(self.path) as f:
        state = json.load(f)
    if state.get("version") != self.VERSION:
      if os.path.isdir(work_dir):
        shutil.rmtree(work_dir)
      state = {"version": self.VERSION, "stages": {}, "started": {}}
    os.makedirs(work_dir, exist_ok=True)
    self.state = state

  def done(self, name: str, key: str) -> dict | None:
    """The info of stage `name` if it finished under `key`, else None."""
    record = self.state["stages"].get(name)
    return record["info"] if record and record["key"] == key else None

  def checkpoint_dir(self, name: str, key: str) -> str:
    """The SFT checkpoint root for stage `name` under `key` (the stage's
    checkpoints are `<root>/<name>`); checkpoints another key left there
    are removed, so a resumed stage never continues other settings' run."""
    root = os.path.join(self.root, "checkpoints")
    if self.state["started"].get(name) != key:
      shutil.rmtree(os.path.join(root, name), ignore_errors=True)
      self.state["started"][name] = key
      self._save()
    return root

  def finish(self, name: str, key: str, info: dict) -> None:
    self.state["stages"][name] = {"key": key, "info": info}
    self._save()

  def adopt(self, name: str, key: str, model_dir: str, info: dict) -> None:
    """Records stage `name` as finished under `key` with the model in
    `model_dir` (another build's output for the same stage settings)."""
    shutil.rmtree(self.dir(name), ignore_errors=True)
    shutil.copytree(model_dir, self.dir(name))
    self.finish(name, key, info)

  def dir(self, name: str) -> str:
    return os.path.join(self.root, name)

  def _save(self) -> None:
    tmp = self.path + ".tmp"
    with open(tmp, "w") as f:
      json.dump(self.state, f, indent=1)
    os.replace(tmp, self.path)


def train_stage(store, name, key, init, samples, sft_cfg, seed, pad, log, **kw):
  """One SFT stage under `key`, resumed or skipped through `store`
  (model, info)."""
  info = store.done(name, key)
  if info is not None:
    log(f"[warmstart] stage {name}: reusing {store.dir(name)}")
    return load_qwen(store.dir(name)), info
  result = sft.train_sft(
    init(),
    samples,
    sft_cfg,
    seed=seed,
    pad_id=pad,
    log=log,
    name=name,
    checkpoint_dir=store.checkpoint_dir(name, key),
    **kw,
  )
  save_qwen(result.model, store.dir(name))
  info = {
    "history": result.history,
    "probes": result.probes,
    "steps_run": result.steps_run,
  }
  store.finish(name, key, info)
  return result.model, info


def sft_config(d: dict) -> sft.SFTConfig:
  """The SFTConfig of a settings stage section (prompt_weight and
  stop_after default to SFTConfig's 0 where a section has none)."""
  return sft.SFTConfig(
    steps=int(d["steps"]),
    batch_size=int(d["batch_size"]),
    learning_rate=float(d["learning_rate"]),
    prompt_weight=float(d.get("prompt_weight", 0.0)),
    length_multiple=int(d["length_multiple"]),
    stop_after=int(d.get("stop_after", 0)),
  )


class StageClock:
  """Wall seconds per stage: `lap(name)` records the time since the last
  lap (or the start) in `times` and logs it; `finish()` adds the total."""

  def __init__(self, log: Callable[[str], None]):
    self.log, self.times = log, {}
    self._start = self._last = time.perf_counter()

  def lap(self, name: str) -> None:
    now = time.perf_counter()
    self.times[name] = round(now - self._last, 2)
    self._last = now
    self.log(f"[warmstart] stage {name}: {self.times[name]:.1f}s")

  def finish(self) -> dict[str, float]:
    self.times["total"] = round(time.perf_counter() - self._start, 2)
    return self.times


def begin_build(out_dir, digest, work_dir, log, what="") -> StageStore:
  """Creates out_dir, removes a marker left there (another config or an
  incomplete build: the directory is not a warm start until the new
  marker is written) and opens the stage store (work_dir or
  out_dir + ".work")."""
  os.makedirs(out_dir, exist_ok=True)
  marker_path = os.path.join(out_dir, MARKER)
  if os.path.exists(marker_path):
    os.remove(marker_path)
  log(f"[warmstart] {what}building into {out_dir} (config {digest[:12]})")
  return StageStore(work_dir or out_dir + ".work", log)


def write_marker(out_dir, digest, cfg, report, provenance) -> None:
  """warmstart.json (config hash, resolved settings, report, provenance),
  written last and atomically: its presence marks a complete build."""
  marker = {"config_hash": digest, "config": cfg, "report": report}
  if provenance:
    marker["provenance"] = provenance
  path = os.path.join(out_dir, MARKER)
  with open(path + ".tmp", "w") as f:
    json.dump(marker, f, indent=1)
  os.replace(path + ".tmp", path)


def model_config(cfg: dict, tok) -> QwenConfig:
  """The Qwen3 config of the settings' model section over `tok`'s vocab."""
  m = cfg["model"]
  return QwenConfig(
    model_type="qwen3",
    vocab_size=len(tok),
    hidden_size=m["hidden_size"],
    intermediate_size=m["intermediate_size"],
    num_layers=m["num_layers"],
    num_heads=m["num_heads"],
    num_kv_heads=m["num_kv_heads"],
    head_dim=m["head_dim"],
    rope_theta=float(m["rope_theta"]),
    tie_word_embeddings=bool(m["tie_word_embeddings"]),
    max_position_embeddings=4096,
    eos_token_id=tok.convert_tokens_to_ids(IM_END),
    bos_token_id=None,
  )
