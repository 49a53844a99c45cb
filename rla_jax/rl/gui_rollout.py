"""Host-side GUI rollouts with a Qwen3-VL policy, and the screenshot judge.

`rollout_gui_episodes` plays tasks in waves of the environment's slots: at
every turn each live agent's prompt (the task, its earlier actions and its
last screenshots) is rendered and ALL live agents are sampled in one
sampler call; replies are parsed by the restricted computer-use parser
(`envs.gui.action_parser.parse_action`: model output is never executed as code)
and applied by the environment. Every step keeps its prompt ids, prompt
images, response ids and behaviour log-probs, so a training sample is
exactly what was sampled.

`judge_gui_episodes` builds the reference's screenshot-judge prompt for
every step (previous screenshot and action, current screenshot, the
agent's response, the next screenshot) and samples m judgements each.

Single-process: the browsers live on the host that runs the loop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import numpy as np

from rla_jax.envs.gui.action_parser import parse_action
from rla_jax.envs.gui.actions import GuiAction, InvalidAction
from rla_jax.envs.gui.tasks import GuiTask
from rla_jax.metrics.progress import ProgressFn
from rla_jax.models.qwen3_vl import inputs as vision_inputs
from rla_jax.rl import gui_prompts
from rla_jax.rl.judge_votes import judged_steps, sample_votes
from rla_jax.rl.seeds import derive_seed
from rla_jax.sampling.settings import SamplingParams
from rla_jax.tokenizer import render_chat


@dataclasses.dataclass(frozen=True)
class ScreenshotEncoder:
  """Screenshots -> `Image`s, and prompts with images -> token ids.

  processor: the Qwen3-VL image processor (`inputs.image_processor`);
  vl_cfg: the model's `Qwen3VLConfig`."""

  processor: object
  vl_cfg: object

  def image(self, screenshot: np.ndarray) -> vision_inputs.Image:
    (image,) = vision_inputs.preprocess(self.processor, [screenshot])
    return image

  def prompt_ids(self, tokenizer, text: str, images) -> list[int]:
    """A one-turn chat prompt whose IMAGE placeholders hold `images`."""
    chat = render_chat(tokenizer, [{"role": "user", "content": text}])
    ids = tokenizer.encode(chat, add_special_tokens=False)
    return vision_inputs.expand_image_pads(ids, images, self.vl_cfg)


def action_summary(action: GuiAction | InvalidAction) -> str:
  """The one line the history shows for an action."""
  if isinstance(action, InvalidAction):
    return f"invalid action ({action.reason[:60]})"
  return action.summary()


@dataclasses.dataclass
class GuiEpisode:
  """One trajectory: screenshots / images have num_steps + 1 entries;
  per step the prompt (ids, images), the reply (text, ids, behaviour
  log-probs) and the parsed action."""

  task: GuiTask
  instruction: str = ""
  screenshots: list[np.ndarray] = dataclasses.field(default_factory=list)
  images: list[vision_inputs.Image] = dataclasses.field(default_factory=list)
  actions: list[GuiAction | InvalidAction] = dataclasses.field(
    default_factory=list
  )
  prompt_ids: list[list[int]] = dataclasses.field(default_factory=list)
  prompt_images: list[list[vision_inputs.Image]] = dataclasses.field(
    default_factory=list
  )
  response_texts: list[str] = dataclasses.field(default_factory=list)
  response_ids: list[list[int]] = dataclasses.field(default_factory=list)
  logprobs: list[np.ndarray] = dataclasses.field(default_factory=list)
  won: bool = False

  @property
  def task_id(self) -> str:
    return self.task.task_id

  @property
  def num_steps(self) -> int:
    return len(self.actions)

  @property
  def valid_actions(self) -> list[bool]:
    return [isinstance(a, GuiAction) for a in self.actions]


@dataclasses.dataclass(frozen=True)
class PolicyPrompt:
  """A policy prompt's token ids and the images its placeholders hold."""

  ids: list[int]
  images: list[vision_inputs.Image]


def _policy_prompt(
  ep: GuiEpisode, encoder, tokenizer, history_images: int
) -> PolicyPrompt:
  """The prompt of ep's next step: the task, its earlier actions and its
  last history_images screenshots."""
  images = ep.images[-history_images:]
  text = gui_prompts.policy_prompt(
    ep.instruction, [action_summary(a) for a in ep.actions], len(images)
  )
  return PolicyPrompt(encoder.prompt_ids(tokenizer, text, images), images)


