"""Prompt renderers for the AlfWorld setting (plain user-message strings).

The caller applies the tokenizer's chat template; nothing here adds role tokens,
``<think>`` or generation prefixes. The wording paraphrases the reference
prompts (``rlanything-reference.md``), shortened because small models are
trained on them:

- policy step prompt: sec. 7 "Policy prompt";
- step judge (generative reward model): sec. 4 "AlfWorld RM prompt", criteria
  (a)(b)(c);
- critic failure summary: sec. 6.2 "Critic summary";
- task proposal (harder / easier): sec. 6.2 "Proposal prompt".

A trajectory is given as ``observations`` [o_0, ..., o_L] and ``actions``
[a_0, ..., a_{L-1}] (L or L+1 observations for L actions): o_0 is the first
observation (it contains the task), a_k is the action taken after o_k, and
o_{k+1} its result. "Step k" = (o_k, a_k), matching the judge's step index k.

Deliberate deviation: ``history_steps=H`` truncates the rendered history to the
last H steps while always keeping o_0 (the task), with a one-line note of how
many steps were omitted (the reference always renders everything; default here:
everything).
"""

from __future__ import annotations

from collections.abc import Sequence

EMPTY_ADMISSIBLE_FALLBACK = ("look",)


def candidate_actions(admissible_commands: Sequence[str]) -> list[str]:
  """The candidate list shown to the policy: the admissible
  commands, or ["look"] if there are none (reference sec. 7)."""
  cands = [str(c) for c in admissible_commands]
  return cands if cands else list(EMPTY_ADMISSIBLE_FALLBACK)


def _check_trajectory(
  observations: Sequence[str], actions: Sequence[str], who: str
) -> None:
  if len(observations) < 1:
    raise ValueError(f"{who}: need at least the first observation, got none")
  if len(observations) not in (len(actions), len(actions) + 1):
    raise ValueError(
      f"{who}: {len(observations)} observations do not fit "
      f"{len(actions)} actions "
      "(expected len(actions) or len(actions) + 1 observations)"
    )


def _visible_steps(
  num_actions: int, history_steps: int | None, who: str
) -> int:
  """Index of the first action to render when keeping the last H steps."""
  if history_steps is None:
    return 0
  if not isinstance(history_steps, int) or history_steps < 0:
    raise ValueError(
      f"{who}: history_steps must be None or an int >= 0, got {history_steps!r}"
    )
  return max(0, num_actions - history_steps)


def _render_trajectory(
  observations, actions, history_steps, who, obs_line, act_line
) -> str:
  """Shared body of the two trajectory renderers
  (o_0, truncation note, steps, o_L)."""
  _check_trajectory(observations, actions, who)
  first = _visible_steps(len(actions), history_steps, who)
  lines = [obs_line(0, observations[0])]
  if first > 0:
    lines.append(f"(... {first} earlier steps omitted ...)")
  for k in range(first, len(actions)):
    if k > 0:
      lines.append(obs_line(k, observations[k]))
    lines.append(act_line(k, actions[k]))
  if (
    len(observations) > len(actions) > 0
  ):  # o_L; for L = 0 it is o_0, already shown
    lines.append(obs_line(len(actions), observations[len(actions)]))
  return "\n".join(lines)


def render_history(
  observations: Sequence[str],
  actions: Sequence[str],
  history_steps: int | None = None,
) -> str:
  """Alternating "observation: ..." / "you took action: ..." lines from o_0.

  With ``history_steps=H`` only the last H steps (o_k, a_k) and the final
  observation follow o_0, after a line "(... N earlier steps omitted ...)".
  """
  return _render_trajectory(
    observations,
    actions,
    history_steps,
    "render_history",
    lambda k, o: f"observation: {o}",
    lambda k, a: f"you took action: {a}",
  )


def render_numbered_trajectory(
  observations: Sequence[str],
  actions: Sequence[str],
  history_steps: int | None = None,
) -> str:
  """ "[k] observation: o_k" / "[k] action: a_k"
  lines (critic input), same truncation."""
  return _render_trajectory(
    observations,
    actions,
    history_steps,
    "render_numbered_trajectory",
    lambda k, o: f"[{k}] observation: {o}",
    lambda k, a: f"[{k}] action: {a}",
  )


def policy_prompt(
  observations: Sequence[str],
  actions: Sequence[str],
  admissible_commands: Sequence[str],
  history_steps: int | None = None,
) -> str:
  """Policy step prompt: guide, trajectory so far, numbered candidate actions.

  ``observations`` must have one more entry than ``actions`` (the current
  observation is last). Candidates are numbered "k) <command>" from 0, in the
  given order (an empty list becomes ["look"]); the answer is the index in
  \\boxed{}.
  """
  if len(observations) != len(actions) + 1:
    raise ValueError(
      "policy_prompt: need len(observations) == len(actions) + 1, got "
      f"{len(observations)} and {len(actions)}"
    )
  history = render_history(observations, actions, history_steps)
  options = "\n".join(
    f"{k}) {a}" for k, a in enumerate(candidate_actions(admissible_commands))
  )
  return (
    "You are playing a text game. Complete the task in as few steps as "
    "possible.\n"
    "Your trajectory so far:\n"
    f"{history}\n\n"
    "Candidate actions:\n"
    f"{options}\n\n"
    "Think briefly, then put the integer index of your chosen action in "
    "\\boxed{}."
  )


