"""Holdout evaluations: each stage's rows, replaced per evaluation, and the queries the
leakage checks run over them."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.errors import NotFoundError
from eval_pipelines.storage.frames import insert_frame, query_frame

SAMPLE_SCHEMA = {
    "eval_id": pl.String,
    "position": pl.Int32,
    "record_key": pl.String,
    "sample_hash": pl.String,
    "requested_size": pl.Int32,
}


def save_sample(
    conn: duckdb.DuckDBPyConnection,
    eval_id: str,
    keys: tuple[str, ...],
    sample_hash: str,
    requested_size: int,
) -> None:
    """Replace the evaluation's sample (keys in draw order). Call inside a transaction."""
    conn.execute("DELETE FROM holdout_samples WHERE eval_id = ?", [eval_id])
    frame = pl.DataFrame(
        {
            "eval_id": eval_id,
            "position": list(range(len(keys))),
            "record_key": list(keys),
            "sample_hash": sample_hash,
            "requested_size": requested_size,
        },
        schema=SAMPLE_SCHEMA,
    )
    insert_frame(
        conn,
        "INSERT INTO holdout_samples (eval_id, position, record_key, sample_hash, "
        "requested_size) SELECT eval_id, position, record_key, sample_hash, requested_size "
        "FROM incoming_frame",
        frame,
    )


def load_sample(conn: duckdb.DuckDBPyConnection, eval_id: str) -> pl.DataFrame:
    """``position, record_key, sample_hash, requested_size`` in draw order."""
    return query_frame(
        conn,
        "SELECT position, record_key, sample_hash, requested_size FROM holdout_samples "
        "WHERE eval_id = ? ORDER BY position",
        [eval_id],
    )


def sample_hash(conn: duckdb.DuckDBPyConnection, eval_id: str) -> str | None:
    """The drawn sample's hash, or None before ``holdout_sample`` has run."""
    row = conn.execute(
        "SELECT sample_hash FROM holdout_samples WHERE eval_id = ? LIMIT 1", [eval_id]
    ).fetchone()
    return row[0] if row else None


def sample_summary(conn: duckdb.DuckDBPyConnection, eval_id: str) -> tuple[str, int]:
    """``(sample hash, records drawn)`` of a stored sample."""
    row = conn.execute(
        "SELECT any_value(sample_hash), count(*) FROM holdout_samples WHERE eval_id = ?",
        [eval_id],
    ).fetchone()
    if row is None or row[1] == 0:
        raise NotFoundError(f"evalId={eval_id!r}: no sample stored; materialise holdout_sample")
    return str(row[0]), int(row[1])


def save_leave_out(
    conn: duckdb.DuckDBPyConnection,
    eval_id: str,
    excluded: pl.DataFrame,
    candidates: pl.DataFrame,
) -> None:
    """Replace the leave-out list (``sample_key, excluded_key, reason``) and the retrieved
    neighbours (``sample_key, rank, evidence_key, similarity, retrieval``). Call inside a
    transaction."""
    conn.execute("DELETE FROM leave_out WHERE eval_id = ?", [eval_id])
    conn.execute("DELETE FROM candidates WHERE eval_id = ?", [eval_id])
    insert_frame(
        conn,
        "INSERT INTO leave_out (eval_id, sample_key, excluded_key, reason) "
        "SELECT eval_id, sample_key, excluded_key, reason FROM incoming_frame",
        excluded.select(pl.lit(eval_id).alias("eval_id"), "sample_key", "excluded_key", "reason"),
    )
    insert_frame(
        conn,
        "INSERT INTO candidates (eval_id, sample_key, rank, evidence_key, similarity, "
        "retrieval) SELECT eval_id, sample_key, rank, evidence_key, similarity, retrieval "
        "FROM incoming_frame",
        candidates.select(
            pl.lit(eval_id).alias("eval_id"),
            "sample_key",
            "rank",
            "evidence_key",
            "similarity",
            "retrieval",
        ),
    )


def save_retrievals(
    conn: duckdb.DuckDBPyConnection, eval_id: str, rows: list[dict[str, Any]]
) -> None:
    """Replace how each retrieval of the evaluation ran (``retrieval``, ``purpose`` and a
    JSON payload: backend, seconds, recall against exact search, fallbacks). Call inside a
    transaction."""
    conn.execute("DELETE FROM eval_retrievals WHERE eval_id = ?", [eval_id])
    for row in rows:
        conn.execute(
            "INSERT INTO eval_retrievals (eval_id, retrieval, purpose, payload) "
            "VALUES (?, ?, ?, ?)",
            [eval_id, row["retrieval"], row["purpose"], json.dumps(row)],
        )


