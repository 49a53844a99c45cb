"""Parsing of model outputs: ``\\boxed{...}``
answers, judge scores, action indices.

Follows ``rlanything-reference.md``:

- sec. 2 "Parsing S": the step judge's score is read from the *last*
  ``\\boxed{`` occurrence (brace-balanced) and mapped to {+1, -1, 0}.
- sec. 7 "Action parsing": the policy's action is the first integer inside the
  last ``\\boxed{}``; default 0; clamped into ``[0, num_actions - 1]``.

None of these functions raise on garbage model text: unparseable text maps to
the documented default. (Wrong *argument types* from our own code, e.g. a
non-positive ``num_actions``, still raise.)

Like the reference, only the last ``\\boxed{`` occurrence is considered; if it
is unbalanced (e.g. a truncated generation) the result is "no box", we do not
fall back to an earlier box.

Deliberate deviation: ``parse_action_index`` normalises unicode minus signs
before reading the integer (the reference does so only for scores), so "\u22123"
reads as -3 and clamps to 0 rather than reading as 3.
"""

from __future__ import annotations

import re

BOX_TAG = "\\boxed{"

# Unicode minus-like characters normalised to ASCII '-' before reading a score.
_MINUS_LIKE = (
  "\u2212",
  "\u2013",
  "\u2014",
  "\u2010",
  "\u2011",
  "\ufe63",
  "\uff0d",
)
_FRACTION_RE = re.compile(r"\d+\s*/\s*\d+")
_SIGNED_INT_RE = re.compile(r"[-+]?\d+")
_INT_RE = re.compile(r"-?\d+")


def last_boxed(text: object) -> str | None:
  """Content of the last ``\\boxed{...}`` in ``text``, or None.

  The content is read from the last occurrence of ``\\boxed{`` up to its
  matching closing brace (nested braces are kept in the content). If that
  occurrence is never closed, or ``text`` is not a string, returns None.
  """
  if not isinstance(text, str):
    return None
  start = text.rfind(BOX_TAG)
  if start < 0:
    return None
  i = start + len(BOX_TAG)
  depth = 1
  while i < len(text):
    ch = text[i]
    if ch == "{":
      depth += 1
    elif ch == "}":
      depth -= 1
      if depth == 0:
        return text[start + len(BOX_TAG) : i]
    i += 1
  return None


def _normalise_minus(s: str) -> str:
  for ch in _MINUS_LIKE:
    s = s.replace(ch, "-")
  return s


def parse_boxed_score(text: object) -> int:
  """Judge score S in {+1, -1, 0} read from the last ``\\boxed{}`` of ``text``.

  Rules (reference sec. 2):
    1. no (balanced) last box -> 0;
    2. box content (stripped, unicode minus normalised) equal to "1" or "+1"
       -> +1, equal to "-1" -> -1;
    3. content containing a fraction ``a/b`` (e.g. "1/8") -> 0;
    4. otherwise, among the signed integers in the content, if exactly one is
       +-1 it is the score (e.g. "\\text{+1}" -> +1, "score: -1" -> -1); zero or
       several +-1 values (e.g. "1 or -1") -> 0.
  0 means "unparseable"; it enters the step mean as 0 (see ``rewards``).
  """
  content = last_boxed(text)
  if content is None:
    return 0
  s = _normalise_minus(content.strip())
  if s in ("1", "+1"):
    return 1
  if s == "-1":
    return -1
  if _FRACTION_RE.search(s):
    return 0
  signals = [
    v for v in (int(x) for x in _SIGNED_INT_RE.findall(s)) if v in (-1, 1)
  ]
  return signals[0] if len(signals) == 1 else 0


def parse_action_index(text: object, num_actions: int) -> int:
  """Index of the chosen admissible action, in ``[0, num_actions - 1]``.

  The first integer (optionally negative) inside the last ``\\boxed{}`` of
  ``text``, clamped into range; 0 if there is no box or no integer in it
  (reference sec. 7). Raises ValueError only if ``num_actions < 1`` (a caller
  bug: the env substitutes ``["look"]`` for an empty admissible list).
  """
  if (
    not isinstance(num_actions, int)
    or isinstance(num_actions, bool)
    or num_actions < 1
  ):
    raise ValueError(
      "parse_action_index: num_actions must be an int >= 1, got "
      f"{num_actions!r}"
    )
  content = last_boxed(text)
  if content is None:
    return 0
  match = _INT_RE.search(_normalise_minus(content))
  if match is None:
    return 0
  try:
    value = int(match.group(0))
  except ValueError:  # pragma: no cover - the regex only matches integers
    return 0
  return max(0, min(value, num_actions - 1))


def action_index_parses(text: object, num_actions: int) -> bool:
  """True when ``text`` names an admissible action itself: the first
  integer in its last ``\\boxed{}`` lies in ``[0, num_actions - 1]``
  (otherwise `parse_action_index` falls back to 0 or clamps)."""
  content = last_boxed(text)
  match = None if content is None else _INT_RE.search(_normalise_minus(content))
  return match is not None and 0 <= int(match.group(0)) < num_actions
