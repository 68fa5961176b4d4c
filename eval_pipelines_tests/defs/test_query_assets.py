"""The query evaluation assets as Dagster runs them: real materialisations of a registered
query's partition in a test instance against a real DuckDB file; the stored result and the
metadata the UI shows and plots; the WARN check on a truncated result; the refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from eval_pipelines import settings
from eval_pipelines.defs.io_managers import TransientPickleIOManager
from eval_pipelines.defs.partitions import QUERY_EVALUATIONS
from eval_pipelines.defs.queries import (
    NOT_TRUNCATED,
    QUERY_EVALUATIONS_SCHEMA,
    QUERY_RESULTS_SCHEMA,
    evaluate_not_truncated,
    query_assets,
)
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.storage import query_evaluations as query_evaluations_store
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.query_tables import (
    ESTIMATE,
    HURRIED,
    HURRIED_ROWS,
    PREDICT,
    engine_answer,
    load_products,
    register,
)

RESOURCES = {"warehouse": WarehouseResource(), "io_manager": TransientPickleIOManager()}


def materialize(instance: dg.DagsterInstance, eval_id: str) -> dg.ExecuteInProcessResult:
    if not instance.has_dynamic_partition(QUERY_EVALUATIONS, eval_id):
        instance.add_dynamic_partitions(QUERY_EVALUATIONS, [eval_id])
    return dg.materialize(
        [*query_assets, evaluate_not_truncated],
        instance=instance,
        partition_key=eval_id,
        resources=RESOURCES,
        raise_on_error=False,
    )


def metadata_of(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    (metadata,) = [
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.asset_key.path[-1] == asset
    ]
    return dict(metadata)


def check_of(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    (evaluation,) = [
        e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    return evaluation


def stored_rows(eval_id: str) -> list[tuple[Any, ...]]:
    conn = duckdb.connect(str(settings.warehouse_location()), read_only=True)
    try:
        return conn.execute(
            "SELECT eval_id, run_id FROM query_results WHERE eval_id = ?", [eval_id]
        ).fetchall()
    finally:
        conn.close()


def test_a_query_partition_materialises_its_result_with_plotted_metrics(workdir: Path) -> None:
    version = load_products(workdir)
    eval_id = register(PREDICT)
    oracle = engine_answer(PREDICT)
    with dg.instance_for_test() as instance:
        result = materialize(instance, eval_id)
        assert result.success
        query = metadata_of(result, "evaluate_query")
        assert query["query"].value == PREDICT
        assert (query["kind"].value, query["target"].value) == ("predict", "category")
        assert query["sources"].value == [{"name": "products", "kind": "table", "version": version}]
        meta = metadata_of(result, "evaluate_result")
        # Every scalar metric as a number (what the UI plots), whatever the query selected,
        # keyed by what makes evaluations comparable (table, target, test rows, versions).
        comparable = meta["comparable_as"].value
        assert comparable.startswith("products.category/")
        for name, value in oracle.metrics.items():
            key = f"{name} @ {comparable}"
            if value is None:
                assert key not in meta
                continue
            kind = dg.IntMetadataValue if isinstance(value, int) else dg.FloatMetadataValue
            assert isinstance(meta[key], kind), name
            # Shown to four decimals (defs.families.shown); exact in the stored result.
            assert meta[key].value == (round(value, 4) if kind is dg.FloatMetadataValue else value)
            assert name not in meta  # never an unkeyed plot mixing other evaluations
        assert meta[f"n @ {comparable}"].value == 20
        assert meta["truncated"].value is False
        assert meta["sources"].value == [
            {"name": "products", "kind": "table", "version": version, "rows": 100}
        ]
        report = meta["report"].value
        assert report.splitlines()[0] == (
            f"### accuracy {oracle.metrics['accuracy']:.4f} vs baseAccuracy "
            f"{oracle.metrics['baseAccuracy']:.4f} (n = 20)"
        )
        # The report says what was evaluated besides the data: experiment, target, config.
        assert "- experiment: hold-out" in report
        assert "- config: profile `group`, calibrate false; maxTime 300 s" in report
        assert "| accuracy |" in report and "| logLoss |" in report
        check = check_of(result)
        assert check.check_name == NOT_TRUNCATED
        assert check.passed and check.severity == dg.AssetCheckSeverity.WARN
        (row,) = stored_rows(eval_id)
        assert row == (eval_id, result.run_id)
    with connect(settings.warehouse_location(), read_only=True) as conn:
        stored = query_evaluations_store.find_result(conn, eval_id)
    assert stored is not None and stored.result == oracle.result


def test_an_estimate_report_opens_with_mae_against_the_baseline(workdir: Path) -> None:
    load_products(workdir)
    eval_id = register(ESTIMATE)
    with dg.instance_for_test() as instance:
        result = materialize(instance, eval_id)
        assert result.success
        meta = metadata_of(result, "evaluate_result")
        key = meta["comparable_as"].value
        assert meta["report"].value.startswith(
            f"### mae {meta[f'mae @ {key}'].value:.4f} vs "
            f"baselineMae {meta[f'baselineMae @ {key}'].value:.4f}"
        )


def test_materialising_again_replaces_the_result(workdir: Path) -> None:
    load_products(workdir)
    eval_id = register(PREDICT, folds=5)
    with dg.instance_for_test() as instance:
        first = materialize(instance, eval_id)
        second = materialize(instance, eval_id)
        assert first.success and second.success
        assert metadata_of(first, "evaluate_query")["folds"].value == 5
        meta = metadata_of(second, "evaluate_result")
        assert meta[f"n @ {meta['comparable_as'].value}"].value == 100  # every row once
    assert stored_rows(eval_id) == [(eval_id, second.run_id)]


def test_a_truncated_result_fails_the_warn_check_and_not_the_run(workdir: Path) -> None:
    load_products(workdir, rows=HURRIED_ROWS)
    eval_id = register(HURRIED)
    with dg.instance_for_test() as instance:
        result = materialize(instance, eval_id)
        assert result.success  # a WARN check never fails the run
        assert metadata_of(result, "evaluate_result")["truncated"].value is True
        check = check_of(result)
        assert not check.passed
        assert check.severity == dg.AssetCheckSeverity.WARN
        assert "time limit" in (check.description or "")
        assert check.metadata["requested"].value == 1500


def _failure(result: dg.ExecuteInProcessResult) -> str:
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "evaluate_query"
    data = failure.step_failure_data
    assert data.user_failure_data is not None
    return str(data.user_failure_data.description)


def test_a_partition_without_a_stored_query_fails_and_says_how_to_make_one(
    workdir: Path,
) -> None:
    load_products(workdir)
    with dg.instance_for_test() as instance:
        result = materialize(instance, "q-0123456789ab")
        assert not result.success
        assert "eval-pipelines evaluate --file" in _failure(result)


def test_a_table_reloaded_since_the_query_was_stored_is_refused(workdir: Path) -> None:
    load_products(workdir)
    eval_id = register(PREDICT)
    load_products(workdir, shift=1)
    with dg.instance_for_test() as instance:
        result = materialize(instance, eval_id)
        assert not result.success
        assert "submit the query again" in _failure(result)
    assert stored_rows(eval_id) == []


def test_column_schemas_match_the_migrated_warehouse(tmp_path: Path) -> None:
    with connect(tmp_path / "w.duckdb", create=True) as conn:
        for table, schema in (
            ("query_evaluations", QUERY_EVALUATIONS_SCHEMA),
            ("query_results", QUERY_RESULTS_SCHEMA),
        ):
            columns = conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = ? ORDER BY ordinal_position",
                [table],
            ).fetchall()
            assert [(c.name, c.type) for c in schema.columns] == columns, table


def test_a_linked_table_reloaded_since_the_query_was_stored_is_refused(workdir: Path) -> None:
    from eval_pipelines_tests.helpers.query_tables import LINKED, load_linked

    load_linked(workdir)
    eval_id = register(LINKED)
    load_linked(workdir, constant=True)  # orders unchanged; the catalogue it links to is not
    with dg.instance_for_test() as instance:
        result = materialize(instance, eval_id)
        assert not result.success
        assert "'catalogue' is now at table version" in _failure(result)
    assert stored_rows(eval_id) == []