def load_retrievals(conn: duckdb.DuckDBPyConnection, eval_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT payload FROM eval_retrievals WHERE eval_id = ? ORDER BY purpose, retrieval",
        [eval_id],
    ).fetchall()
    return [json.loads(payload) for (payload,) in rows]


def held_out_pairs(conn: duckdb.DuckDBPyConnection, eval_id: str) -> list[tuple[str, str]]:
    """``(sample_key, excluded_key)`` of every leave-out list of the evaluation."""
    rows = conn.execute(
        "SELECT sample_key, excluded_key FROM leave_out WHERE eval_id = ?", [eval_id]
    ).fetchall()
    return [(a, b) for a, b in rows]


def leave_out_counts(conn: duckdb.DuckDBPyConnection, eval_id: str) -> tuple[int, int]:
    """``(leave-out entries, of which group members)``."""
    row = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE reason = 'group') FROM leave_out "
        "WHERE eval_id = ?",
        [eval_id],
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def sampled_records(
    conn: duckdb.DuckDBPyConnection, eval_id: str, case_id: str, records_version: str
) -> list[tuple[str, str, dict[str, Any]]]:
    """``(record_key, text, metadata)`` of the sampled records, in draw order."""
    rows = conn.execute(
        "SELECT s.record_key, r.text, r.metadata FROM holdout_samples s JOIN records r "
        "ON r.case_id = ? AND r.records_version = ? AND r.record_key = s.record_key "
        "WHERE s.eval_id = ? ORDER BY s.position",
        [case_id, records_version, eval_id],
    ).fetchall()
    return [(key, text, json.loads(meta)) for key, text, meta in rows]


def retrieved_evidence(
    conn: duckdb.DuckDBPyConnection,
    eval_id: str,
    case_id: str,
    records_version: str,
    retrieval: str = "tfidf:exact",
) -> pl.DataFrame:
    """``sample_key, rank, evidence_key, similarity, label_node`` (the evidence record's
    label) by sample, then rank, of the evidence one retrieval (``space:backend``) found."""
    return query_frame(
        conn,
        "SELECT c.sample_key, c.rank, c.evidence_key, c.similarity, r.label_node "
        "FROM candidates c "
        "JOIN records r ON r.case_id = ? AND r.records_version = ? "
        "AND r.record_key = c.evidence_key WHERE c.eval_id = ? AND c.retrieval = ? "
        "ORDER BY c.sample_key, c.rank",
        [case_id, records_version, eval_id, retrieval],
    )


PREDICTION_COLUMNS = (
    "variant, record_key, code, confidence, route, candidates, requested_candidates, "
    "effective_candidates, memo_applied, error, tokens, input_tokens, output_tokens"
)


def save_predictions(
    conn: duckdb.DuckDBPyConnection,
    eval_id: str,
    predictions: pl.DataFrame,
    runs: pl.DataFrame,
) -> None:
    """Replace every variant's predictions and run summaries. Call inside a transaction."""
    conn.execute("DELETE FROM predictions WHERE eval_id = ?", [eval_id])
    conn.execute("DELETE FROM variant_runs WHERE eval_id = ?", [eval_id])
    insert_frame(
        conn,
        f"INSERT INTO predictions (eval_id, {PREDICTION_COLUMNS}) "
        f"SELECT eval_id, {PREDICTION_COLUMNS} FROM incoming_frame",
        predictions.select(pl.lit(eval_id).alias("eval_id"), pl.all()),
    )
    insert_frame(
        conn,
        "INSERT INTO variant_runs (eval_id, variant, position, memo_version, usage_json) "
        "SELECT eval_id, variant, position, memo_version, usage_json FROM incoming_frame",
        runs.select(pl.lit(eval_id).alias("eval_id"), pl.all()),
    )


def load_predictions(conn: duckdb.DuckDBPyConnection, eval_id: str) -> pl.DataFrame:
    """Every variant's predictions (:data:`PREDICTION_COLUMNS`); ``input_tokens`` and
    ``output_tokens`` are null in evaluations classified before they were recorded."""
    return query_frame(
        conn,
        f"SELECT {PREDICTION_COLUMNS} FROM predictions WHERE eval_id = ? "
        "ORDER BY variant, record_key",
        [eval_id],
    )


