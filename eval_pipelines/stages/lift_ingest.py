"""Live-lift logs into the warehouse (spec 004): a log file ingested whole or not at all,
idempotent per request id, and each day's cells recounted from the stored rows."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.lift.logs import (
    REQUEST_KEY,
    SUFFIXES,
    conflict_error,
    match_stored,
    mixed_artifacts,
    read_log_tail,
    resolved_in_file,
    validate_log,
    validated_log,
)
from eval_pipelines.core.lift.rollup import CELL_KEYS, rollup
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import transaction, writers_take_turns

ARM_ORDER = ("treated", "lever_holdout", "holdout", "pre_lever", "imported")


@dataclass(frozen=True)
class Ingested:
    """One ingest: the file's rows, how many were stored (requests never seen), resolved
    (rows with the outcome of a request stored unresolved, which they replace) and skipped
    (requests already stored with the same content, or stored resolved and logged here
    unresolved: ``unresolved_after_resolved`` of them); ``superseded``, the file's unresolved
    lines of requests a later or earlier line of it resolves (left out)."""

    file_id: str
    path: str
    rows: int
    days: tuple[date, ...]
    new: bool
    mixed_artifacts: int
    stored: int = 0
    skipped: int = 0
    pending_line: int | None = None
    resolved: int = 0
    unresolved_after_resolved: int = 0
    # Unresolved lines of requests whose outcome a line of the same file gives: left out.
    superseded: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "fileId": self.file_id,
            "path": self.path,
            "rows": self.rows,
            "days": [d.isoformat() for d in self.days],
            "new": self.new,
            "storedRows": self.stored,
            "skippedRows": self.skipped,
            "resolvedRows": self.resolved,
            "unresolvedAfterResolvedRows": self.unresolved_after_resolved,
            "supersededRows": self.superseded,
            "pendingLine": self.pending_line,
            "mixedArtifacts": self.mixed_artifacts,
        }


DAY_CELL_COUNTS = ("total", "resolved", "successes", "censored", "clusters")


def day_cells(events: pl.DataFrame) -> pl.DataFrame:
    """Per cell (workspace x claim type x situation class x arm x source) and epoch: rows,
    resolved, successes, censored (unresolved) and clusters; the rollup's own cells, one
    epoch at a time, so the stored counts are the report's. Arms are group keys: never pooled."""
    epochs = sorted(set(events.get_column("exposure_epoch").to_list()))
    rows = [
        {
            **{key: getattr(cell, key) for key in CELL_KEYS},
            "exposure_epoch": cell.epoch,
            **{count: getattr(cell, count) for count in DAY_CELL_COUNTS},
        }
        for epoch in epochs
        for cell in rollup(events, epoch=epoch)
    ]
    schema = {key: pl.String for key in (*CELL_KEYS, "exposure_epoch")}
    return pl.DataFrame(rows, schema={**schema, **dict.fromkeys(DAY_CELL_COUNTS, pl.Int64)})


def refresh_days(conn: duckdb.DuckDBPyConnection, days: Iterable[date]) -> None:
    """Recount the cells of ``days`` from the stored rows (inside a transaction)."""
    for day in days:
        lift_store.replace_day_cells(conn, day, day_cells(lift_store.events(conn, day=day)))


@dataclass(frozen=True)
class LogRead:
    """A file's validated rows, its content hash, and the line left for a later read (a
    growing file's unterminated last line), if any."""

    events: pl.DataFrame
    file_id: str
    pending_line: int | None = None


def read_events(
    path: Path | str, *, partial_tail: bool = False, validated_digest: str | None = None
) -> LogRead:
    """The file's validated rows (InputError naming each bad line): read before the
    warehouse is opened, so a refused file writes nothing, not even an empty warehouse. The
    bytes are read once, so a file growing meanwhile is read at one size.

    ``validated_digest`` is the digest (``file_id``) of content an earlier read validated
    (``api.lift.ingest`` validates before it launches the run): bytes with that digest are
    typed without being validated again; other bytes (the file changed since) are validated."""
    path = Path(path).absolute()
    read = read_log_tail(path, partial_tail=partial_tail)
    if validated_digest is not None and read.digest == validated_digest:
        events = validated_log(read.frame)
    else:
        events = validate_log(read.frame, kind=SUFFIXES[path.suffix.lower()])
    return LogRead(events, read.digest, read.pending_line)


def _stored_content(stored: pl.DataFrame) -> pl.DataFrame:
    return stored.with_columns(
        timestamp=pl.col("ts").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    )


def ingest_file(
    conn: duckdb.DuckDBPyConnection, path: Path | str, read: LogRead | None = None
) -> Ingested:
    """Validate the whole file (unless ``read`` is its :func:`read_events`), then store its
    new requests in one transaction. Idempotent per request id: a request already stored
    with the same content (its parsed record, whatever the bytes: Parquet or JSON Lines, CRLF,
    another offset for the same instant) is skipped and counted; one stored unresolved
    (outcome null) and logged here with its outcome, the rest the same, is resolved: this row
    replaces the stored one; one stored resolved and logged here unresolved is skipped; one
    stored with other content (a resolved outcome that changes included) refuses the whole
    file, naming both lines. Nothing of a refused file is kept."""
    path = Path(path).absolute()
    if read is None:
        read = read_events(path)
    events, superseded = resolved_in_file(read.events)
    days = tuple(sorted(set(events.get_column("day").to_list())))
    mixed = mixed_artifacts(events).height
    # Machines sharing a warehouse ingest one file at a time, so a request logged in two files
    # ingested at once is stored once (lift_events has no key that would refuse the second).
    with writers_take_turns(conn, "lift-ingest"), transaction(conn):
        stored = lift_store.stored_requests(conn, events.select(REQUEST_KEY))
        matched = match_stored(events, _stored_content(stored))
        if matched.conflicts.height:
            raise conflict_error(matched.conflicts, path, kind=SUFFIXES[path.suffix.lower()])
        fresh, resolved = matched.fresh, matched.resolved
        file_id = read.file_id
        if resolved.height:
            lift_store.delete_unresolved(conn, resolved)
        written = pl.concat([fresh, resolved]) if resolved.height else fresh
        if written.height:
            lift_store.insert_file(conn, file_id, str(path), written)
            refresh_days(conn, sorted(set(written.get_column("day").to_list())))
    return Ingested(
        file_id,
        str(path),
        read.events.height,
        days,
        written.height > 0,
        mixed,
        stored=fresh.height,
        skipped=matched.skipped,
        pending_line=read.pending_line,
        resolved=resolved.height,
        unresolved_after_resolved=matched.unresolved_after_resolved,
        superseded=superseded,
    )


def day_summary(conn: duckdb.DuckDBPyConnection, day: date) -> dict[str, Any]:
    """What one day's partition holds: rows per arm and epoch, censored share."""
    events = lift_store.events(conn, day=day)
    arms = dict(events.group_by("exposure_arm").len().iter_rows()) if events.height else {}
    censored = int(events.get_column("outcome").is_null().sum()) if events.height else 0
    return {
        "rows": events.height,
        "rows_by_arm": {arm: int(arms.get(arm, 0)) for arm in ARM_ORDER},
        "epochs": sorted(set(events.get_column("exposure_epoch").to_list())),
        "workspaces": sorted(set(events.get_column("workspace_id").to_list())),
        "censored": censored,
        "censored_share": round(censored / events.height, 4) if events.height else None,
    }
