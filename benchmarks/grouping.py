"""How far each grouping mode moves the holdout score on the demo case.

Run from the repository root::

    .venv/bin/python benchmarks/grouping.py [--sample-size 1000] [--seeds 7,8]

For each seed, one evaluation per grouping mode on the same sample (same seed and size), with
the default knn-vote config; prints accuracy at levels 1, 3, 4 and 5 with the Wilson 95%
interval at level 4, and the number of records each grouping added to the leave-out list.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = [
    ("none", {"mode": "none"}, None),
    ("nearDuplicate 0.98", {"mode": "nearDuplicate", "threshold": 0.98}, None),
    ("nearDuplicate 0.93", {"mode": "nearDuplicate", "threshold": 0.93}, None),
    ("field base_code", None, "base_code"),
    ("field group_key", None, "group_key"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample-size", type=int, default=1000)
    parser.add_argument("--seeds", default="7,8")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="eval-grouping-"))
    os.environ.update(
        EVAL_PIPELINES_WAREHOUSE=str(workdir / "warehouse.duckdb"),
        DAGSTER_HOME=str(workdir / "dagster"),
    )
    (workdir / "dagster").mkdir()
    sys.path.insert(0, str(ROOT))
    import logging

    logging.getLogger("dagster").setLevel(logging.WARNING)
    from eval_pipelines import api

    demo = ROOT / "data" / "demo"
    api.create_case(
        "icd10cm",
        api.CaseSource(
            demo / "icd10cm_records.parquet",
            tree_path=demo / "icd10cm_tree.parquet",
            target_depth=[3, 4],
        ),
    )
    print("seed | grouping | L1 | L3 | L4 [95% CI] | L5 | n(L4) | group members excluded")
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name, grouping, field in MODES:
            started = api.start_holdout_eval(
                "icd10cm",
                [{"name": "baseline"}],
                api.HoldoutOptions(
                    sample_size=args.sample_size, seed=seed, grouping=grouping, group_field=field
                ),
                wait=True,
            )
            report = api.get_holdout_eval("icd10cm", started.eval_id).report
            levels = report["variants"][0]["score"]["levels"]
            acc = {d: levels[d]["accuracy"] for d in ("1", "3", "4", "5")}
            low, high = acc["4"]["interval"]
            print(
                f"{seed} | {name} | {acc['1']['value']:.3f} | {acc['3']['value']:.3f} | "
                f"{acc['4']['value']:.3f} [{low:.3f}, {high:.3f}] | {acc['5']['value']:.3f} | "
                f"{acc['4']['n']} | {report['sample']['grouping']['groupMembersExcluded']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