def load_variant_runs(conn: duckdb.DuckDBPyConnection, eval_id: str) -> pl.DataFrame:
    """``variant, position, memo_version, usage_json`` in spec order."""
    return query_frame(
        conn,
        "SELECT variant, position, memo_version, usage_json FROM variant_runs "
        "WHERE eval_id = ? ORDER BY position",
        [eval_id],
    )


def sample_labels(
    conn: duckdb.DuckDBPyConnection, eval_id: str, case_id: str, records_version: str
) -> pl.DataFrame:
    """``record_key, label, label_node`` of the sampled records."""
    return query_frame(
        conn,
        "SELECT r.record_key, r.label, r.label_node FROM holdout_samples s JOIN records r "
        "ON r.case_id = ? AND r.records_version = ? AND r.record_key = s.record_key "
        "WHERE s.eval_id = ?",
        [case_id, records_version, eval_id],
    )


def save_scores(
    conn: duckdb.DuckDBPyConnection,
    eval_id: str,
    variants: pl.DataFrame,
    levels: pl.DataFrame,
) -> None:
    """Replace per-variant scores (``variant, position, score_json, failed_rows,
    leave_out_json``) and the per-level rows. Call inside a transaction."""
    conn.execute("DELETE FROM variant_scores WHERE eval_id = ?", [eval_id])
    conn.execute("DELETE FROM variant_level_scores WHERE eval_id = ?", [eval_id])
    insert_frame(
        conn,
        "INSERT INTO variant_scores (eval_id, variant, position, score_json, failed_rows, "
        "leave_out_json) SELECT eval_id, variant, position, score_json, failed_rows, "
        "leave_out_json FROM incoming_frame",
        variants.select(pl.lit(eval_id).alias("eval_id"), pl.all()),
    )
    insert_frame(
        conn,
        "INSERT INTO variant_level_scores (eval_id, variant, position, depth, level_name, "
        "is_target, n, right_count, accuracy, accuracy_low, accuracy_high, declined, "
        "ceiling_count) SELECT eval_id, variant, position, depth, level_name, is_target, n, "
        "right_count, accuracy, accuracy_low, accuracy_high, declined, ceiling_count "
        "FROM incoming_frame",
        levels.select(pl.lit(eval_id).alias("eval_id"), pl.all()),
    )


def load_scores(conn: duckdb.DuckDBPyConnection, eval_id: str) -> pl.DataFrame:
    return query_frame(
        conn,
        "SELECT variant, position, score_json, failed_rows, leave_out_json FROM variant_scores "
        "WHERE eval_id = ? ORDER BY position",
        [eval_id],
    )


def evidence_inside_leave_out(conn: duckdb.DuckDBPyConnection, eval_id: str) -> int:
    """Retrieved neighbours that are the sampled record itself or on its leave-out list."""
    row = conn.execute(
        "SELECT count(*) FROM candidates c WHERE c.eval_id = ? AND (c.evidence_key = "
        "c.sample_key OR EXISTS (SELECT 1 FROM leave_out l WHERE l.eval_id = c.eval_id "
        "AND l.sample_key = c.sample_key AND l.excluded_key = c.evidence_key))",
        [eval_id],
    ).fetchone()
    return int(row[0]) if row else 0


def evidence_sharing_group_field(
    conn: duckdb.DuckDBPyConnection,
    eval_id: str,
    case_id: str,
    records_version: str,
    field: str,
) -> int:
    """Retrieved neighbours whose ``field`` value equals their sampled record's (recomputed
    from the records, not from the stored leave-out list)."""
    path = "$." + json.dumps(field)
    row = conn.execute(
        "SELECT count(*) FROM candidates c "
        "JOIN records s ON s.case_id = ? AND s.records_version = ? AND s.record_key = c.sample_key "
        "JOIN records e ON e.case_id = ? AND e.records_version = ? "
        "AND e.record_key = c.evidence_key "
        "WHERE c.eval_id = ? AND json_extract_string(s.metadata, ?) IS NOT NULL "
        "AND json_extract_string(s.metadata, ?) = json_extract_string(e.metadata, ?)",
        [case_id, records_version, case_id, records_version, eval_id, path, path, path],
    ).fetchone()
    return int(row[0]) if row else 0