def rollout_gui_episodes(
  tasks: Sequence[GuiTask],
  env,
  sampler,
  tokenizer,
  encoder: ScreenshotEncoder,
  *,
  seed: int,
  params: SamplingParams,
  history_images: int = 1,
  timings: dict | None = None,
  progress: ProgressFn | None = None,
  phase: str = "rollout",
) -> list[GuiEpisode]:
  """Plays every task once; returns one GuiEpisode per task, in order.

  Tasks run in waves of env.num_envs slots. Episode g's noise at turn t
  comes from its own stream (sampler row seed g, call seed (seed, wave,
  t)). timings, if given, accumulates "env" and "policy_sampling" seconds.
  """
  timings = {} if timings is None else timings
  timings.setdefault("env", 0.0)
  timings.setdefault("policy_sampling", 0.0)
  episodes: list[GuiEpisode] = []
  N = env.num_envs
  for wave, start in enumerate(range(0, len(tasks), N)):
    batch = list(tasks[start : start + N])
    episodes += _play_wave(
      batch,
      start,
      env,
      sampler,
      tokenizer,
      encoder,
      seed=derive_seed(seed, wave),
      params=params,
      history_images=history_images,
      timings=timings,
    )
    if progress is not None:
      progress(phase, len(episodes), len(tasks), "episodes ended")
  return episodes


def _observe(ep: GuiEpisode, obs, encoder) -> None:
  ep.screenshots.append(obs.screenshot)
  ep.images.append(encoder.image(obs.screenshot))
  ep.instruction = ep.instruction or obs.instruction


@dataclasses.dataclass
class _Wave:
  """The episodes of one wave (episode i in slot i of num_slots; the
  sampler's row seed of slot i is offset + i) and which have ended."""

  episodes: list[GuiEpisode]
  done: list[bool]
  offset: int
  num_slots: int

  def live_slots(self) -> list[int]:
    """The slots whose episode has not ended nor used its step budget."""
    return [
      i
      for i, ep in enumerate(self.episodes)
      if not self.done[i] and ep.num_steps < ep.task.max_steps
    ]


def _start_wave(tasks, offset, env, encoder) -> _Wave:
  """Resets the environment with tasks[i] in slot i (idle slots replay
  tasks[0], unused) and observes every task's first screenshot."""
  N = env.num_envs
  idle = N - len(tasks)
  pages = [t.page for t in tasks] + [tasks[0].page] * idle
  seeds = [t.seed for t in tasks] + [tasks[0].seed] * idle
  if hasattr(env, "set_step_limits"):  # OSWorld: evaluate at the budget
    env.set_step_limits([t.max_steps for t in tasks] + [0] * idle)
  obs = env.reset(pages, seeds)
  episodes = [GuiEpisode(task) for task in tasks]
  for ep, o in zip(episodes, obs, strict=False):
    _observe(ep, o, encoder)
  done = [bool(o.done) for o in obs[: len(tasks)]]
  return _Wave(episodes, done, offset, N)


def _record_reply(
  ep: GuiEpisode, prompt: PolicyPrompt, tokens, logprobs, tokenizer
) -> GuiAction | InvalidAction:
  """Decodes and parses a sampled reply; appends the step to ep."""
  text = tokenizer.decode(tokens, skip_special_tokens=True)
  height, width = ep.screenshots[-1].shape[:2]
  action = parse_action(text, width, height)
  ep.prompt_ids.append(prompt.ids)
  ep.prompt_images.append(prompt.images)
  ep.response_texts.append(text)
  ep.response_ids.append(tokens)
  ep.logprobs.append(logprobs)
  ep.actions.append(action)
  return action


