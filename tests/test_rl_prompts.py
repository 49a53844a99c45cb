"""Tests for rla_jax.rl.prompts: pieces
present, in order, numbering consistent."""

import re

import pytest

from rla_jax.rl.parsing import parse_action_index
from rla_jax.rl.prompts import (
  candidate_actions,
  failure_summary_prompt,
  judge_prompt,
  policy_prompt,
  render_history,
  render_numbered_trajectory,
  task_proposal_prompt,
)

OBS = [
  "You are in a room. Your task is to: put a mug in the sink.",
  "You see a mug.",
  "You pick up the mug.",
  "Nothing happens.",
]
ACTS = ["go to countertop 1", "take mug 1 from countertop 1", "open sink 1"]
ADMISSIBLE = [
  "look",
  "inventory",
  "go to sinkbasin 1",
  "put mug 1 in/on sinkbasin 1",
]


def assert_in_order(text, pieces):
  pos = 0
  for piece in pieces:
    found = text.find(piece, pos)
    assert found >= 0, (
      f"{piece!r} missing (or out of order) after position {pos}"
    )
    pos = found + len(piece)


def test_render_history_alternates_from_first_observation():
  text = render_history(OBS, ACTS)
  assert text.splitlines() == [
    f"observation: {OBS[0]}",
    f"you took action: {ACTS[0]}",
    f"observation: {OBS[1]}",
    f"you took action: {ACTS[1]}",
    f"observation: {OBS[2]}",
    f"you took action: {ACTS[2]}",
    f"observation: {OBS[3]}",
  ]


def test_render_history_truncation_keeps_task_and_last_steps():
  assert render_history(OBS, ACTS, history_steps=None) == render_history(
    OBS, ACTS, history_steps=3
  )
  assert render_history(OBS, ACTS, history_steps=10) == render_history(
    OBS, ACTS
  )
  lines = render_history(OBS, ACTS, history_steps=1).splitlines()
  assert lines == [
    f"observation: {OBS[0]}",
    "(... 2 earlier steps omitted ...)",
    f"observation: {OBS[2]}",
    f"you took action: {ACTS[2]}",
    f"observation: {OBS[3]}",
  ]
  lines0 = render_history(OBS, ACTS, history_steps=0).splitlines()
  assert lines0 == [
    f"observation: {OBS[0]}",
    "(... 3 earlier steps omitted ...)",
    f"observation: {OBS[3]}",
  ]
  with pytest.raises(ValueError, match="history_steps"):
    render_history(OBS, ACTS, history_steps=-1)
  with pytest.raises(ValueError, match="observations"):
    render_history(OBS[:2], ACTS)


def test_policy_prompt_pieces_and_numbering():
  text = policy_prompt(OBS, ACTS, ADMISSIBLE)
  assert_in_order(
    text,
    [render_history(OBS, ACTS)]
    + [f"{k}) {a}" for k, a in enumerate(ADMISSIBLE)]
    + ["\\boxed{}"],
  )
  numbered = re.findall(r"^(\d+)\) (.*)$", text, flags=re.M)
  assert [(int(k), a) for k, a in numbered] == list(enumerate(ADMISSIBLE))
  # The index a model would box maps back to the listed command.
  chosen = parse_action_index("I will put it: \\boxed{3}", len(ADMISSIBLE))
  assert (
    dict((int(k), a) for k, a in numbered)[chosen]
    == "put mug 1 in/on sinkbasin 1"
  )


def test_policy_prompt_empty_admissible_and_truncation():
  text = policy_prompt(OBS, ACTS, [])
  assert "0) look" in text and "1)" not in text
  assert candidate_actions([]) == ["look"] and candidate_actions(
    ("a", "b")
  ) == ["a", "b"]
  short = policy_prompt(OBS, ACTS, ADMISSIBLE, history_steps=1)
  assert ACTS[0] not in short and ACTS[2] in short and OBS[0] in short
  with pytest.raises(ValueError, match="len\\(observations\\)"):
    policy_prompt(OBS[:3], ACTS, ADMISSIBLE)  # current observation missing


def test_judge_prompt_pieces():
  step = policy_prompt(OBS[:2], ACTS[:1], ADMISSIBLE)
  text = judge_prompt(step, "Go to the sink. \\boxed{2}", OBS[2])
  assert_in_order(
    text,
    [
      "(a)",
      "(b)",
      "(c)",
      "-1",
      "\\boxed{}",
      step,
      "Go to the sink. \\boxed{2}",
      OBS[2],
    ],
  )


def test_numbered_trajectory_and_failure_summary():
  lines = render_numbered_trajectory(OBS, ACTS).splitlines()
  assert lines == [
    f"[0] observation: {OBS[0]}",
    f"[0] action: {ACTS[0]}",
    f"[1] observation: {OBS[1]}",
    f"[1] action: {ACTS[1]}",
    f"[2] observation: {OBS[2]}",
    f"[2] action: {ACTS[2]}",
    f"[3] observation: {OBS[3]}",
  ]
  trunc = render_numbered_trajectory(OBS, ACTS, history_steps=1).splitlines()
  assert trunc[0] == f"[0] observation: {OBS[0]}" and trunc[2:] == lines[4:]

  text = failure_summary_prompt(
    "put a mug in the sink", OBS, ACTS, high_risk_steps=[0, 2], max_steps=40
  )
  assert_in_order(
    text,
    [
      "40",
      "Task: put a mug in the sink",
      "High-risk steps",
      "0, 2",
      "\n".join(lines),
      "two sentences",
      "\\boxed{}",
    ],
  )
  assert "High-risk" not in failure_summary_prompt(
    "t", OBS, ACTS, high_risk_steps=[], max_steps=40
  )
  with pytest.raises(ValueError, match="high-risk"):
    failure_summary_prompt("t", OBS, ACTS, high_risk_steps=[3], max_steps=40)


def test_task_proposal_prompt():
  text = task_proposal_prompt(
    "objects: mug1, cup1\nreceptacles: sinkbasin1",
    [(0, "It looped."), (3, "Wrong object.")],
    "harder",
    0.875,
    attempt=2,
    num_attempts=8,
    task_type_brief="pick_and_place: (OBJ, REC)",
  )
  assert_in_order(
    text,
    [
      "objects: mug1, cup1",
      "Rollout 0: It looped.",
      "Rollout 3: Wrong object.",
      "HARDER",
      "0.875",
      "\\boxed{TOKEN_A,TOKEN_B}",
      "pick_and_place: (OBJ, REC)",
      "(Attempt 2/8)",
    ],
  )
  easy = task_proposal_prompt(
    "desc", [], "easier", 0.0, attempt=1, num_attempts=1
  )
  assert (
    "EASIER" in easy
    and "Rollout" not in easy
    and easy.endswith("(Attempt 1/1)")
  )
  with pytest.raises(ValueError, match="direction"):
    task_proposal_prompt("d", [], "same", 0.5, 1, 8)
  with pytest.raises(ValueError, match="attempt"):
    task_proposal_prompt("d", [], "harder", 0.5, 9, 8)


def test_trajectories_without_actions_show_the_first_observation_once():
  assert render_history(OBS[:1], []) == f"observation: {OBS[0]}"
  assert render_numbered_trajectory(OBS[:1], []) == f"[0] observation: {OBS[0]}"
  assert policy_prompt(OBS[:1], [], ADMISSIBLE).count(OBS[0]) == 1