def evidence_at_or_above(
    conn: duckdb.DuckDBPyConnection, eval_id: str, similarity: float, *, space: str = "tfidf"
) -> int:
    """Retrieved neighbours at least this similar to their sampled record, among the evidence
    found in ``space`` (similarities of other spaces are not on the same scale)."""
    row = conn.execute(
        "SELECT count(*) FROM candidates WHERE eval_id = ? AND similarity >= ? "
        "AND split_part(retrieval, ':', 1) = ?",
        [eval_id, similarity, space],
    ).fetchone()
    return int(row[0]) if row else 0


def rows_short_of(
    conn: duckdb.DuckDBPyConnection, eval_id: str, requested: int, retrieval: str = "tfidf:exact"
) -> int:
    """Sampled records with fewer than ``requested`` neighbours retrieved one way."""
    row = conn.execute(
        "SELECT count(*) FROM holdout_samples s WHERE s.eval_id = ? AND (SELECT count(*) "
        "FROM candidates c WHERE c.eval_id = s.eval_id AND c.sample_key = s.record_key "
        "AND c.retrieval = ?) < ?",
        [eval_id, retrieval, requested],
    ).fetchone()
    return int(row[0]) if row else 0


def failed_rows_by_variant(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT variant, count(*) FILTER (WHERE error IS NOT NULL) FROM predictions "
        "WHERE eval_id = ? GROUP BY variant ORDER BY variant",
        [eval_id],
    ).fetchall()
    return {variant: int(count) for variant, count in rows}


def insufficient_target_levels(
    conn: duckdb.DuckDBPyConnection, eval_id: str
) -> list[tuple[str, int, int]]:
    """``(variant, depth, n)`` of target levels scored on too few records for an estimate."""
    rows = conn.execute(
        "SELECT variant, depth, n FROM variant_level_scores WHERE eval_id = ? AND is_target "
        "AND accuracy IS NULL ORDER BY position, depth",
        [eval_id],
    ).fetchall()
    return [(variant, int(depth), int(n)) for variant, depth, n in rows]


def save_leakage_gap(conn: duckdb.DuckDBPyConnection, eval_id: str, payload: dict) -> None:
    """Replace the evaluation's leakage gap. Call inside a transaction."""
    conn.execute("DELETE FROM leakage_gaps WHERE eval_id = ?", [eval_id])
    conn.execute("INSERT INTO leakage_gaps VALUES (?, ?, now())", [eval_id, json.dumps(payload)])


def load_leakage_gap(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict | None:
    row = conn.execute("SELECT payload FROM leakage_gaps WHERE eval_id = ?", [eval_id]).fetchone()
    return json.loads(row[0]) if row else None


TRIALS_SCHEMA = {
    "variant": pl.String,
    "record_key": pl.String,
    "trial": pl.Int32,
    "code": pl.String,
    "confidence": pl.Float64,
    "route": pl.String,
    "error": pl.String,
}


def save_trials(conn: duckdb.DuckDBPyConnection, eval_id: str, frame: pl.DataFrame) -> None:
    """Replace the evaluation's trials with ``frame`` (:data:`TRIALS_SCHEMA`: every trial of
    every variant that asks each record several times; an empty frame just clears them).
    Call inside a transaction."""
    conn.execute("DELETE FROM variant_trials WHERE eval_id = ?", [eval_id])
    if frame.height:
        insert_frame(
            conn,
            "INSERT INTO variant_trials (eval_id, variant, record_key, trial, code, confidence, "
            "route, error) SELECT eval_id, variant, record_key, trial, code, confidence, route, "
            "error FROM incoming_frame",
            frame.select(list(TRIALS_SCHEMA))
            .cast(TRIALS_SCHEMA)  # type: ignore[arg-type]
            .select(pl.lit(eval_id).alias("eval_id"), pl.all()),
        )


def load_trials(conn: duckdb.DuckDBPyConnection, eval_id: str) -> pl.DataFrame:
    """The evaluation's trials (:data:`TRIALS_SCHEMA`), by variant, record and trial."""
    return query_frame(
        conn,
        "SELECT variant, record_key, trial, code, confidence, route, error FROM variant_trials "
        "WHERE eval_id = ? ORDER BY variant, record_key, trial",
        [eval_id],
    )
