"""``workflow_revision_sensor`` evaluated with ``build_sensor_context`` against a real
warehouse and a real instance, one scenario per test: first tick, a new revision, the same
revision again, a changed file under data/workflows/, a busy warehouse. Partitions the
sensor requests are added the way the daemon adds them, before the next tick."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.api import workflows
from eval_pipelines.defs.golden import FILE_TAG
from eval_pipelines.defs.golden_automation import RUNS_PER_TICK, workflow_revision_sensor
from eval_pipelines.defs.partitions import WORKFLOW_REVISIONS
from eval_pipelines.defs.resources import WarehouseResource

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "data" / "workflows" / "supplier_invoices.yaml"


@pytest.fixture
def folder(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    watched = workdir / "workflows"
    watched.mkdir()
    monkeypatch.setenv("EVAL_PIPELINES_WORKFLOWS_DIR", str(watched))
    return watched


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance


def _variant(workdir: Path, word: str) -> Path:
    """A copy of the demo workflow whose description differs: a new revision."""
    path = workdir / f"{word}.yaml"
    text = WORKFLOW.read_text().replace(
        "description: Supplier invoices from Harbour Lane Paper Co.", f"description: {word}"
    )
    path.write_text(text)
    return path


def _tick(instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult | dg.SkipReason:
    # Entered and left as a context manager: a context left open keeps the instance it was
    # built with as Dagster's current one (and breaks later tests once that instance closes).
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"warehouse": WarehouseResource()}
    ) as context:
        result = workflow_revision_sensor(context)
    if isinstance(result, dg.SensorResult):
        for request in result.dynamic_partitions_requests or []:
            instance.add_dynamic_partitions(
                request.partitions_def_name, list(request.partition_keys)
            )
    return result


def test_no_warehouse_yet_skips(folder: Path, instance: dg.DagsterInstance) -> None:
    result = _tick(instance, None)
    assert isinstance(result, dg.SkipReason)
    assert "no new workflow revision" in (result.skip_message or "")


def test_first_tick_gates_only_each_workflows_newest_revision(
    workdir: Path, folder: Path, instance: dg.DagsterInstance
) -> None:
    old = workflows.save_workflow("invoices", _variant(workdir, "old"))
    new = workflows.save_workflow("invoices", _variant(workdir, "new"))
    other = workflows.save_workflow("receipts", _variant(workdir, "receipts"))
    result = _tick(instance, None)
    assert isinstance(result, dg.SensorResult)
    requested = {r.partition_key: r.run_key for r in result.run_requests or []}
    assert requested == {
        new.revision: f"gate:{new.revision}",
        other.revision: f"gate:{other.revision}",
    }
    # The older revision gets its partition (so the UI lists it) but no gating run.
    assert set(instance.get_dynamic_partitions(WORKFLOW_REVISIONS)) == {
        old.revision,
        new.revision,
        other.revision,
    }


def test_a_new_revision_is_gated_once_and_the_same_revision_again_never(
    workdir: Path, folder: Path, instance: dg.DagsterInstance
) -> None:
    workflows.save_workflow("invoices", _variant(workdir, "first"))
    first = _tick(instance, None)
    assert isinstance(first, dg.SensorResult)
    cursor = first.cursor
    assert isinstance(_tick(instance, cursor), dg.SkipReason)  # nothing new

    saved = workflows.save_workflow("invoices", _variant(workdir, "second"))
    second = _tick(instance, cursor)
    assert isinstance(second, dg.SensorResult)
    assert [(r.partition_key, r.run_key) for r in second.run_requests or []] == [
        (saved.revision, f"gate:{saved.revision}")
    ]
    again = workflows.save_workflow("invoices", _variant(workdir, "second"))
    assert again == dataclasses.replace(saved, new=False)  # identical content: the same revision
    assert isinstance(_tick(instance, second.cursor), dg.SkipReason)


def test_a_changed_file_under_data_workflows_is_gated_with_its_path(
    workdir: Path, folder: Path, instance: dg.DagsterInstance
) -> None:
    target = folder / "invoices.yaml"
    shutil.copy(_variant(workdir, "one"), target)
    first = _tick(instance, None)
    assert isinstance(first, dg.SensorResult)
    (request,) = first.run_requests or []
    assert request.tags[FILE_TAG] == str(target)
    shutil.copy(_variant(workdir, "two"), target)
    second = _tick(instance, first.cursor)
    assert isinstance(second, dg.SensorResult)
    (changed,) = second.run_requests or []
    assert changed.partition_key != request.partition_key
    # The sensor wrote nothing: the revision is saved by the run it requests.
    assert not Path("warehouse.duckdb").exists()


def test_the_tick_is_bounded(workdir: Path, folder: Path, instance: dg.DagsterInstance) -> None:
    first = _tick(instance, None)
    for i in range(RUNS_PER_TICK + 3):
        workflows.save_workflow(f"wf{i}", _variant(workdir, f"w{i}"))
    result = _tick(instance, first.cursor if isinstance(first, dg.SensorResult) else "x")
    assert isinstance(result, dg.SensorResult)
    assert len(result.run_requests or []) == RUNS_PER_TICK
    rest = _tick(instance, result.cursor)
    assert isinstance(rest, dg.SensorResult)
    assert len(rest.run_requests or []) == 3


HOLD = """
import sys, time, duckdb
conn = duckdb.connect(sys.argv[1])
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_busy_warehouse_skips_the_tick_instead_of_failing(
    workdir: Path, folder: Path, instance: dg.DagsterInstance
) -> None:
    workflows.save_workflow("invoices", _variant(workdir, "busy"))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(workdir / "warehouse.duckdb"), "30"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        result = _tick(instance, None)
        assert isinstance(result, dg.SkipReason)
        assert "busy" in (result.skip_message or "")
        assert instance.get_dynamic_partitions(WORKFLOW_REVISIONS) == []
    finally:
        holder.kill()
        holder.wait()
    assert isinstance(_tick(instance, None), dg.SensorResult)


