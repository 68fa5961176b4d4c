"""The cache of chat calls (table ``chat_calls``): answers looked up by request key, stored as
they arrive. Parameterised SQL only; no API key ever reaches this table."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import duckdb


@dataclasses.dataclass(frozen=True)
class CachedCall:
    """One answered call as the endpoint returned it."""

    key: str
    endpoint: str
    model: str
    trial: int
    response_text: str | None
    input_tokens: int
    output_tokens: int


def cached_calls(conn: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> dict[str, CachedCall]:
    """The cached answers among ``keys``, by key."""
    if not keys:
        return {}
    rows = conn.execute(
        "SELECT key, endpoint, model, trial, response_text, input_tokens, output_tokens "
        "FROM chat_calls WHERE key IN (SELECT UNNEST(?::VARCHAR[]))",
        [list(keys)],
    ).fetchall()
    return {row[0]: CachedCall(*row) for row in rows}


def store_calls(conn: duckdb.DuckDBPyConnection, calls: Iterable[CachedCall]) -> int:
    """Store answered calls (a key already there is kept as it was); returns how many rows
    were given."""
    rows = [
        [
            call.key,
            call.endpoint,
            call.model,
            call.trial,
            call.response_text,
            call.input_tokens,
            call.output_tokens,
            datetime.now(UTC).replace(tzinfo=None),
        ]
        for call in calls
    ]
    if rows:
        conn.executemany(
            "INSERT INTO chat_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
            rows,
        )
    return len(rows)


def count_calls(conn: duckdb.DuckDBPyConnection) -> int:
    """How many calls the cache holds."""
    row = conn.execute("SELECT count(*) FROM chat_calls").fetchone()
    return int(row[0]) if row else 0
