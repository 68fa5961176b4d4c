"""The leakage grouping exists to prevent is visible on the full demo case (130,525 records).

ICD-10-CM re-lists one code under several texts (long title, CMS short title, inclusion terms)
and 74.8% of records have a laterality/encounter twin under a sibling code. Ungrouped, the
classifier finds those twins in the evidence; grouped by ``group_key`` it cannot.
"""

from __future__ import annotations

from pathlib import Path

from eval_pipelines import api
from eval_pipelines_tests.helpers.paths import DEMO


def test_ungrouped_reads_higher_than_grouped_at_the_4_character_level(workdir: Path) -> None:
    api.create_case(
        "icd10cm",
        api.CaseSource(
            DEMO / "icd10cm_records.parquet",
            tree_path=DEMO / "icd10cm_tree.parquet",
            target_depth=[3, 4],
        ),
    )
    variants = [{"name": "baseline"}]
    ungrouped = api.start_holdout_eval(
        "icd10cm",
        variants,
        api.HoldoutOptions(sample_size=500, seed=7, grouping={"mode": "none"}),
        wait=True,
    )
    grouped = api.start_holdout_eval(
        "icd10cm",
        variants,
        api.HoldoutOptions(sample_size=500, seed=7, group_field="group_key"),
        wait=True,
    )
    reports = [api.get_holdout_eval("icd10cm", s.eval_id).report for s in (ungrouped, grouped)]
    assert reports[0]["sample"]["sampleHash"] == reports[1]["sample"]["sampleHash"]
    level4 = [r["variants"][0]["score"]["levels"]["4"]["accuracy"] for r in reports]
    assert level4[0]["n"] == level4[1]["n"] > 450
    # Deterministic for seed 7 (measured: 0.763 ungrouped vs 0.671 grouped, n=498; at n=1,000
    # seeds 7 and 8 give 0.770 vs 0.678 and 0.751 vs 0.659). The 4-point bar is what a
    # working leave-out must clear; with grouping broken both read about 0.76.
    assert level4[0]["value"] - level4[1]["value"] > 0.04
    assert reports[1]["sample"]["grouping"]["groupMembersExcluded"] > 1000
    assert "ungrouped" in [w["code"] for w in reports[0]["warnings"]]
