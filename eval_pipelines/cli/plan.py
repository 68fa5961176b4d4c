"""``eval-pipelines eval plan CASE --difference 0.02 --discordance 0.1``: the power planner,
registered under the ``eval`` group."""

from __future__ import annotations

import argparse

from eval_pipelines.cli.arguments import finite_float
from eval_pipelines.cli.output import print_json


def cmd_plan(args: argparse.Namespace) -> int:
    from eval_pipelines.api.plan import EvalDiscordance, plan_comparison

    plan = plan_comparison(
        args.case,
        difference=args.difference,
        discordance=args.discordance,
        from_eval=args.from_eval,
        level=args.level,
        warehouse=args.warehouse,
    )
    if args.json:
        print_json(plan.to_json())
        return 0
    print(
        f"To detect a difference of {plan.difference:+g} with {plan.power:.0%} power "
        f"(alpha {plan.alpha}, two-sided) when {plan.discordance:.1%} of records are "
        f"discordant: {plan.records_needed:,} records."
    )
    if isinstance(plan.source, EvalDiscordance):
        mde = plan.minimum_detectable_effect_at_eval_n
        source = plan.source
        print(
            f"{source.eval_id} ({source.comparison}, level {source.level}) compared "
            f"{source.pairs} records: its minimum detectable effect is "
            + ("undefined (too few discordant records)" if mde is None else f"{mde:.3f}")
            + " (a power diagnostic, not a verdict)."
        )
    return 0


def add_plan_command(evals: argparse._SubParsersAction) -> None:
    """``eval plan``: registered under the ``eval`` group."""
    plan = evals.add_parser(
        "plan", help="records a paired comparison needs for 80%% power (power planner)"
    )
    plan.add_argument("case", help="case name")
    plan.add_argument("--difference", type=finite_float, required=True, help="e.g. 0.02")
    source = plan.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-eval", default=None, help="take the discordance from it")
    source.add_argument(
        "--discordance", type=finite_float, default=None, help="share of discordant records"
    )
    plan.add_argument("--level", type=int, default=None, help="default: shallowest target")
    plan.add_argument("--json", action="store_true", help="print JSON instead of text")
    plan.set_defaults(func=cmd_plan)
