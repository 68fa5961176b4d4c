"""Live lift storage: ingested log files and their rows, per-day cell counts, each workspace's
holdout settings, the lift ledger and the reports."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.lift.cost_columns import COST_COLUMNS
from eval_pipelines.core.lift.ledger import Claim
from eval_pipelines.settings import WarehouseLocation
from eval_pipelines.storage.frames import INCOMING, insert_frame, query_frame
from eval_pipelines.storage.warehouse import COMPANION_SUFFIXES

#: What each logged model invocation cost and its execution envelope (all optional; null on
#: rows that do not log them and on rows stored before migration 16).
COST_EVENT_COLUMNS = ", ".join(COST_COLUMNS)
EVENT_COLUMNS = (
    "file_id, line, day, ts, request_id, workspace_id, cluster, exposure_arm, exposure_epoch, "
    "claim_type, situation_class, source, outcome, artifact_key, candidate, baseline_head, "
    f"app_config, key_source, turn, child_span, {COST_EVENT_COLUMNS}"
)
# A request's content (docs/lift.md): every stored column but where it was stored from.
_CONTENT_COLUMNS = EVENT_COLUMNS.removeprefix("file_id, line, day, ts, ")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def file_ingested(conn: duckdb.DuckDBPyConnection, file_id: str) -> bool:
    row = conn.execute("SELECT count(*) FROM lift_files WHERE file_id = ?", [file_id]).fetchone()
    return bool(row and row[0])


def stored_requests(conn: duckdb.DuckDBPyConnection, requests: pl.DataFrame) -> pl.DataFrame:
    """Every stored row of these requests, with the line and path it came from (the path of
    the file that stored it): ``request_id``, ``stored_line``, ``stored_path``, ``ts`` and
    the content columns. A request is its workspace's (``workspace_id``, ``request_id``);
    ``requests`` without a ``workspace_id`` column asks for each id in every workspace."""
    key = [c for c in ("workspace_id", "request_id") if c in requests.columns]
    joined = " AND ".join(f"i.{c} = e.{c}" for c in key)
    conn.register(INCOMING, requests.select(key).unique().to_arrow())
    try:
        return conn.execute(
            "SELECT e.line AS stored_line, f.path AS stored_path, e.ts, "
            + ", ".join(f"e.{c}" for c in _CONTENT_COLUMNS.split(", "))
            + f" FROM lift_events e JOIN incoming_frame i ON {joined} "
            "LEFT JOIN lift_files f ON f.file_id = e.file_id "
            "ORDER BY e.workspace_id, e.request_id, e.line"
        ).pl()
    finally:
        conn.unregister(INCOMING)


def delete_unresolved(conn: duckdb.DuckDBPyConnection, requests: pl.DataFrame) -> None:
    """Delete the stored unresolved rows (no outcome) of these requests (``workspace_id``,
    ``request_id``), which the rows resolving them replace (call inside a transaction, before
    inserting those)."""
    conn.register(INCOMING, requests.select("workspace_id", "request_id").unique().to_arrow())
    try:
        conn.execute(
            "DELETE FROM lift_events WHERE outcome IS NULL "
            "AND EXISTS (SELECT 1 FROM incoming_frame i WHERE i.workspace_id = "
            "lift_events.workspace_id AND i.request_id = lift_events.request_id)"
        )
    finally:
        conn.unregister(INCOMING)


def insert_file(
    conn: duckdb.DuckDBPyConnection, file_id: str, path: str, events: pl.DataFrame
) -> None:
    """Store a validated file's new rows (call inside a transaction); the file is recorded
    once, with the rows it stored."""
    days = events.get_column("day")
    if not file_ingested(conn, file_id):
        conn.execute(
            "INSERT INTO lift_files VALUES (?, ?, ?, ?, ?, ?)",
            [file_id, path, events.height, days.min(), days.max(), _now()],
        )
    frame = events.with_columns(
        file_id=pl.lit(file_id),
        ts=pl.col("timestamp").dt.replace_time_zone(None),
        line=pl.col("line").cast(pl.Int64),
    )
    insert_frame(
        conn,
        f"INSERT INTO lift_events ({EVENT_COLUMNS}) SELECT {EVENT_COLUMNS} FROM incoming_frame",
        frame.select(EVENT_COLUMNS.split(", ")),
    )


def events(
    conn: duckdb.DuckDBPyConnection,
    *,
    day: date | None = None,
    workspace_id: str | None = None,
) -> pl.DataFrame:
    """Stored rows (all, or one day's, or one workspace's), in time order. A row stored more
    than once with the same content (before ingest was idempotent per request id) is read
    once; copies with different content are all returned (the report leaves them out)."""
    return query_frame(
        conn,
        f"SELECT {EVENT_COLUMNS} FROM lift_events "
        "WHERE (?::DATE IS NULL OR day = ?::DATE) AND (?::VARCHAR IS NULL OR workspace_id = ?) "
        f"QUALIFY row_number() OVER (PARTITION BY ts, {_CONTENT_COLUMNS} "
        "ORDER BY file_id, line) = 1 "
        "ORDER BY ts, file_id, line",
        [day, day, workspace_id, workspace_id],
    )


def days(conn: duckdb.DuckDBPyConnection) -> list[date]:
    rows = conn.execute("SELECT DISTINCT day FROM lift_events ORDER BY day").fetchall()
    return [row[0] for row in rows]


def replace_day_cells(conn: duckdb.DuckDBPyConnection, day: date, cells: pl.DataFrame) -> None:
    """The day's per-cell counts, replacing any earlier ones (call inside a transaction)."""
    conn.execute("DELETE FROM lift_day_cells WHERE day = ?", [day])
    insert_frame(
        conn,
        "INSERT INTO lift_day_cells SELECT day, workspace_id, claim_type, situation_class, "
        "exposure_arm, source, exposure_epoch, total, resolved, successes, censored, clusters "
        "FROM incoming_frame",
        cells.with_columns(day=pl.lit(day)),
    )


