"""Exact TextWorld/ALFRED surface text: entity names, list rendering and fixed
strings.

Names follow ALFWorld's ``Demangler`` (shuffle=False) over the lower-cased PDDL
ids (Fast Downward lower-cases PDDL names): the name is the id before the first
``_bar_`` (plus ``basin`` when the id contains ``basin``); instances of a name
are numbered 1..n, the alphabetically first id getting the largest number. Lists
are TextWorld's ``display_list``: ``nothing`` / ``X`` / ``X, Y, and Z``; list
items are ordered by entity id.
"""

from __future__ import annotations

from collections import Counter

INTRO_HEADER = "-= Welcome to TextWorld, ALFRED! =-"
NOTHING_HAPPENS = "Nothing happens."
HELP_TEXT = (  # the grammar rhs starts with "\n", which TextWorld strips
  "Available commands:\n"
  "  look:                             look around your current location\n"
  "  inventory:                        check your current inventory\n"
  "  go to (receptacle):               move to a receptacle\n"
  "  open (receptacle):                open a receptacle\n"
  "  close (receptacle):               close a receptacle\n"
  "  take (object) from (receptacle):  take an object from a receptacle\n"
  "  move (object) to (receptacle):  place an object in or on a receptacle\n"
  "  examine (something):              examine a receptacle or an object\n"
  "  use (object):                     use an object\n"
  "  heat (object) with (receptacle):  heat an object using a receptacle\n"
  "  clean (object) with (receptacle): clean an object using a receptacle\n"
  "  cool (object) with (receptacle):  cool an object using a receptacle\n"
  "  slice (object) with (object):     slice an object using a sharp object\n"
)


def demangle_names(ids: list[str]) -> dict[str, str]:
  """Map lower-cased PDDL ids to display names (``cabinet 3``), as ALFWorld's
  Demangler."""
  ids = sorted({i.lower() for i in ids})
  base: dict[str, str] = {}
  counts: Counter = Counter()
  for i in ids:
    if "_bar_" in i:
      name = i.split("_bar_", 1)[0] + ("basin" if "basin" in i else "")
      base[i] = name
      counts[name] += 1
  names, next_num = {}, dict(counts)
  for i in ids:
    if i in base:
      names[i] = f"{base[i]} {next_num[base[i]]}"
      next_num[base[i]] -= 1
    else:
      names[i] = f"{i} "
  return names


def display_list(items: list[str]) -> str:
  """TextWorld ``display_list``: [] -> nothing, [x] -> x,
  [x, y, z] -> 'x, y, and z'."""
  if not items:
    return "nothing"
  if len(items) == 1:
    return items[0]
  return ", ".join(items[:-1]) + ", and " + items[-1]


def with_article(names: list[str]) -> list[str]:
  """ALFWorld's PddlEnv gives every entity the indefinite article 'a'."""
  return [f"a {n}" for n in names]


def examine_object_text(
  name: str,
  *,
  receptacle_object: bool,
  inner: list[str],
  clean: bool,
  hot: bool,
  cool: bool,
  sliced: bool,
  toggleable: bool,
  toggled: bool,
  sliceable: bool,
) -> str:
  """Feedback of ``examine {o}`` (first matching rule of the grammar's
  examineObject.feedback).

  The grammar's ``not_istoggled`` rule never matches (TextWorld keeps no negated
  facts), so an untoggled lamp has nothing special about it.
  """
  if receptacle_object:
    return (
      f"This is a normal {name}. In it, you see "
      f"{display_list(with_article(inner))}."
    )
  if clean and hot and sliced:
    return f"This is a hot and clean sliced {name}."
  if clean and cool and sliced:
    return f"This is a cool and clean sliced {name}."
  if clean and sliced:
    return f"This is a clean sliced {name}."
  if hot and sliced:
    return f"This is a hot sliced {name}."
  if cool and sliced:
    return f"This is a cool sliced {name}."
  if clean and hot:
    return f"This is a hot and clean {name}."
  if clean and cool:
    return f"This is a cool and clean {name}."
  if hot:
    return f"This is a hot {name}."
  if clean:
    return f"This is a clean {name}."
  if cool:
    return f"This is a cold {name}."
  if toggleable and toggled:
    return f"This {name} is on."
  if sliceable and sliced:
    return f"This is a sliced {name}."
  return f"There's nothing special about {name}."