def test_the_nightly_schedule_reruns_gating_sets_against_each_active_revision(
    golden_home: Path, instance: dg.DagsterInstance
) -> None:
    from datetime import UTC, datetime

    from eval_pipelines.api import golden
    from eval_pipelines.defs.golden import SETS_TAG
    from eval_pipelines.defs.golden_automation import nightly_gating_runs
    from eval_pipelines_tests.helpers.golden_demo import WORKFLOW, seed

    revision = seed("inv")
    golden.create_set("informational", workflow=WORKFLOW)  # not a gate: not re-run nightly

    def evaluate() -> list[dg.RunRequest] | dg.SkipReason:
        with dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=datetime(2026, 12, 1, 2, 0, tzinfo=UTC),
            resources={"warehouse": WarehouseResource()},
        ) as context:
            return nightly_gating_runs(context)  # type: ignore[no-any-return]

    assert isinstance(evaluate(), dg.SkipReason)  # nothing is active yet
    instance.add_dynamic_partitions(WORKFLOW_REVISIONS, [revision])
    from eval_pipelines.stages.golden import run_golden_sets
    from eval_pipelines.storage.warehouse import connect

    run_golden_sets(lambda **kw: connect(golden_home / "warehouse.duckdb", **kw), revision)
    workflows.activate_workflow(WORKFLOW, revision, by="ana")
    (request,) = evaluate()  # type: ignore[misc]
    assert request.partition_key == revision
    assert request.run_key == f"nightly:{revision}:2026-12-01"
    assert request.tags[SETS_TAG] == "inv"


def _launch_fails(instance: dg.DagsterInstance, revision: str, run_key: str) -> None:
    """What the daemon leaves when it cannot launch a requested run: a run carrying the
    sensor's run key that failed without ever starting."""
    from dagster._core.storage.tags import RUN_KEY_TAG, SENSOR_NAME_TAG

    from eval_pipelines.definitions import defs

    run = instance.create_run_for_job(
        defs.resolve_job_def("golden_gate"),
        status=dg.DagsterRunStatus.NOT_STARTED,
        tags={
            RUN_KEY_TAG: run_key,
            SENSOR_NAME_TAG: "workflow_revision_sensor",
            "dagster/partition": revision,
        },
    )
    instance.report_run_failed(run, "Caught an error while launching the run")


