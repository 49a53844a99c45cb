"""Runs scripted MiniWoB++ episodes through the policy's reply format and
saves their annotated frames.

The scripted agent reads the target button from the instruction, finds its
box in the page (an oracle the policy does not have), writes the reply a
policy would (``Action: ...`` + one ``computer_use`` tool call on the
1000x1000 grid) and sends it through ``parse_action`` and
``MiniWobEnvironment.step`` like a policy's reply. ``--wrong`` clicks
another button instead (when the instance has one).

  python launch/gui_episode.py --task=click-button --seed=3 --out=runs/gui
"""

from __future__ import annotations

import argparse
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

from rla_jax.envs.gui.action_parser import parse_action
from rla_jax.envs.gui.actions import pixel_to_grid, tool_call_reply
from rla_jax.envs.gui.miniwob import MiniWobConfig, MiniWobEnvironment
from rla_jax.envs.gui.render import save_episode_frames


def oracle_reply(env, observation, wrong: bool = False) -> str:
  """The click-button reply that clicks the named (or another) button."""
  target = observation.instruction.split('"')[1]
  boxes = env.element_boxes(0, "#area button")
  chosen = [box for box in boxes if (box.text == target) != wrong]
  if not chosen:
    raise SystemExit(f"no {'other' if wrong else 'target'} button: {boxes}")
  x, y = chosen[0].center
  height, width, _ = observation.screenshot.shape
  return tool_call_reply(
    f'Click the "{chosen[0].text}" button.',
    {
      "action": "left_click",
      "coordinate": [pixel_to_grid(x, width), pixel_to_grid(y, height)],
    },
  )


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--task", default="click-button")
  parser.add_argument("--seed", type=int, default=3)
  parser.add_argument("--out", default="runs/gui")
  parser.add_argument("--scale", type=int, default=2)
  parser.add_argument("--wrong", action="store_true")
  args = parser.parse_args(argv)
  if args.task != "click-button":
    raise SystemExit("the scripted agent only knows click-button")
  config = MiniWobConfig(num_envs=1, screenshot_scale=args.scale)
  with MiniWobEnvironment(config) as env:
    (observation,) = env.reset([args.task], [args.seed])
    reply = oracle_reply(env, observation, wrong=args.wrong)
    height, width, _ = observation.screenshot.shape
    action = parse_action(reply, width, height)
    (after,) = env.step([action])
  paths = save_episode_frames(
    [observation.screenshot, after.screenshot],
    [action],
    args.out,
    prefix=f"{args.task}-seed{args.seed}",
  )
  print(f"instruction: {observation.instruction}")
  print(f"reply:\n{reply}")
  print(
    f"done={after.done} success={after.success} reward={after.reward} "
    f"info={after.info}"
  )
  for path in paths:
    print(f"wrote {path}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
