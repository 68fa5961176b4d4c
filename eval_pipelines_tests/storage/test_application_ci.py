"""Recorded application-CI results on a real DuckDB file: a round trip of every field, the same
result recorded twice is stored once, another result under the same key is refused."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import pytest

from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.lift.application_ci import application_ci_result
from eval_pipelines.storage import application_ci as store
from eval_pipelines.storage.warehouse import connect, transaction

WHEN = datetime(2026, 12, 6, 21, 0, 5)

HARNESS = application_ci_result(
    workspace_id="acme",
    candidate="memo-v2",
    source="harness",
    commit="9f1c2ab",
    suite="replay smoke",
    passed=48,
    failed=1,
    skipped=2,
    recorded_at=WHEN,
)
GATE = application_ci_result(
    workspace_id="acme",
    candidate="memo-v2",
    source="golden_gate",
    commit="1650c7d40fc1",
    suite="supplier_invoices",
    passed=2,
    failed=0,
    golden_run_ids=("g-1", "g-2"),
    recorded_at=datetime(2026, 12, 6, 20, 0),
    detail="set a: scored 1.000 (33/33) at or above threshold 1.0; set b: ...",
)


def test_results_round_trip_through_a_duckdb_file(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    with connect(warehouse, create=True) as conn, transaction(conn):
        assert store.insert_result(conn, HARNESS) == (HARNESS, True)
        assert store.insert_result(conn, GATE) == (GATE, True)
    with connect(warehouse, read_only=True) as conn:
        # By workspace, candidate and time recorded: the gate's result was recorded first.
        assert store.results(conn) == [GATE, HARNESS]
        assert store.results(conn, workspace_id="acme") == [GATE, HARNESS]
        assert store.results(conn, workspace_id="other") == []


def test_the_same_result_again_is_stored_once_and_another_one_is_refused(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    with connect(warehouse, create=True) as conn:
        store.insert_result(conn, HARNESS)
        again = dataclasses.replace(HARNESS, recorded_at=datetime(2026, 12, 7))
        # Idempotent: nothing written, the stored result (its first time) returned.
        assert store.insert_result(conn, again) == (HARNESS, False)
        other = dataclasses.replace(HARNESS, failed_count=0)
        with pytest.raises(ConflictError) as refused:
            store.insert_result(conn, other)
        message = str(refused.value)
        assert message.startswith(
            "`commit`='9f1c2ab', `suite`='replay smoke': a harness result of candidate memo-v2 "
            "(workspace acme) is already recorded for them"
        )
        assert "48 passed, 1 failed, 2 skipped" in message
        assert "a recorded result is never replaced" in message
        assert store.results(conn) == [HARNESS]
        # Another suite (or commit, source, candidate, workspace) is another result.
        renamed = dataclasses.replace(other, suite="replay smoke (re-run)")
        assert store.insert_result(conn, renamed) == (renamed, True)
        assert len(store.results(conn)) == 2
        # A later gate run of the same workflow revision is another result; the same runs with
        # another reading are refused.
        store.insert_result(conn, GATE)
        rerun = dataclasses.replace(GATE, golden_run_ids=("g-3", "g-4"), failed_count=1)
        assert store.insert_result(conn, rerun) == (rerun, True)
        with pytest.raises(ConflictError, match="^`revision`='1650c7d40fc1', `workflow`="):
            store.insert_result(conn, dataclasses.replace(GATE, failed_count=1))
        assert len(store.results(conn)) == 4
