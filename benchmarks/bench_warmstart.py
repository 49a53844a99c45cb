"""Warm-start benchmark: build one config
variant from scratch and print its report.

  python benchmarks/bench_warmstart.py --variant alfworld_default --out /tmp/ws
      [--json report.json]

Variants are overrides of default_warmstart_config(): "alfworld_default" is the
embedded default run's (configs/alfworld.py), the others the sweep used to tune
the earlier hidden-128 defaults. Reports policy success, judge accuracy and
per-stage wall times.
"""

import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from configs import alfworld
from rla_jax.warmstart import build_warm_start

VARIANTS = {
  # what `launch/tpu_run.py --config=alfworld` builds (configs/alfworld.py)
  "alfworld_default": alfworld.get_config().warmstart.settings.to_dict(),
  "default": {},
  "drill500": {"drill": {"steps": 500}, "policy_sft": {"steps": 200}},
  "drill400_q16": {"drill": {"steps": 400, "num_queries": 16}},
  "sft300": {"num_demo_episodes": 200, "policy_sft": {"steps": 300}},
  "lr_hi": {
    "drill": {"learning_rate": 5e-3},
    "policy_sft": {"learning_rate": 3e-3},
  },
  "rm_more": {"rm_label_noise": 0.1, "rm_sft": {"steps": 120}},
  "budget2x": {
    "drill": {"steps": 300},
    "policy_sft": {"steps": 200},
    "rm_label_noise": 0.1,
    "rm_sft": {"steps": 100},
  },
  "no_drill": {"drill": {"steps": 0}, "policy_sft": {"steps": 300}},
}


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--variant", default="default", choices=sorted(VARIANTS))
  ap.add_argument("--out", required=True)
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  shutil.rmtree(args.out, ignore_errors=True)
  t = time.perf_counter()
  result = build_warm_start(
    VARIANTS[args.variant],
    args.out,
    log=lambda s: print(f"[{args.variant}] {s}", flush=True),
  )
  rep = result["report"]
  rep["wall_s"] = time.perf_counter() - t
  rep["variant"] = args.variant
  summary = {
    "variant": args.variant,
    "success": rep["policy"]["success_rate"],
    "rm_acc_policy_steps": rep["reward_model"]["on_policy_steps"]["accuracy"],
    "rm_bal_acc_policy_steps": rep["reward_model"]["on_policy_steps"][
      "balanced_accuracy"
    ],
    "rm_acc_heldout": rep["reward_model"]["on_heldout_noisy_steps"]["accuracy"],
    "timings_s": rep["timings_s"],
  }
  print(json.dumps(summary), flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(rep, f, indent=1)


if __name__ == "__main__":
  main()