@dataclass(frozen=True)
class Settings:
    """A workspace's standing-holdout settings (an owner's choice within [5%, 30%])."""

    workspace_id: str
    holdout_fraction: float
    epoch: str
    lever: str | None
    lever_holdout_share: float

    def to_json(self) -> dict[str, Any]:
        return {
            "workspaceId": self.workspace_id,
            "holdoutFraction": self.holdout_fraction,
            "epoch": self.epoch,
            "lever": self.lever,
            "leverHoldoutShare": self.lever_holdout_share,
        }


def settings(conn: duckdb.DuckDBPyConnection, workspace_id: str) -> Settings | None:
    row = conn.execute(
        "SELECT workspace_id, holdout_fraction, epoch, lever, lever_holdout_share "
        "FROM lift_settings WHERE workspace_id = ?",
        [workspace_id],
    ).fetchone()
    return Settings(*row) if row else None


def save_settings(conn: duckdb.DuckDBPyConnection, value: Settings) -> None:
    conn.execute("DELETE FROM lift_settings WHERE workspace_id = ?", [value.workspace_id])
    conn.execute(
        "INSERT INTO lift_settings VALUES (?, ?, ?, ?, ?, ?)",
        [
            value.workspace_id,
            value.holdout_fraction,
            value.epoch,
            value.lever,
            value.lever_holdout_share,
            _now(),
        ],
    )


def workspace_case(conn: duckdb.DuckDBPyConnection, workspace_id: str) -> str | None:
    """The case the workspace's traffic is an instance of (``lift settings --case``), if set."""
    row = conn.execute(
        "SELECT case_id FROM lift_workspace_cases WHERE workspace_id = ?", [workspace_id]
    ).fetchone()
    return str(row[0]) if row else None


def save_workspace_case(conn: duckdb.DuckDBPyConnection, workspace_id: str, case_id: str) -> None:
    conn.execute("DELETE FROM lift_workspace_cases WHERE workspace_id = ?", [workspace_id])
    conn.execute(
        "INSERT INTO lift_workspace_cases VALUES (?, ?, ?)", [workspace_id, case_id, _now()]
    )


