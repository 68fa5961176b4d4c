"""Exposure/outcome logs as the serving system writes them: read, validate (pandera), and
report every bad row with its line, so a file is taken whole or not at all.

One row per claim outcome, JSON Lines (``.jsonl``/``.ndjson``) or Parquet:

====================  ========  ====================================================
column                required  what
====================  ========  ====================================================
``timestamp``         yes       ISO 8601 (UTC when no offset); its day is the partition
``request_id``        yes       unique within the file
``workspace_id``      yes
``cluster``           yes       ``Assignment.cluster`` (artifact key, trace id, request
                                id, or the one-way ``conv-`` token; never a digest)
``exposure_arm``      yes       treated | pre_lever | imported | holdout | lever_holdout
``exposure_epoch``    yes       stamped at dispatch; lift is never pooled across epochs
``claim_type``        yes
``situation_class``   yes
``source``            yes       declared | inferred | imported
``outcome``           yes       true / false, or null while unresolved (censored)
``artifact_key``      no        an artifact's requests must agree on their arm
``candidate``         no        the lever a treated request was served
``baseline_head``     no        the bound baseline (a change invalidates a confirmation)
``app_config``        no        the application config hash (likewise)
====================  ========  ====================================================
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import check_table_file
from eval_pipelines.core.lift.arms import ExposureArm

ARMS = tuple(arm.value for arm in ExposureArm)
SOURCES = ("declared", "inferred", "imported")
REQUIRED = (
    "timestamp",
    "request_id",
    "workspace_id",
    "cluster",
    "exposure_arm",
    "exposure_epoch",
    "claim_type",
    "situation_class",
    "source",
    "outcome",
)
OPTIONAL = ("artifact_key", "candidate", "baseline_head", "app_config")
SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
ERRORS_SHOWN = 10
# The first day the daily partitions cover: an older row has no partition to land in.
FIRST_DAY = date(2020, 1, 1)
_RULES = {"not_nullable": "must be present", "field_uniqueness": "must be unique in the file"}
_TEXT = tuple(c for c in REQUIRED if c not in ("timestamp", "outcome"))


def read_log(path: Path | str) -> pl.DataFrame:
    """The file's rows, every value as read (validated by :func:`validate_log`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("--file", str(path), "file does not exist")
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(
            "--file", str(path), f"unsupported log type; use one of {sorted(SUFFIXES)}"
        )
    if path.stat().st_size == 0:
        raise InputError("--file", str(path), "the log is empty")
    check_table_file(path, "--file")
    try:
        if kind == "parquet":
            return pl.read_parquet(path)
        return pl.read_ndjson(path, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError("--file", str(path), f"could not be read as {kind}: {first}") from None


def _schema() -> Any:
    # pandera takes 0.6 s to import: only ingest needs it.
    import pandera.polars as pa

    def not_blank(data: Any) -> pl.LazyFrame:
        return data.lazyframe.select(pl.col(data.key).str.strip_chars().str.len_chars() > 0)

    text = [pa.Check(not_blank, name="not_blank", error="must not be empty")]
    columns = {name: pa.Column(str, nullable=False, checks=text) for name in _TEXT}
    columns["exposure_arm"] = pa.Column(
        str, nullable=False, checks=[pa.Check.isin(ARMS, error=f"must be one of {', '.join(ARMS)}")]
    )
    columns["source"] = pa.Column(
        str,
        nullable=False,
        checks=[pa.Check.isin(SOURCES, error=f"must be one of {', '.join(SOURCES)}")],
    )
    columns["request_id"] = pa.Column(str, nullable=False, unique=True, checks=text)
    columns["timestamp"] = pa.Column(pl.Datetime("us", "UTC"), nullable=False)
    columns["outcome"] = pa.Column(bool, nullable=True)
    for name in OPTIONAL:
        columns[name] = pa.Column(str, nullable=True, required=False)
    return pa.DataFrameSchema(columns, strict=False)


def _line_label(kind: str) -> str:
    return "line" if kind == "jsonl" else "row"


def _coerce(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[int, str, Any, str]]]:
    """Typed columns, and the rows whose values could not be typed (row, column, value, rule)."""
    problems: list[tuple[int, str, Any, str]] = []
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(
            "log.columns",
            missing[0],
            f"required column is missing (required: {', '.join(REQUIRED)})",
        )
    casts = []
    for name in (*_TEXT, *(c for c in OPTIONAL if c in frame.columns)):
        dtype = frame.schema[name]
        if dtype == pl.Null:
            casts.append(pl.col(name).cast(pl.String))
        elif dtype != pl.String:
            bad = frame.with_row_index("__row").filter(pl.col(name).is_not_null())
            if bad.height:
                row = bad.row(0, named=True)
                problems.append((row["__row"], name, row[name], "must be a string"))
            casts.append(pl.col(name).cast(pl.String))
    outcome = frame.schema["outcome"]
    typed_outcome = pl.col("outcome").cast(pl.Boolean)
    if outcome not in (pl.Boolean, pl.Null):
        # Mixed JSON values arrive as text: "true"/"false" are the booleans, the rest is bad.
        text = pl.col("outcome").cast(pl.String).str.to_lowercase()
        bad = frame.with_row_index("__row").filter(
            pl.col("outcome").is_not_null() & ~text.is_in(["true", "false"])
        )
        for item in bad.head(ERRORS_SHOWN).iter_rows(named=True):
            problems.append(
                (item["__row"], "outcome", item["outcome"], "must be true, false or null")
            )
        typed_outcome = pl.when(text == "true").then(True).when(text == "false").then(False)
    casts.append(typed_outcome.alias("outcome"))
    stamp = frame.schema["timestamp"]
    if isinstance(stamp, pl.Datetime):
        parsed = pl.col("timestamp").dt.replace_time_zone(None).dt.replace_time_zone("UTC")
        if stamp.time_zone is not None:
            parsed = pl.col("timestamp").dt.convert_time_zone("UTC")
    else:
        parsed = (
            pl.col("timestamp")
            .cast(pl.String)
            .str.to_datetime(time_zone="UTC", strict=False, time_unit="us")
        )
    typed = frame.with_columns(*casts, parsed.dt.cast_time_unit("us").alias("timestamp"))
    unparsed = frame.with_row_index("__row").filter(
        typed.get_column("timestamp").is_null() & frame.get_column("timestamp").is_not_null()
    )
    for row in unparsed.head(ERRORS_SHOWN).iter_rows(named=True):
        problems.append((row["__row"], "timestamp", row["timestamp"], "must be ISO 8601"))
    early = frame.with_row_index("__row").filter(
        typed.get_column("timestamp").dt.date() < FIRST_DAY
    )
    for row in early.head(ERRORS_SHOWN).iter_rows(named=True):
        rule = f"must be on or after {FIRST_DAY.isoformat()}, the first day lift partitions cover"
        problems.append((row["__row"], "timestamp", row["timestamp"], rule))
    return typed, problems