def judge_prompt(
  step_prompt: str, step_response: str, next_observation: str
) -> str:
  """Step-judge (generative reward model) prompt for one policy step.

  Inputs: the agent's full step prompt (history + candidates), its response
  (reasoning + chosen index) and the environment's next observation. Output: +1
  or -1 in \\boxed{} (criteria (a)(b)(c) of reference sec. 4).
  """
  return (
    "You judge ONE step of an agent in a text game.\n"
    "Score 1 only if all hold:\n"
    "(a) the chosen action suits the observation and the task goal "
    "(it explores, makes progress or completes the task);\n"
    "(b) the reasoning is present, relevant and consistent (no invented "
    "objects or places);\n"
    "(c) the chosen index is in the candidate list and the next observation is "
    "consistent with the action.\n"
    "Otherwise score -1 (e.g. no reasoning, index out of range, irrelevant "
    "action, undoing progress, hallucination, next observation contradicting "
    "the action).\n"
    "Think first, then put the final score (1 or -1) in \\boxed{}.\n\n"
    f"Agent's prompt:\n{step_prompt}\n\n"
    f"Agent's response:\n{step_response}\n\n"
    f"Next observation:\n{next_observation}"
  )


def failure_summary_prompt(
  task: str,
  observations: Sequence[str],
  actions: Sequence[str],
  high_risk_steps: Sequence[int],
  max_steps: int,
  history_steps: int | None = None,
) -> str:
  """Critic prompt: why did this rollout
  fail? (at most 2 sentences in \\boxed{}).

  ``high_risk_steps``: step indices k where all judge votes were -1
  (``rewards.high_risk_steps``); they refer to the "[k]" numbering.
  """
  traj = render_numbered_trajectory(observations, actions, history_steps)
  risky = [int(k) for k in high_risk_steps]
  bad = [k for k in risky if not 0 <= k < len(actions)]
  if bad:
    raise ValueError(
      f"failure_summary_prompt: high-risk steps {bad} outside [0, "
      f"{len(actions) - 1}]"
    )
  hint = (
    f"High-risk steps (all judges said -1): {', '.join(map(str, risky))}.\n"
    if risky
    else ""
  )
  return (
    f"An agent failed to finish this task in a text game within {max_steps} "
    "steps.\n"
    f"Task: {task}\n"
    f"{hint}"
    "Trajectory:\n"
    f"{traj}\n\n"
    "In at most two sentences, say concretely why it failed (e.g. looping, "
    "wrong place or object, poor exploration, hallucination). Put only the "
    "summary in \\boxed{}."
  )


def task_proposal_prompt(
  game_description: str,
  failure_summaries: Sequence[tuple[int, str]],
  direction: str,
  prev_acc: float,
  attempt: int,
  num_attempts: int,
  task_type_brief: str = "",
) -> str:
  """Environment-model prompt proposing a
  harder/easier variant of an AlfWorld task.

  Args:
    game_description: compact English dump of the game (objects, receptacles,
      capabilities, current goal), built by the env.
    failure_summaries: [(rollout_index, summary)] for failed rollouts (may be
      empty).
    direction: "harder" or "easier".
    prev_acc: the parent task's rollout accuracy.
    attempt, num_attempts: 1-based attempt k of n (varies the prompt across
      samples).
    task_type_brief: optional per-task-type constraints text, appended verbatim.
  Output format asked: \\boxed{TOKEN_A,TOKEN_B}.
  """
  if direction not in ("harder", "easier"):
    raise ValueError(
      "task_proposal_prompt: direction must be 'harder' or 'easier', got "
      f"{direction!r}"
    )
  if not 1 <= attempt <= num_attempts:
    raise ValueError(
      f"task_proposal_prompt: attempt {attempt} outside [1, {num_attempts}]"
    )
  parts = ["Environment details:", game_description.strip(), ""]
  if failure_summaries:
    parts.append("Why recent rollouts failed:")
    parts.extend(f"- Rollout {j}: {s.strip()}" for j, s in failure_summaries)
    parts.append("")
  parts += [
    f"Propose a new goal that makes the task {direction.upper()} "
    f"(current success rate prev_acc = {prev_acc:.3g}).",
    "Keep the goal's framework; change only its two type tokens, and the new "
    "goal must differ from the current one and stay solvable.",
    "Think step by step, then output the two tokens as "
    "\\boxed{TOKEN_A,TOKEN_B}.",
  ]
  if task_type_brief.strip():
    parts += ["", task_type_brief.strip()]
  parts += ["", f"(Attempt {attempt}/{num_attempts})"]
  return "\n".join(parts)
