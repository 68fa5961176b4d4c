"""Write the live-lift demo's week of logs: ``python -m eval_pipelines.demo.lift_week OUT.jsonl``.

A week (2026-11-23 .. 2026-11-29) of simulated traffic of workspace ``demo-ws``, each request
stamped by the real assignment library with the workspace's stored settings (``lift settings``;
the defaults otherwise), with a known true lift of the treated arm over the frozen baseline.
``make demo`` then ingests the file and prints the report: the verdict should be ``superior``
with an interval that covers the true lift.

Each request also logs its tokens and execution envelope (the cost bar, docs/lift-cost.md):
the treated arm runs a cheaper model tier (``tier-small``, the lever's one envelope change),
every other arm ``tier-large``, with the same tokens; the cost draws have a generator of
their own, so the outcomes (and the quality lift) are those of the week without costs.
``--prices-out FILE`` writes the demo's price table for ``lift settings --prices``.
"""

from __future__ import annotations

import argparse
import json
from datetime import date, timedelta
from pathlib import Path

from eval_pipelines.core.lift.simulate import ArmCost, CostProfile, simulate_traffic

WORKSPACE = "demo-ws"
FIRST_DAY = date(2026, 11, 23)
#: Per 1M tokens: the small tier costs a third of the large one.
PRICES = {
    "currency": "USD",
    "models": {
        "tier-large": {"input": 3.0, "output": 15.0},
        "tier-small": {"input": 1.0, "output": 5.0},
    },
}
COST = CostProfile(treated=ArmCost(envelope={"model": "tier-small"}), seed=11)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--true-lift", type=float, default=0.06)
    parser.add_argument("--base-rate", type=float, default=0.62)
    parser.add_argument("--conversations-per-day", type=int, default=700)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--prices-out", type=Path, default=None, help="write the price table")
    args = parser.parse_args(argv)
    from eval_pipelines.api.lift import config_for

    config = config_for(WORKSPACE)
    rows = simulate_traffic(
        config,
        days=[FIRST_DAY + timedelta(days=d) for d in range(7)],
        conversations_per_day=args.conversations_per_day,
        base_rate=args.base_rate,
        true_lift=args.true_lift,
        rng=args.seed,
        cost=COST,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    if args.prices_out is not None:
        args.prices_out.write_text(json.dumps(PRICES, indent=1) + "\n", encoding="utf-8")
    arms: dict[str, int] = {}
    for row in rows:
        arms[row["exposure_arm"]] = arms.get(row["exposure_arm"], 0) + 1
    shares = ", ".join(f"{arm} {count}" for arm, count in sorted(arms.items()))
    print(
        f"{args.out}: {len(rows)} requests of workspace {WORKSPACE}, epoch {config.epoch}, "
        f"holdout {config.holdout_fraction:.0%}, lever {config.lever}; true lift "
        f"{args.true_lift:+.3f}; by arm: {shares}; treated on tier-small, the others on "
        "tier-large"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