def validate_log(frame: pl.DataFrame, *, kind: str = "jsonl") -> pl.DataFrame:
    """Validated, typed rows (``timestamp`` as UTC, ``day`` its date, ``line`` its 1-based line
    or row), or :class:`InputError` listing the bad rows with their line, column, value and
    rule (up to 10, and how many more): nothing of a bad file is kept."""
    from pandera.errors import SchemaErrors

    if frame.height == 0:
        raise InputError("log", "no rows", "a log needs at least one row")
    typed, problems = _coerce(frame)
    try:
        _schema().validate(typed, lazy=True)
    except SchemaErrors as errors:
        failures = errors.failure_cases
        for case in failures.iter_rows(named=True):
            index = case.get("index")
            problems.append(
                (
                    int(index) if index is not None else -1,
                    str(case.get("column")),
                    case.get("failure_case"),
                    str(case.get("check")),
                )
            )
    if problems:
        seen: set[tuple[int, str]] = set()
        problems = [
            (row, column, value, _RULES.get(rule, rule))
            for row, column, value, rule in sorted(problems, key=lambda p: p[0])
            if (row, column) not in seen and not seen.add((row, column))  # type: ignore[func-returns-value]
        ]
        label = _line_label(kind)
        shown = "; ".join(
            f"{label} {row + 1}: {column}={value!r}: {rule}"
            for row, column, value, rule in problems[:ERRORS_SHOWN]
        )
        more = len(problems) - ERRORS_SHOWN
        raise InputError(
            "log",
            f"{len(problems)} bad values",
            shown + (f"; and {more} more" if more > 0 else "") + " (nothing was ingested)",
        )
    extra = [pl.lit(None, pl.String).alias(c) for c in OPTIONAL if c not in typed.columns]
    return (
        typed.with_columns(*extra)
        .with_row_index("line", offset=1)
        .with_columns(day=pl.col("timestamp").dt.date())
    )


def mixed_artifacts(events: pl.DataFrame) -> pl.DataFrame:
    """Artifacts whose requests disagree on their arm (ineligible to anchor a contrast):
    ``artifact_key`` and the arms seen."""
    keyed = events.filter(pl.col("artifact_key").is_not_null())
    arms = keyed.group_by("artifact_key").agg(pl.col("exposure_arm").unique().sort().alias("arms"))
    return arms.filter(pl.col("arms").list.len() > 1).sort("artifact_key")