def test_a_gating_run_that_fails_to_launch_is_requested_again_under_a_new_run_key(
    workdir: Path, folder: Path, instance: dg.DagsterInstance
) -> None:
    saved = workflows.save_workflow("invoices", _variant(workdir, "first"))
    revision = saved.revision
    first = _tick(instance, None)
    assert isinstance(first, dg.SensorResult)
    assert [r.run_key for r in first.run_requests or []] == [f"gate:{revision}"]
    # Until the run exists (the daemon creates it after the tick), nothing is requested again.
    waiting = _tick(instance, first.cursor)
    assert isinstance(waiting, dg.SkipReason)

    _launch_fails(instance, revision, f"gate:{revision}")
    retry = _tick(instance, first.cursor)
    assert isinstance(retry, dg.SensorResult)
    assert [(r.partition_key, r.run_key, r.tags) for r in retry.run_requests or []] == [
        (revision, f"gate:{revision}:2", {"eval_pipelines/workflow": "invoices"})
    ]
    assert isinstance(_tick(instance, retry.cursor), dg.SkipReason)  # the retry is pending

    _launch_fails(instance, revision, f"gate:{revision}:2")
    third = _tick(instance, retry.cursor)
    assert isinstance(third, dg.SensorResult)
    assert [r.run_key for r in third.run_requests or []] == [f"gate:{revision}:3"]
    _launch_fails(instance, revision, f"gate:{revision}:3")
    # Three attempts failed to launch: given up (the log says how to run it by hand).
    given_up = _tick(instance, third.cursor)
    assert isinstance(given_up, dg.SkipReason)


def test_a_revision_the_gate_blocks_is_a_successful_sensor_run_with_a_failed_error_check(
    golden_home: Path, instance: dg.DagsterInstance
) -> None:
    """The sensor's run of a revision that breaks a field: before, the blocking check failed
    the run (a red mark on the sensor's run, a raw DagsterAssetCheckFailedError trace, the
    reason only in the check's panel). Now the run succeeds and its ERROR check fails with
    the reason."""
    from eval_pipelines.definitions import defs
    from eval_pipelines.defs.dagster_private import RUN_KEY_TAG, SENSOR_NAME_TAG
    from eval_pipelines.defs.run_tags import KIND_TAG
    from eval_pipelines_tests.helpers.golden_demo import WORKFLOW, broken_variant, seed

    seed()
    first = _tick(instance, None)  # gates the seeded revision
    assert isinstance(first, dg.SensorResult)
    broken = workflows.save_workflow(WORKFLOW, broken_variant(golden_home)).revision
    tick = _tick(instance, first.cursor)
    assert isinstance(tick, dg.SensorResult)
    (request,) = tick.run_requests or []
    assert (request.partition_key, request.run_key) == (broken, f"gate:{broken}")
    # What the daemon runs for the request: the served job, with the request's tags.
    result = defs.resolve_job_def("golden_gate").execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        tags={
            **request.tags,
            RUN_KEY_TAG: str(request.run_key),
            SENSOR_NAME_TAG: "workflow_revision_sensor",
        },
        raise_on_error=False,
    )
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
    assert run.tags[KIND_TAG] == "golden"
    (check,) = [
        e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    assert not check.passed
    assert check.severity == dg.AssetCheckSeverity.ERROR
    assert check.description == (
        "gate blocked: inv 30/33 \u2014 set inv: scored 0.909 (30/33) below threshold 1.0 "
        "(misses: customer 3 of 3 wrong)"
    )
    # The run succeeded, the gate did not pass: activation is still refused.
    with pytest.raises(workflows.ActivationRefused, match="scored 0.909"):
        workflows.activate_workflow(WORKFLOW, broken, by="ana")
