"""``eval-pipelines eval grouping-sweep CASE --thresholds 0.90,0.93,0.95,0.98``: calibrate the
nearDuplicate threshold of a case."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from eval_pipelines.cli.output import print_json
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import read_json
from eval_pipelines.core.holdout.spec import DEFAULT_SEED, SAMPLE_SIZE_DEFAULT
from eval_pipelines.core.verdicts import INSUFFICIENT

if TYPE_CHECKING:
    from eval_pipelines.api.grouping import GroupingSweep
    from eval_pipelines.core.stats.proportion import Proportion


def parse_thresholds(text: str) -> list[float]:
    """``0.90,0.93`` -> ``[0.9, 0.93]``; the rules themselves are the API's."""
    values = []
    for item in text.split(","):
        try:
            values.append(float(item.strip()))
        except ValueError:
            raise InputError(
                "--thresholds",
                text,
                f"{item.strip()!r} is not a number: give comma-separated numbers above 0 and "
                "at most 1, e.g. 0.90,0.95 (the no-grouping row is always shown first)",
            ) from None
    return values


def _cell(proportion: Proportion) -> str:
    accuracy = proportion.to_json()  # rounded as the JSON document has it
    counts = f"{accuracy['k']}/{accuracy['n']}"
    if accuracy["interval"] is None:
        return f"{INSUFFICIENT} {counts}"
    low, high = accuracy["interval"]
    return f"{accuracy['value']:.3f} [{low:.3f}, {high:.3f}] {counts}"


def sweep_table(sweep: GroupingSweep) -> str:
    """The sweep as text: a heading, the evidence held out, then accuracy per level."""
    sample = sweep.sample
    config = sweep.baseline.config
    lines = [
        f"Grouping sweep of case {sweep.case_id}: {sample.size} sampled records "
        f"(seed {sample.seed}, sample {sample.sample_hash}), baseline "
        f"{config['classifier']}/{config['strategy']}, {config['candidates']} candidates; "
        f"records {sweep.records_version}, tree {sweep.tree_version}, memo "
        f"{sweep.memo_version} ({sweep.active_memo_entries} active entries).",
        "",
    ]
    evidence_header = [
        "threshold",
        "held out",
        "per record",
        "records with group",
        "same label",
        "rows short",
    ]
    evidence = [
        [
            str(row.threshold),
            str(row.held_out.group_members),
            f"{row.held_out.group_members_per_record:.3f}",
            str(row.held_out.records_with_group),
            str(row.held_out.same_label),
            str(row.rows_short),
        ]
        for row in sweep.rows
    ]
    lines += _table(evidence_header, evidence)
    lines.append("")
    levels = sweep.levels
    accuracy_header = ["threshold"] + [
        level.name + (" *" if level.is_target else "") for level in levels
    ]
    accuracy = [
        [str(row.threshold)] + [_cell(row.levels[str(level.depth)].accuracy) for level in levels]
        for row in sweep.rows
    ]
    lines += _table(accuracy_header, accuracy)
    lines += [
        "",
        "held out: records held out besides each sampled record itself (its near-duplicates), "
        "summed; per record: the mean; records with group: sampled records with at least one "
        "held out; same label: held-out records labelled as their sampled record.",
        "Accuracy: baseline right at the level / records whose label reaches it, Wilson 95% "
        f"interval, k/n ({INSUFFICIENT} below n=20); * target level.",
        # Words first: a bare "0.8 s" line reads as the 0.8 threshold's row.
        f"Swept in {sweep.seconds:.1f} s" + (" (text index built)" if sweep.index_built else ""),
    ]
    return "\n".join(lines)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cells[i]) for cells in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(cells) for cells in rows)]


def cmd_sweep(args: argparse.Namespace) -> int:
    from eval_pipelines.api.grouping import grouping_sweep

    config = read_json(args.config_file, "--config-file") if args.config_file else None
    sweep = grouping_sweep(
        args.case,
        thresholds=parse_thresholds(args.thresholds),
        sample_size=args.sample_size,
        seed=args.seed,
        config=config,
        warehouse=args.warehouse,
    )
    if args.json:
        print_json(sweep.to_json())
    else:
        print(sweep_table(sweep), flush=True)
    return 0


def add_sweep_command(evals: argparse._SubParsersAction) -> None:
    """``eval grouping-sweep``: registered under the ``eval`` group."""
    sweep = evals.add_parser(
        "grouping-sweep",
        help="per nearDuplicate threshold: evidence held out and baseline accuracy per level",
        description="Draw one seeded sample, then score the baseline without grouping and "
        "with nearDuplicate grouping at each threshold (computed here; nothing is written).",
    )
    sweep.add_argument("case", help="case name")
    sweep.add_argument(
        "--thresholds", required=True, help="comma-separated, each in (0, 1], e.g. 0.9,0.95,0.98"
    )
    sweep.add_argument(
        "--sample-size",
        type=int,
        default=SAMPLE_SIZE_DEFAULT,
        help="records sampled (default %(default)s)",
    )
    sweep.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="seed of the sample (default %(default)s)"
    )
    sweep.add_argument(
        "--config-file", default=None, help="the baseline's config (as eval holdout takes it)"
    )
    sweep.add_argument("--json", action="store_true", help="a JSON document instead of tables")
    sweep.set_defaults(func=cmd_sweep)