@dataclass(frozen=True)
class CostSettings:
    """A workspace's cost options (``lift settings --intent/--budget/--lever-changes/
    --prices``), as their JSON documents: claim options, not part of the split. ``intent`` is
    a :class:`~eval_pipelines.core.lift.intents.DecisionIntent`'s document, ``prices`` a
    price table's; ``lever_changes``, the envelope elements the lever declares it changes."""

    workspace_id: str
    intent: dict[str, Any] | None
    lever_changes: tuple[str, ...]
    prices: dict[str, Any] | None


def cost_settings(conn: duckdb.DuckDBPyConnection, workspace_id: str) -> CostSettings | None:
    row = conn.execute(
        "SELECT intent_json, lever_changes_json, prices_json FROM lift_cost_settings "
        "WHERE workspace_id = ?",
        [workspace_id],
    ).fetchone()
    if row is None:
        return None
    intent, changes, prices = row
    return CostSettings(
        workspace_id,
        json.loads(intent) if intent else None,
        tuple(json.loads(changes)),
        json.loads(prices) if prices else None,
    )


def save_cost_settings(conn: duckdb.DuckDBPyConnection, value: CostSettings) -> None:
    conn.execute("DELETE FROM lift_cost_settings WHERE workspace_id = ?", [value.workspace_id])
    conn.execute(
        "INSERT INTO lift_cost_settings VALUES (?, ?, ?, ?, ?)",
        [
            value.workspace_id,
            json.dumps(value.intent) if value.intent is not None else None,
            json.dumps(list(value.lever_changes)),
            json.dumps(value.prices) if value.prices is not None else None,
            _now(),
        ],
    )


def settings_file(warehouse: Path) -> Path:
    """Where every workspace's settings are published beside the warehouse, for assignment:
    serving code reads them without opening the DuckDB file, which another process may hold
    for writing (DuckDB lets one writing process lock it, readers included)."""
    return warehouse.with_name(warehouse.name + COMPANION_SUFFIXES[0])


