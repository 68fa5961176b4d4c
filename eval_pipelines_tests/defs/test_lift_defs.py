"""The live-lift definitions with real materialisations: a day of logs, the report and its A/A
gate, the ingest job (a bad file fails it and stores nothing), the inbox sensor evaluated with
``build_sensor_context`` and the daily schedule."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines import settings
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.defs.lift import (
    aa_gate,
    daily_lift_report,
    lift_ingest_job,
    lift_log_sensor,
    lift_logs,
    lift_report,
)
from eval_pipelines.defs.partitions import LIFT_DAYS
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.lift_traffic import write_log

LEVER = LiftConfig("ws", "e1", 0.10, lever="memo-v2")
RESOURCES = {"warehouse": WarehouseResource()}


def lever_split() -> LiftConfig:
    """The split the checks use, stored as the workspace's settings; the first change from the
    defaults starts a new epoch (e2), so the logs are written for the epoch it returns."""
    from eval_pipelines.api import lift

    settings = lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2")
    return dataclasses.replace(LEVER, epoch=settings.epoch)


@pytest.fixture
def ingested(workdir: Path) -> Path:
    from eval_pipelines.api import lift

    log = write_log(workdir / "week.jsonl", lever_split(), true_lift=0.08, seed=4)
    lift.ingest(log)
    return log


def test_a_day_of_logs_materialises_with_rows_per_arm(ingested: Path) -> None:
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(LIFT_DAYS, ["2026-11-24"])  # as the ingest run did
        result = dg.materialize(
            [lift_logs], instance=instance, partition_key="2026-11-24", resources=RESOURCES
        )
        assert result.success
        (event,) = result.get_asset_materialization_events()
        meta = event.materialization.metadata
    with connect(settings.warehouse_location(), read_only=True) as conn:
        day = lift_store.events(conn, day=date(2026, 11, 24))
    assert meta["rows"].value == day.height
    for arm in ("treated", "lever_holdout", "holdout"):
        expected = day.filter(exposure_arm=arm).height
        assert meta[f"rows/{arm}"].value == expected and expected > 0
    assert meta["epochs"].value == "e2"  # the first settings change from the defaults starts e2


def test_the_report_materialises_with_its_aa_gate(ingested: Path) -> None:
    with dg.instance_for_test() as instance:
        result = dg.materialize([lift_report, aa_gate], instance=instance, resources=RESOURCES)
        assert result.success
        (event,) = result.get_asset_materialization_events()
        meta = event.materialization.metadata
        (check,) = result.get_asset_check_evaluations()
    claim = "ws/invoice_coding/e2/memo-v2"
    assert meta["confirmed"].value == 1 and meta["parked"].value == 0
    assert meta[f"lift @ {claim}"].value > meta[f"lift_low @ {claim}"].value > 0
    assert "superior" in meta["report"].value
    assert check.check_name == "aa_gate" and check.passed


def test_the_ingest_job_refuses_a_bad_file_and_stores_nothing(workdir: Path) -> None:
    from eval_pipelines.api import lift

    good = write_log(workdir / "good.jsonl", LEVER, true_lift=0.0, days=1)
    lift.ingest(good)  # the warehouse exists; now a bad file through the job itself
    bad = workdir / "bad.jsonl"
    bad.write_text(good.read_text().replace('"declared"', '"guessed"', 1))
    with dg.instance_for_test() as instance:
        result = lift_ingest_job.execute_in_process(
            instance=instance,
            run_config={"ops": {"ingest_lift_log": {"config": {"path": str(bad)}}}},
            resources=RESOURCES,
            raise_on_error=False,
        )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "line 1: source='guessed'" in str(failure.step_failure_data.error.message)  # type: ignore[union-attr]
    with connect(settings.warehouse_location(), read_only=True) as conn:
        files = conn.execute("SELECT count(*) FROM lift_files").fetchone()
    assert files == (1,)


def test_the_ingest_job_validates_a_file_that_changed_since_it_was_validated(
    workdir: Path,
) -> None:
    """The API gives the run the digest of the bytes it validated; a file that no longer has
    that digest (rewritten between the API's check and the run, or a run re-executed from the
    UI later) is validated again, and refused when bad."""
    from eval_pipelines.api import lift
    from eval_pipelines.stages.lift_ingest import read_events

    good = write_log(workdir / "good.jsonl", LEVER, true_lift=0.0, days=1)
    lift.ingest(good)
    digest = read_events(good).file_id
    good.write_text(good.read_text().replace('"declared"', '"guessed"', 1))
    with dg.instance_for_test() as instance:
        config = {"path": str(good), "validated_digest": digest}
        result = lift_ingest_job.execute_in_process(
            instance=instance,
            run_config={"ops": {"ingest_lift_log": {"config": config}}},
            resources=RESOURCES,
            raise_on_error=False,
        )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "line 1: source='guessed'" in str(failure.step_failure_data.error.message)  # type: ignore[union-attr]


def test_the_sensor_requests_one_ingest_per_dropped_file(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = workdir / "inbox"
    monkeypatch.setenv(settings.LIFT_INBOX_ENV, str(inbox))
    with dg.instance_for_test() as instance:
        with dg.build_sensor_context(instance=instance) as context:
            assert isinstance(lift_log_sensor(context), dg.SkipReason)
        inbox.mkdir()
        log = write_log(inbox / "day.jsonl", LEVER, true_lift=0.0, days=1)
        (inbox / "notes.txt").write_text("not a log")
        with dg.build_sensor_context(instance=instance) as context:
            result = lift_log_sensor(context)
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests or []
    stat = log.stat()
    assert request.run_key == f"lift-log:day.jsonl:{stat.st_size}:{stat.st_mtime_ns}"
    assert request.run_config["ops"]["ingest_lift_log"]["config"]["path"] == str(log)


def test_the_daily_schedule_requests_one_report_a_day() -> None:
    with dg.instance_for_test() as instance:
        with dg.build_schedule_context(
            instance=instance, scheduled_execution_time=datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
        ) as context:
            request = daily_lift_report(context)
    assert isinstance(request, dg.RunRequest) and request.run_key == "lift-report:2026-12-01"


def test_a_day_gets_its_partition_when_a_log_of_it_is_ingested(workdir: Path) -> None:
    """Dynamic day partitions: the UI lists the days that have rows, today's too, instead of
    a daily definition from 2020 (2,527 partitions, 0% filled)."""
    log = write_log(workdir / "two-days.jsonl", lever_split(), true_lift=0.0, days=2, seed=5)
    days = sorted({json.loads(line)["timestamp"][:10] for line in log.read_text().splitlines()})
    with dg.instance_for_test() as instance:
        assert instance.get_dynamic_partitions(LIFT_DAYS) == []
        config = {"ops": {"ingest_lift_log": {"config": {"path": str(log)}}}}
        run = lift_ingest_job.execute_in_process(
            instance=instance, run_config=config, resources=RESOURCES
        )
        assert run.success
        assert sorted(instance.get_dynamic_partitions(LIFT_DAYS)) == days
        # Again, and another file of the same days: the days are known (Dagster's
        # add_dynamic_partitions skips known keys), nothing is added twice.
        assert lift_ingest_job.execute_in_process(
            instance=instance, run_config=config, resources=RESOURCES
        ).success
        other = workdir / "again.jsonl"  # new requests, the same days
        other.write_text(log.read_text().replace('"request_id": "', '"request_id": "again-'))
        again = {"ops": {"ingest_lift_log": {"config": {"path": str(other)}}}}
        assert lift_ingest_job.execute_in_process(
            instance=instance, run_config=again, resources=RESOURCES
        ).success
        assert sorted(instance.get_dynamic_partitions(LIFT_DAYS)) == days
        materialised = {
            event.partition_key
            for event in instance.fetch_materializations(dg.AssetKey("lift_logs"), limit=10).records
            if event.partition_key
        }
        assert materialised == set(days)


def test_the_sensor_ingests_into_a_lift_only_set_up_with_no_warehouse_yet(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No case was ever created: the sensor's run creates the warehouse and its schema instead
    of failing with "create a case first" (a failed run keeps its run key: never retried)."""
    inbox = workdir / "inbox"
    inbox.mkdir()
    monkeypatch.setenv(settings.LIFT_INBOX_ENV, str(inbox))
    bad = inbox / "a-bad.jsonl"
    bad.write_text('{"timestamp": "2026-11-23T10:00:00Z"}\n')
    log = write_log(inbox / "day.jsonl", LEVER, true_lift=0.0, days=1)
    assert not settings.warehouse_location().exists()
    with dg.instance_for_test() as instance:
        with dg.build_sensor_context(instance=instance) as context:
            result = lift_log_sensor(context)
        assert isinstance(result, dg.SensorResult)
        outcomes = {}
        for request in result.run_requests or []:
            run = lift_ingest_job.execute_in_process(
                instance=instance,
                run_config=request.run_config,
                resources=RESOURCES,
                raise_on_error=False,
            )
            outcomes[Path(request.run_config["ops"]["ingest_lift_log"]["config"]["path"])] = run
            if request.run_config["ops"]["ingest_lift_log"]["config"]["path"] == str(bad):
                # A refused file creates nothing, not even an empty warehouse.
                assert not run.success and not settings.warehouse_location().exists()
    assert outcomes[log].success and not outcomes[bad].success
    with connect(settings.warehouse_location(), read_only=True) as conn:
        rows = conn.execute("SELECT count(*) FROM lift_events").fetchone()
    assert rows == (len(log.read_text().splitlines()),)
    # The daily report runs on a lift-only set-up too.
    with dg.instance_for_test() as instance:
        assert dg.materialize([lift_report], instance=instance, resources=RESOURCES).success


