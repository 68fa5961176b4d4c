"""The holdout assets as Dagster runs them: real materialisations, real DuckDB, one step per
variant, idempotent re-materialisation of any stage."""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from eval_pipelines import api
from eval_pipelines.defs.holdout import holdout_assets
from eval_pipelines.defs.io_managers import TransientPickleIOManager
from eval_pipelines.defs.resources import WarehouseResource

RESOURCES = {"warehouse": WarehouseResource(), "io_manager": TransientPickleIOManager()}
VARIANTS = [{"name": "baseline"}, {"name": "k-5.fewer", "config": {"candidates": 5}}]


def test_definitions_load() -> None:
    from eval_pipelines.definitions import defs

    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("holdout_eval")
    assert job.partitions_def is not None


@pytest.fixture
def registered(small_case: str) -> str:
    return api.start_holdout_eval(
        "small", VARIANTS, api.HoldoutOptions(sample_size=40, seed=9), register_only=True
    ).eval_id


def _rows(table: str, eval_id: str) -> int:
    with duckdb.connect("warehouse.duckdb", read_only=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table} WHERE eval_id = ?", [eval_id]).fetchone()
    assert row is not None
    return int(row[0])


def test_materialize_chain_one_step_per_variant_and_idempotent(registered: str) -> None:
    resources = RESOURCES
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("holdout_evaluations", [registered])
        result = dg.materialize(
            holdout_assets, instance=instance, partition_key=registered, resources=resources
        )
        assert result.success
        steps = {e.step_key for e in result.all_events if e.is_step_success}
        assert {s for s in steps if "classify_variant[" in s} == {
            "variant_predictions.classify_variant[baseline]",
            "variant_predictions.classify_variant[k_5_fewer]",
        }
        materialized = {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}
        assert materialized == {
            "eval_spec",
            "holdout_sample",
            "evidence_index",
            "leave_out",
            "variant_predictions",
            "variant_scores",
            "leakage_gap",
            "eval_report",
        }
        report_event = [m for m in result.asset_materializations_for_node("eval_report")][0]
        comparable = report_event.metadata["comparable_as"].value
        assert comparable.startswith("near0.98.")
        assert f"accuracy_L4/baseline @ {comparable}" in report_event.metadata
        # Shown to four decimals (0.3875, never 0.38749999999999996); exact in the report.
        report = report_event.metadata["report_json"].value
        exact = report["variants"][0]["score"]["targetDepth"]["4"]["value"]
        plotted = report_event.metadata[f"accuracy_L4/baseline @ {comparable}"].value
        assert plotted == round(exact, 4)
        for record in report_event.metadata["variants"].value.records:
            for value in record.data.values():
                assert not isinstance(value, float) or value == round(value, 4)
        assert "Holdout evaluation" in report_event.metadata["report"].value
        # The UI's comparisons table: one row per candidate and target level, with its verdict.
        table = report_event.metadata["comparisons"].value
        assert [(r.data["candidate"], r.data["level"]) for r in table.records] == [
            ("k-5.fewer", 3),
            ("k-5.fewer", 4),
        ]
        assert {r.data["verdict"] for r in table.records} <= {
            "better",
            "worse",
            "no detectable difference",
            "insufficient_evidence",
        }
        counts = {
            t: _rows(t, registered)
            for t in ("holdout_samples", "predictions", "variant_scores", "eval_reports")
        }
        assert counts == {
            "holdout_samples": 40,
            "predictions": 80,
            "variant_scores": 2,
            "eval_reports": 1,
        }

        # Re-materialising one stage (as from the UI) replaces its rows, never appends.
        again = dg.materialize(
            holdout_assets,
            instance=instance,
            partition_key=registered,
            resources=resources,
            selection=["variant_predictions"],
        )
        assert again.success
        assert _rows("predictions", registered) == 80
        before = api.get_holdout_eval("small", registered).report
        dg.materialize(
            holdout_assets,
            instance=instance,
            partition_key=registered,
            resources=resources,
            selection=["variant_scores", "eval_report"],
        )
        after = api.get_holdout_eval("small", registered).report

        def without_timing(variants: list[dict]) -> list[dict]:
            # The re-classified predictions took their own wall time; everything else is equal.
            return [{**v, "usage": {**v["usage"], "seconds": None}} for v in variants]

        assert without_timing(before["variants"]) == without_timing(after["variants"])


def test_a_failing_classifier_fails_only_its_step(registered: str) -> None:
    from eval_pipelines.core.holdout import classify

    calls = {"n": 0}

    def broken(records, evidence, memo, config, *, tree):
        calls["n"] += 1
        raise RuntimeError("model service unavailable")

    classify.register_classifier("broken-for-test", broken)
    eval_id = api.start_holdout_eval(
        "small",
        [{"name": "ok"}, {"name": "bad", "config": {"classifier": "broken-for-test"}}],
        api.HoldoutOptions(sample_size=20),
        register_only=True,
    ).eval_id
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("holdout_evaluations", [eval_id])
        result = dg.materialize(
            holdout_assets,
            instance=instance,
            partition_key=eval_id,
            resources=RESOURCES,
            raise_on_error=False,
        )
    assert not result.success
    failed = {e.step_key for e in result.all_events if e.is_step_failure}
    assert failed == {"variant_predictions.classify_variant[bad]"}
    assert calls["n"] == 3  # the first try plus two retries (RetryPolicy)
    assert _rows("eval_reports", eval_id) == 0


def test_evidence_index_is_built_once_per_records_version(small_case: str) -> None:
    first = api.start_holdout_eval(
        "small", VARIANTS, api.HoldoutOptions(sample_size=20, seed=1), register_only=True
    )
    second = api.start_holdout_eval(
        "small", VARIANTS, api.HoldoutOptions(sample_size=20, seed=2), register_only=True
    )
    built = []
    with dg.instance_for_test() as instance:
        for eval_id in (first.eval_id, second.eval_id):
            instance.add_dynamic_partitions("holdout_evaluations", [eval_id])
            result = dg.materialize(
                holdout_assets,
                instance=instance,
                partition_key=eval_id,
                resources=RESOURCES,
                selection=["eval_spec", "evidence_index"],
            )
            metadata = result.asset_materializations_for_node("evidence_index")[0].metadata
            built.append(metadata["built"].value)
            assert metadata["records"].value == 3049
    assert built == [True, False]  # the second evaluation of the same version reuses it