def publish_settings(conn: duckdb.DuckDBPyConnection, warehouse: WarehouseLocation) -> None:
    """Write every workspace's committed settings to :func:`settings_file`, atomically (a
    reader sees the old file or the new one, never half of one). Call after the settings'
    transaction committed, with the connection still open, so two writers cannot interleave.
    A PostgreSQL warehouse publishes nothing: readers never wait on it, so assignment reads
    the settings from the database every machine shares."""
    if not isinstance(warehouse, Path):
        return
    rows = conn.execute(
        "SELECT workspace_id, holdout_fraction, epoch, lever, lever_holdout_share "
        "FROM lift_settings ORDER BY workspace_id"
    ).fetchall()
    content = {"settings": {row[0]: asdict(Settings(*row)) for row in rows}}
    target = settings_file(warehouse)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(content, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def published_settings(warehouse: WarehouseLocation) -> dict[str, Settings] | None:
    """The settings :func:`publish_settings` wrote, by workspace; None when the file is not
    there (a warehouse from before it was published, or a PostgreSQL one: read
    :func:`settings` instead)."""
    if not isinstance(warehouse, Path):
        return None
    path = settings_file(warehouse)
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return {key: Settings(**value) for key, value in content["settings"].items()}


CLAIM_COLUMNS = (
    "claim_id, workspace_id, claim_type, epoch, candidate, status, reason, verdict, estimate, "
    "low, high, mde, n_treated, n_control, clusters_treated, clusters_control, aa_json, "
    "baseline_head, app_config, offline_json, lift_json, opened_at, updated_at, cost_json"
)


def _claim_of(row: tuple[Any, ...]) -> Claim:
    values = list(row)
    values[16] = json.loads(values[16])
    values[19] = json.loads(values[19]) if values[19] else None
    values[20] = json.loads(values[20])
    # A claim stored before the cost bar (migration 16) has no cost document.
    values[23] = json.loads(values[23]) if values[23] else None
    return Claim(*values)


def claims(conn: duckdb.DuckDBPyConnection) -> list[Claim]:
    rows = conn.execute(
        f"SELECT {CLAIM_COLUMNS} FROM lift_claims ORDER BY workspace_id, claim_type, epoch, "
        "claim_id"
    ).fetchall()
    return [_claim_of(row) for row in rows]


def claim(conn: duckdb.DuckDBPyConnection, claim_id: str) -> Claim | None:
    row = conn.execute(
        f"SELECT {CLAIM_COLUMNS} FROM lift_claims WHERE claim_id = ?", [claim_id]
    ).fetchone()
    return _claim_of(row) if row else None


def save_claim(conn: duckdb.DuckDBPyConnection, value: Claim) -> None:
    """Insert or replace a ledger row (keeps its opening time)."""
    conn.execute("DELETE FROM lift_claims WHERE claim_id = ?", [value.claim_id])
    conn.execute(
        f"INSERT INTO lift_claims ({CLAIM_COLUMNS}) VALUES "
        f"({', '.join('?' * len(CLAIM_COLUMNS.split(', ')))})",
        [
            value.claim_id,
            value.workspace_id,
            value.claim_type,
            value.epoch,
            value.candidate,
            value.status,
            value.reason,
            value.verdict,
            value.estimate,
            value.low,
            value.high,
            value.mde,
            value.n_treated,
            value.n_control,
            value.clusters_treated,
            value.clusters_control,
            json.dumps(value.aa),
            value.baseline_head,
            value.app_config,
            json.dumps(value.offline) if value.offline is not None else None,
            json.dumps(value.lift),
            value.opened_at,
            value.updated_at,
            json.dumps(value.cost) if value.cost is not None else None,
        ],
    )


def save_report(
    conn: duckdb.DuckDBPyConnection,
    report_id: str,
    run_id: str | None,
    report: dict[str, Any],
    markdown: str,
) -> None:
    conn.execute("DELETE FROM lift_reports WHERE report_id = ?", [report_id])
    conn.execute(
        "INSERT INTO lift_reports VALUES (?, ?, ?, ?, ?)",
        [report_id, run_id, json.dumps(report), markdown, _now()],
    )


def latest_report(conn: duckdb.DuckDBPyConnection) -> tuple[dict[str, Any], str] | None:
    row = conn.execute(
        "SELECT report_json, markdown FROM lift_reports ORDER BY created_at DESC LIMIT 1"
    ).fetchone()
    return (json.loads(row[0]), row[1]) if row else None


AUDIT_COLUMNS = (
    "request_id, workspace_id, exposure_epoch, audited_outcome, note, path, line, ingested_at"
)


def audits(conn: duckdb.DuckDBPyConnection, request_ids: pl.Series | None = None) -> pl.DataFrame:
    """Stored outcome audits (all, or of these request ids in every workspace):
    :data:`AUDIT_COLUMNS`. An audit is of one workspace's request (``workspace_id``,
    ``request_id``)."""
    if request_ids is None:
        return conn.execute(
            f"SELECT {AUDIT_COLUMNS} FROM lift_audits ORDER BY workspace_id, request_id"
        ).pl()
    conn.register(INCOMING, pl.DataFrame({"request_id": request_ids.unique()}).to_arrow())
    try:
        return conn.execute(
            "SELECT a.request_id, a.workspace_id, a.exposure_epoch, a.audited_outcome, a.note, "
            "a.path, a.line, a.ingested_at FROM lift_audits a "
            "JOIN incoming_frame i ON i.request_id = a.request_id "
            "ORDER BY a.workspace_id, a.request_id"
        ).pl()
    finally:
        conn.unregister(INCOMING)


def insert_audits(conn: duckdb.DuckDBPyConnection, path: str, rows: pl.DataFrame) -> None:
    """Store new outcome audits (call inside a transaction): ``request_id``, ``workspace_id``,
    ``exposure_epoch``, ``audited_outcome``, ``note``, ``line``."""
    frame = rows.select(
        "request_id", "workspace_id", "exposure_epoch", "audited_outcome", "note", "line"
    ).with_columns(path=pl.lit(path), ingested_at=pl.lit(_now()))
    insert_frame(
        conn,
        f"INSERT INTO lift_audits ({AUDIT_COLUMNS}) SELECT {AUDIT_COLUMNS} FROM incoming_frame",
        frame,
    )
