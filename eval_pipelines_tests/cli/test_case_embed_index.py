"""`case embed` leaves the case's `embedding_ann_index` partition materialised: the demo's
happy path used to end with that asset amber, "0% filled" (the partition was registered by
the embedding, never materialised)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines_tests.helpers.ann_indexes import SmallCaseAnnIndexes
from eval_pipelines_tests.helpers.nn_descent_builds import BUILDS_NN_DESCENT


@BUILDS_NN_DESCENT
def test_case_embed_materialises_the_cases_ann_index(
    small_case: str,
    workdir: Path,
    small_case_ann_indexes: SmallCaseAnnIndexes,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dagster import AssetKey, RunsFilter

    from eval_pipelines.cli.main import main
    from eval_pipelines.defs.run_tags import KIND_TAG
    from eval_pipelines.runs.instance import dagster_instance

    small_case_ann_indexes.install(8, workdir / "indexes")
    capsys.readouterr()
    assert main(["case", "embed", small_case, "--dim", "8"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["annIndexRun"]["state"] == "succeeded"
    instance = dagster_instance()
    index = AssetKey("embedding_ann_index")
    # Before: set() (a registered partition, never materialised).
    assert instance.get_materialized_partitions(index) == {small_case}
    assert instance.get_dynamic_partitions("cases") == [small_case]
    (run,) = instance.get_runs(filters=RunsFilter(tags={KIND_TAG: "embedding_index"}))
    assert run.run_id == printed["annIndexRun"]["runId"]
    materialization = instance.get_latest_materialization_event(index)
    assert materialization is not None
    recall = materialization.asset_materialization.metadata  # type: ignore[union-attr]
    assert any("recall" in name for name in recall), sorted(recall)