def test_the_daily_report_runs_before_any_warehouse_exists(workdir: Path) -> None:
    with dg.instance_for_test() as instance:
        result = dg.materialize([lift_report], instance=instance, resources=RESOURCES)
    assert result.success
    with connect(settings.warehouse_location(), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM lift_claims").fetchone() == (0,)


def test_the_report_publishes_settings_stored_before_assignment_read_a_copy(
    workdir: Path,
) -> None:
    """A warehouse whose settings were saved before `lift settings` published them for
    assignment gets the copy at its next report, so `lift assign` stops opening the file."""
    with connect(settings.warehouse_location(), create=True) as conn:
        lift_store.save_settings(conn, lift_store.Settings("ws", 0.2, "e4", "memo-v2", 0.5))
    copy = lift_store.settings_file(settings.warehouse_location())
    assert not copy.exists()
    with dg.instance_for_test() as instance:
        assert dg.materialize([lift_report], instance=instance, resources=RESOURCES).success
    assert lift_store.published_settings(settings.warehouse_location()) == {
        "ws": lift_store.Settings("ws", 0.2, "e4", "memo-v2", 0.5)
    }


def test_a_log_growing_in_the_inbox_is_stored_row_by_row_once(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log still being written is ingested at each new size: rows already stored are
    skipped, an unterminated last line waits for the next tick; no row is lost or doubled."""
    inbox = workdir / "inbox"
    inbox.mkdir()
    monkeypatch.setenv(settings.LIFT_INBOX_ENV, str(inbox))
    whole = write_log(workdir / "whole.jsonl", LEVER, true_lift=0.0, days=1)
    lines = whole.read_text().splitlines(keepends=True)
    n = len(lines)
    growing = inbox / "serving.jsonl"
    stages = [
        "".join(lines[: n // 3]),  # complete lines
        "".join(lines[: 2 * n // 3]) + lines[2 * n // 3][:25],  # a line half written
        "".join(lines),
    ]
    outputs = []
    with dg.instance_for_test() as instance:
        for text in stages:
            growing.write_text(text)
            with dg.build_sensor_context(instance=instance) as context:
                result = lift_log_sensor(context)
            assert isinstance(result, dg.SensorResult)
            (request,) = result.run_requests or []
            run = lift_ingest_job.execute_in_process(
                instance=instance, run_config=request.run_config, resources=RESOURCES
            )
            assert run.success
            outputs.append(run.output_for_node("ingest_lift_log"))
    assert [o["storedRows"] for o in outputs] == [n // 3, 2 * n // 3 - n // 3, n - 2 * n // 3]
    assert [o["skippedRows"] for o in outputs] == [0, n // 3, 2 * n // 3]
    assert [o["pendingLine"] for o in outputs] == [None, 2 * n // 3 + 1, None]
    with connect(settings.warehouse_location(), read_only=True) as conn:
        counts = conn.execute(
            "SELECT count(*), count(DISTINCT request_id) FROM lift_events"
        ).fetchone()
        cells = conn.execute("SELECT sum(total) FROM lift_day_cells").fetchone()
    assert counts == (n, n) and cells == (n,)


def test_a_file_whose_run_failed_without_refusing_it_is_tried_again(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run key is requested once: a run that failed for a reason other than the file (here
    a warehouse from a newer release) would otherwise leave the file never ingested. A
    refused file is not retried until it changes."""
    inbox = workdir / "inbox"
    inbox.mkdir()
    monkeypatch.setenv(settings.LIFT_INBOX_ENV, str(inbox))
    log = write_log(inbox / "day.jsonl", LEVER, true_lift=0.0, days=1)
    newer = workdir / "newer.duckdb"
    with connect(newer, create=True) as conn:
        conn.execute("INSERT INTO schema_version VALUES (999, 'from the future', now())")

    def tick(instance: dg.DagsterInstance) -> dg.RunRequest:
        with dg.build_sensor_context(instance=instance) as context:
            result = lift_log_sensor(context)
        assert isinstance(result, dg.SensorResult)
        (request,) = result.run_requests or []
        return request

    def run(instance: dg.DagsterInstance, request: dg.RunRequest, resources: dict) -> bool:  # type: ignore[type-arg]
        return lift_ingest_job.execute_in_process(
            instance=instance,
            run_config=request.run_config,
            resources=resources,
            tags={"dagster/run_key": request.run_key or ""},
            raise_on_error=False,
        ).success

    with dg.instance_for_test() as instance:
        first = tick(instance)
        assert not run(instance, first, {"warehouse": WarehouseResource(path=str(newer))})
        second = tick(instance)
        assert second.run_key == f"{first.run_key}:retry-1"
        assert run(instance, second, RESOURCES)
        assert tick(instance).run_key == second.run_key  # done: requested no more
        bad = inbox / "day.jsonl"
        bad.write_text(log.read_text().replace('"declared"', '"guessed"', 1))
        refused = tick(instance)
        assert not run(instance, refused, RESOURCES)
        assert tick(instance).run_key == refused.run_key  # a refusal waits for a new version


def test_lift_assets_are_one_family_like_every_kinds() -> None:
    """Lift's assets are declared as the other kinds' are (``defs.families.AssetFamily``): one
    group, tag, owners and kinds, each description ending with how its partitions are made;
    the day logs partitioned by day, the report over every day. Names unchanged."""
    from eval_pipelines.definitions import defs
    from eval_pipelines.defs import lift
    from eval_pipelines.defs.families import KINDS, OWNERS
    from eval_pipelines.defs.partitions import lift_days

    assert isinstance(lift.FAMILY.how_to_create, str) and "lift ingest" in lift.FAMILY.how_to_create
    graph = defs.resolve_asset_graph()
    for key, partitions in (
        (dg.AssetKey("lift_logs"), lift_days),
        (dg.AssetKey("lift_report"), None),
    ):
        spec = graph.get(key)
        assert spec.group_name == "live_lift" and spec.owners == OWNERS
        assert spec.tags.get("evaluation_kind") == "lift" and set(spec.kinds) == set(KINDS)
        assert spec.partitions_def == partitions
        assert (spec.description or "").endswith("\n\n" + lift.FAMILY.how_to_create)
    assert {j.name for j in defs.resolve_all_job_defs()} >= {"lift_ingest_job", "lift_report_job"}
    assert defs.resolve_sensor_def("lift_log_sensor").job_name == "lift_ingest_job"
    assert defs.resolve_schedule_def("daily_lift_report").job_name == "lift_report_job"
