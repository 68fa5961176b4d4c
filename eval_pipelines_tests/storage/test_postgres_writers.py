"""Several machines writing one PostgreSQL warehouse at once, each a real process with its own
Dagster home: nothing is stored twice, nothing is lost, an evaluation id names one evaluation,
and the warehouse's password is nowhere in what they wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipelines import settings
from eval_pipelines.storage.warehouse import connect
from eval_pipelines_tests.helpers.lift_traffic import LEVER, write_log
from eval_pipelines_tests.helpers.postgres import ScratchDatabase

EVENTS = (
    "SELECT workspace_id, request_id, line, outcome, exposure_arm FROM lift_events "
    "ORDER BY workspace_id, request_id, line"
)


def _machines(tmp_path: Path, *commands: list[str]) -> list[object]:
    """Run each command as its own machine (own folder and Dagster home), all released at
    once; returns what each printed."""
    go = tmp_path / "go"
    started = []
    for number, command in enumerate(commands):
        home = tmp_path / f"machine{number}"
        (home / "dagster_home").mkdir(parents=True)
        started.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "eval_pipelines_tests.helpers.warehouse_writers",
                    command[0],
                    str(go),
                    *command[1:],
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=home,
                env={**os.environ, "DAGSTER_HOME": str(home / "dagster_home")},
            )
        )
    go.touch()
    outputs = [process.communicate(timeout=600) for process in started]
    assert [p.returncode for p in started] == [0] * len(started), outputs
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


def _overlapping_logs(folder: Path) -> tuple[Path, Path]:
    first = write_log(folder / "a.jsonl", LEVER, true_lift=0.0, days=1, seed=11)
    second = write_log(
        folder / "b.jsonl", LEVER, true_lift=0.0, days=1, seed=12, request_prefix="b-"
    )
    lines_a = first.read_text().splitlines()
    lines_b = second.read_text().splitlines()
    # b holds half of a's requests (the same lines) besides its own
    second.write_text("\n".join(lines_b + lines_a[: len(lines_a) // 2]) + "\n")
    return first, second


def test_two_machines_ingesting_overlapping_logs_store_each_request_once(
    postgres_workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The oracle: the same two files ingested one after the other into a DuckDB file."""
    from eval_pipelines.api import lift

    first, second = _overlapping_logs(tmp_path)
    stored = _machines(
        tmp_path,
        ["ingest", str(first), str(second)],
        ["ingest", str(second), str(first)],
    )
    with connect(settings.warehouse_location(), read_only=True) as conn:
        shared = conn.execute(EVENTS).fetchall()
    file = tmp_path / "alone.duckdb"
    monkeypatch.setenv("EVAL_PIPELINES_WAREHOUSE", str(file))
    lift.ingest(first)
    lift.ingest(second)
    with connect(file, read_only=True) as conn:
        alone = conn.execute(EVENTS).fetchall()
    assert len(shared) == len(alone) == len({(w, r) for w, r, *_ in alone})
    assert {(w, r, o, a) for w, r, _, o, a in shared} == {(w, r, o, a) for w, r, _, o, a in alone}
    assert sum(sum(rows) for rows in stored) == len(alone)  # nothing counted twice


def test_two_machines_registering_evaluations_at_once_get_distinct_ids(
    postgres_workdir: Path, small_case: str, tmp_path: Path
) -> None:
    """One evaluation id, one evaluation: the ids two machines register at the same moment
    are all different and each is stored once with its own spec."""
    registered = _machines(tmp_path, ["register", small_case, "4"], ["register", small_case, "4"])
    ids = [eval_id for machine in registered for eval_id in machine]
    assert len(ids) == len(set(ids)) == 8
    with connect(settings.warehouse_location(), read_only=True) as conn:
        stored = conn.execute(
            "SELECT eval_id, count(*) FROM evaluations GROUP BY eval_id"
        ).fetchall()
    assert sorted(stored) == sorted((eval_id, 1) for eval_id in ids)


def test_the_password_is_in_nothing_the_machines_wrote(
    postgres_workdir: Path,
    postgres_database: ScratchDatabase,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Ingests and evaluations registered by two machines: the password is in no table of
    the warehouse, no file of their folders or Dagster homes, and nothing they printed."""
    first, second = _overlapping_logs(tmp_path)
    _machines(tmp_path, ["ingest", str(first)], ["ingest", str(second)])
    secret = postgres_database.password
    with connect(settings.warehouse_location(), read_only=True) as conn:
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_catalog = "
                "current_database() AND table_schema = current_schema()"
            ).fetchall()
        ]
        for table in tables:
            hits = conn.execute(
                f"SELECT count(*) FROM {table} t WHERE CAST(t AS VARCHAR) LIKE ?",
                [f"%{secret}%"],
            ).fetchone()
            assert hits == (0,), table
    assert len(tables) > 20
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    captured = capfd.readouterr()
    assert secret not in captured.out + captured.err