def _policy_turn(
  wave: _Wave,
  live: list[int],
  sampler,
  tokenizer,
  encoder,
  *,
  seed,
  params,
  history_images,
) -> list:
  """Samples every live slot's reply in one sampler call and records it;
  returns the action of every slot (None for the others)."""
  prompts = {
    i: _policy_prompt(wave.episodes[i], encoder, tokenizer, history_images)
    for i in live
  }
  out = sampler.generate(
    [prompts[i].ids for i in live],
    images=[prompts[i].images for i in live],
    seed=seed,
    row_seeds=[wave.offset + i for i in live],
    **dataclasses.asdict(params),
  )
  actions: list = [None] * wave.num_slots
  for j, i in enumerate(live):
    actions[i] = _record_reply(
      wave.episodes[i], prompts[i], out.tokens[j], out.logprobs[j], tokenizer
    )
  return actions


def _step_wave(wave: _Wave, live: list[int], actions, env, encoder) -> None:
  """Applies the actions; observes the live slots' screenshots, success
  and end."""
  obs = env.step(actions)
  for i in live:
    _observe(wave.episodes[i], obs[i], encoder)
    wave.episodes[i].won = bool(obs[i].success)
    wave.done[i] = bool(obs[i].done)


def _play_wave(
  tasks,
  offset,
  env,
  sampler,
  tokenizer,
  encoder,
  *,
  seed,
  params,
  history_images,
  timings,
) -> list[GuiEpisode]:
  """One wave: tasks[i] in slot i (idle slots replay tasks[0], unused)."""
  t0 = time.perf_counter()
  wave = _start_wave(tasks, offset, env, encoder)
  timings["env"] += time.perf_counter() - t0
  for turn in range(max(t.max_steps for t in tasks)):
    live = wave.live_slots()
    if not live:
      break
    t0 = time.perf_counter()
    actions = _policy_turn(
      wave,
      live,
      sampler,
      tokenizer,
      encoder,
      seed=derive_seed(seed, turn),
      params=params,
      history_images=history_images,
    )
    t1 = time.perf_counter()
    timings["policy_sampling"] += t1 - t0
    _step_wave(wave, live, actions, env, encoder)
    timings["env"] += time.perf_counter() - t1
  return wave.episodes


@dataclasses.dataclass(frozen=True)
class GuiJudgements:
  """m judgements of every step: scores [N, K, m] in {+1, -1, 0} (0 =
  unparseable; padded steps 0), mask [N, K] real steps; prompt ids and
  images [n][k], response ids / texts and log-probs [n][k][j]."""

  scores: np.ndarray
  mask: np.ndarray
  prompt_ids: list
  prompt_images: list
  response_ids: list
  logprobs: list
  response_texts: list


def judge_prompt(ep: GuiEpisode, k: int, encoder, tokenizer):
  """Step k's judge prompt (ids, images): [previous,] current, next."""
  summaries = [action_summary(a) for a in ep.actions]
  has_previous = k > 0
  text = gui_prompts.judge_prompt(
    ep.instruction,
    summaries[: max(k - 1, 0)],
    has_previous,
    summaries[k - 1] if has_previous else "",
    ep.response_texts[k],
  )
  images = ([ep.images[k - 1]] if has_previous else []) + [
    ep.images[k],
    ep.images[k + 1],
  ]
  return encoder.prompt_ids(tokenizer, text, images), images


def judge_gui_episodes(
  episodes: Sequence[GuiEpisode],
  sampler,
  tokenizer,
  encoder: ScreenshotEncoder,
  *,
  m: int,
  seed: int,
  params: SamplingParams,
  batch_size: int = 16,
  include: Sequence[bool] | None = None,
  progress: ProgressFn | None = None,
) -> GuiJudgements:
  """m judgements of every step of every episode (of those with
  include[n]; the others get mask False and score 0)."""
  num_steps = [e.num_steps for e in episodes]
  jobs, mask = judged_steps(num_steps, include)
  p_ids = [[None] * s for s in num_steps]
  p_img = [[None] * s for s in num_steps]
  for n, k in jobs:
    p_ids[n][k], p_img[n][k] = judge_prompt(episodes[n], k, encoder, tokenizer)
  votes = sample_votes(
    sampler,
    tokenizer,
    p_ids,
    jobs,
    num_steps,
    m=m,
    seed=seed,
    params=params,
    batch_size=batch_size,
    images=p_img,
    progress=progress,
  )
  return GuiJudgements(
    votes.scores,
    mask,
    p_ids,
    p_img,
    votes.response_ids,
    votes.logprobs,
    votes.response_texts,
  )
