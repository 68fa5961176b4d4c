"""Exposure/outcome logs as the serving system writes them: read, validate (pandera), and
report every bad row with its line, so a file is taken whole or not at all.

One row per claim outcome, JSON Lines (``.jsonl``/``.ndjson``) or Parquet:

======================  ========  ====================================================
column                  required  what
======================  ========  ====================================================
``timestamp``           yes       ISO 8601 (UTC when no offset); its day is the partition
``request_id``          yes       unique within its workspace in the file, but for a
                                  request's unresolved line(s) and the one line with its
                                  outcome (another workspace may use the same ids)
``workspace_id``        yes
``cluster``             yes       ``Assignment.cluster`` (artifact key, trace id, request
                                  id, or the one-way ``conv-`` token; never a digest)
``exposure_arm``        yes       treated | pre_lever | imported | holdout | lever_holdout
``exposure_epoch``      yes       stamped at dispatch; lift is never pooled across epochs
``claim_type``          yes
``situation_class``     yes
``source``              yes       declared | inferred | imported
``outcome``             yes       true / false, or null while unresolved (censored)
``artifact_key``        no        an artifact's requests must agree on their arm
``candidate``           no        the lever a treated request was served
``baseline_head``       no        the bound baseline (a change invalidates a confirmation)
``app_config``          no        the application config hash (likewise)
``key_source``          no        ``Assignment.key_source`` (artifact | trace | conversation
                                  | request), for the cluster-size check
``turn``                no        the request's 1-based turn within its conversation (the
                                  client counts the user messages of the history it sends),
                                  for the cluster-size check; a whole number >= 1
``child_span``          no        true when the request is not its trace's first (a child
                                  span), false when it is; for the cluster-size check
``input_tokens``        no        tokens in, a whole number >= 0; with ``output_tokens``
                                  (both or neither), priced by the workspace's price table
``output_tokens``       no        tokens out, likewise
``cost``                no        what the invocation cost, a finite number >= 0 (used as
                                  is, not priced)
``currency``            no        the cost's currency, 3 upper-case letters; required with
                                  ``cost``
``model``               no        the execution envelope a cost claim compares (text, not
                                  blank): the model (the price table's key)
``provider``            no        the provider served it
``tools``               no        a digest of the tool definitions, ``none`` without tools
``response_format``     no        the response format
``generation_params``   no        a digest or canonical text of the generation parameters
``streaming``           no        true or false
``provider_policy``     no        the provider policy (routing, data retention)
======================  ========  ====================================================

The cost and envelope columns' rules live in :mod:`eval_pipelines.core.lift.cost_columns`.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import check_json_object_lines, check_table_file
from eval_pipelines.core.lift.arms import ExposureArm
from eval_pipelines.core.lift.cost_columns import (
    COST_COLUMNS,
    TEXT_COLUMNS,
    cost_row_problems,
    schema_columns,
    typed_boolean,
    typed_cost_columns,
    typed_whole_number,
)

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
OPTIONAL = ("artifact_key", "candidate", "baseline_head", "app_config", "key_source")
#: Optional columns that are not text: what marks a request as a later one of its conversation
#: or trace (the cluster-size check of :mod:`eval_pipelines.core.lift.cluster_size_check`).
MARKS = {"turn": pl.Int64, "child_span": pl.Boolean}
TURN_RULE = "must be a whole number >= 1 (the request's turn within its conversation)"
CHILD_SPAN_RULE = "must be true, false or null"
KEY_SOURCES = ("artifact", "trace", "conversation", "request")
SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
ERRORS_SHOWN = 10
# Live-lift logs predate no deployment of this project: an older timestamp is a clock error
# (an unset clock reads 1970-01-01) and would land the row in a day no report reads.
FIRST_DAY = date(2020, 1, 1)
_RULES = {"not_nullable": "must be present", "field_uniqueness": "must be unique in the file"}
_TEXT = tuple(c for c in REQUIRED if c not in ("timestamp", "outcome"))
# The file line of each JSON Lines row (blank lines are skipped but still counted).
LINE_COLUMN = "__file_line__"


def _unterminated(data: bytes, lines: list[bytes], numbers: list[int]) -> bool:
    """Whether the last line is still being written: no newline after it, and not JSON. (No
    proper prefix of a JSON object is one, so a complete last line without a newline still
    counts.)"""
    if not numbers or data.endswith(b"\n"):
        return False
    try:
        json.loads(lines[numbers[-1] - 1])
    except ValueError:
        return True
    except RecursionError:  # complete, and too deep: refused with the rest of the file
        return False
    return False


def _jsonl(
    path: Path, data: bytes, *, partial_tail: bool = False
) -> tuple[pl.DataFrame, int | None]:
    """The rows of a JSON Lines file, each with its 1-based line in the file: a blank line is
    skipped (it still counts), a line that is not a JSON object is refused by its number.
    With ``partial_tail``, an unterminated last line that is not JSON yet (a file still being
    written) is left out, and its number returned."""
    lines = data.split(b"\n")
    numbers = [n for n, line in enumerate(lines, start=1) if line.strip()]
    pending = None
    if partial_tail and _unterminated(data, lines, numbers):
        pending = numbers.pop()
    if not numbers:
        raise InputError("path", str(path), "the log has no rows (only blank lines)")
    body = b"\n".join(lines[n - 1] for n in numbers)
    try:
        frame = pl.read_ndjson(io.BytesIO(body), infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        check_json_object_lines(((n, lines[n - 1]) for n in numbers), "path", str(path))
        raise error
    if frame.height != len(numbers):
        raise InputError(
            "path",
            str(path),
            f"{len(numbers)} non-blank lines were read as {frame.height} rows; one JSON object "
            "per line",
        )
    return frame.with_columns(pl.Series(LINE_COLUMN, numbers, dtype=pl.Int64)), pending


def _timestamp(text: str | None) -> datetime | None:
    """An ISO 8601 timestamp as naive UTC (UTC when it has no offset), None when it is not one.
    Each value is read on its own: a file may mix values with and without an offset."""
    if text is None:
        return None
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return stamp.astimezone(UTC).replace(tzinfo=None) if stamp.tzinfo is not None else stamp


def read_log(path: Path | str) -> pl.DataFrame:
    """The file's rows, every value as read (validated by :func:`validate_log`)."""
    return read_log_tail(path).frame


@dataclass(frozen=True)
class LogFile:
    """What one read of a log file saw: its rows, the SHA-256 (16 hex digits) of the bytes
    read, and the line left for a later read (None when none was)."""

    frame: pl.DataFrame
    digest: str
    pending_line: int | None = None


def read_log_tail(path: Path | str, *, partial_tail: bool = False) -> LogFile:
    """:func:`read_log`; with ``partial_tail`` (a file that may still be growing), a JSON
    Lines file's unterminated, not yet valid, last line is left for a later read: the rows
    before it, and its line number (None when there is none)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("path", str(path), "file does not exist")
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError("path", str(path), f"unsupported log type; use one of {sorted(SUFFIXES)}")
    if path.stat().st_size == 0:
        raise InputError("path", str(path), "the log is empty")
    check_table_file(path, "path")
    try:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:16]
        if kind == "parquet":
            return LogFile(pl.read_parquet(io.BytesIO(data)), digest)
        frame, pending = _jsonl(path, data, partial_tail=partial_tail)
        return LogFile(frame, digest, pending)
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError("path", str(path), f"could not be read as {kind}: {first}") from None


def _schema() -> Any:
    # pandera is slow to import (docs/benchmarks.md): only ingest needs it.
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
    columns["request_id"] = pa.Column(str, nullable=False, checks=text)  # see _repeated
    columns["timestamp"] = pa.Column(pl.Datetime("us", "UTC"), nullable=False)
    columns["outcome"] = pa.Column(bool, nullable=True)
    for name in OPTIONAL:
        columns[name] = pa.Column(str, nullable=True, required=False)
    columns["key_source"] = pa.Column(
        str,
        nullable=True,
        required=False,
        checks=[pa.Check.isin(KEY_SOURCES, error=f"must be one of {', '.join(KEY_SOURCES)}")],
    )
    # Their values are checked as they are typed (_typed_mark), so a refusal shows them as
    # logged.
    columns["turn"] = pa.Column(pl.Int64, nullable=True, required=False)
    columns["child_span"] = pa.Column(bool, nullable=True, required=False)
    columns.update(schema_columns(pa, text))
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
    optional_text = (c for c in (*OPTIONAL, *TEXT_COLUMNS) if c in frame.columns)
    for name in (*_TEXT, *optional_text):
        dtype = frame.schema[name]
        if dtype == pl.Null:
            casts.append(pl.col(name).cast(pl.String))
        elif dtype != pl.String:
            bad = frame.with_row_index("__row").filter(pl.col(name).is_not_null())
            for row in bad.iter_rows(named=True):
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
        for item in bad.iter_rows(named=True):
            problems.append(
                (item["__row"], "outcome", item["outcome"], "must be true, false or null")
            )
        typed_outcome = pl.when(text == "true").then(True).when(text == "false").then(False)
    casts.append(typed_outcome.alias("outcome"))
    for name in (c for c in MARKS if c in frame.columns):
        typed_mark, bad_rows = _typed_mark(frame, name)
        casts.append(typed_mark.alias(name))
        problems.extend(bad_rows)
    cost_casts, cost_problems = typed_cost_columns(frame)
    casts.extend(cost_casts)
    problems.extend(cost_problems)
    stamp = frame.schema["timestamp"]
    if isinstance(stamp, pl.Datetime):
        parsed = pl.col("timestamp").dt.replace_time_zone(None).dt.replace_time_zone("UTC")
        if stamp.time_zone is not None:
            parsed = pl.col("timestamp").dt.convert_time_zone("UTC")
    else:
        texts = frame.get_column("timestamp").cast(pl.String).to_list()
        stamps = pl.Series("timestamp", [_timestamp(t) for t in texts], dtype=pl.Datetime("us"))
        parsed = pl.lit(stamps).dt.replace_time_zone("UTC")
    typed = frame.with_columns(*casts, parsed.dt.cast_time_unit("us").alias("timestamp"))
    unparsed = frame.with_row_index("__row").filter(
        typed.get_column("timestamp").is_null() & frame.get_column("timestamp").is_not_null()
    )
    for row in unparsed.iter_rows(named=True):
        problems.append((row["__row"], "timestamp", row["timestamp"], "must be ISO 8601"))
    early = frame.with_row_index("__row").filter(
        typed.get_column("timestamp").dt.date() < FIRST_DAY
    )
    for row in early.iter_rows(named=True):
        rule = f"must be on or after {FIRST_DAY.isoformat()} (an earlier one is a clock error)"
        problems.append((row["__row"], "timestamp", row["timestamp"], rule))
    return typed, problems


def _typed_mark(frame: pl.DataFrame, name: str) -> tuple[pl.Expr, list[tuple[int, str, Any, str]]]:
    """A ``turn`` or ``child_span`` column typed (:data:`MARKS`), and its values that are not
    one (row, column, value, rule). Mixed JSON values arrive as text: a turn's digits and
    ``true``/``false`` are read as such; a fractional turn is refused, not rounded."""
    if name == "turn":
        return typed_whole_number(frame, name, minimum=1, rule=TURN_RULE)
    return typed_boolean(frame, name, rule=CHILD_SPAN_RULE)


UNIQUE_RULE = (
    "must be unique in the file within its workspace (a request repeats only as its unresolved "
    "line(s) and one line with its outcome, the rest of the record the same)"
)


def _repeated(typed: pl.DataFrame) -> list[tuple[int, str, Any, str]]:
    """The rows of request ids the file repeats other than as the update a log writes when
    an outcome arrives: lines without an outcome and exactly one with it, the rest of the
    record (:data:`CONTENT`) the same."""
    repeated = typed.with_row_index("__row").filter(
        pl.col("request_id").is_not_null() & pl.struct(REQUEST_KEY).is_duplicated()
    )
    if not repeated.height:
        return []
    others = [c for c in CONTENT if c != "outcome" and c in typed.columns]
    groups = repeated.group_by(REQUEST_KEY).agg(
        pl.col("__row"),
        same=pl.all_horizontal(*(pl.col(c).n_unique() == 1 for c in others)),
        outcomes=pl.col("outcome").is_not_null().sum(),
    )
    bad = groups.filter(~(pl.col("same") & (pl.col("outcomes") == 1)))
    return [
        (row, "request_id", request_id, UNIQUE_RULE)
        for request_id, rows in bad.select("request_id", "__row").iter_rows()
        for row in rows
    ]


def resolved_in_file(events: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """A validated file's rows without the unresolved lines of the requests whose outcome
    another line of the file gives (:func:`validate_log` allows no other repeat), and how
    many were left out."""
    kept = events.filter(~(pl.struct(REQUEST_KEY).is_duplicated() & pl.col("outcome").is_null()))
    return kept, events.height - kept.height


def validate_log(frame: pl.DataFrame, *, kind: str = "jsonl") -> pl.DataFrame:
    """Validated, typed rows (``timestamp`` as UTC, ``day`` its date, ``line`` its 1-based line
    or row), or :class:`InputError` listing the bad rows with their line, column, value and
    rule (up to 10, and how many more): nothing of a bad file is kept."""
    from pandera.errors import SchemaErrors

    if frame.height == 0:
        raise InputError("log", "no rows", "a log needs at least one row")
    typed, problems = _coerce(frame)
    problems.extend(_repeated(typed))
    problems.extend(cost_row_problems(typed))
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
        lines = (
            frame.get_column(LINE_COLUMN).to_list()
            if LINE_COLUMN in frame.columns
            else range(1, frame.height + 1)
        )
        shown = "; ".join(
            f"{label} {lines[row] if row >= 0 else '?'}: {column}={value!r}: {rule}"
            for row, column, value, rule in problems[:ERRORS_SHOWN]
        )
        more = len(problems) - ERRORS_SHOWN
        raise InputError(
            "log",
            f"{len(problems)} bad values",
            shown + (f"; and {more} more" if more > 0 else "") + " (nothing was ingested)",
        )
    return _completed(typed)


def validated_log(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of a file :func:`validate_log` accepted (the same bytes: the caller compared
    their digest), typed as it types them, without checking them again."""
    return _completed(_coerce(frame)[0])


def _completed(typed: pl.DataFrame) -> pl.DataFrame:
    """Typed rows with every optional column, ``line`` and ``day``."""
    extra = [pl.lit(None, pl.String).alias(c) for c in OPTIONAL if c not in typed.columns]
    extra += [pl.lit(None, dtype).alias(c) for c, dtype in MARKS.items() if c not in typed.columns]
    extra += [
        pl.lit(None, dtype).alias(c) for c, dtype in COST_COLUMNS.items() if c not in typed.columns
    ]
    typed = typed.with_columns(*extra)
    if LINE_COLUMN in typed.columns:
        typed = typed.rename({LINE_COLUMN: "line"})
    else:
        typed = typed.with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))
    return typed.with_columns(day=pl.col("timestamp").dt.date())


#: A request: its id is its workspace's own (two workspaces may number requests alike).
REQUEST_KEY = ("workspace_id", "request_id")
#: What "the same request" means: its parsed, normalised record (timestamp in UTC, outcome
#: typed, absent optional columns null), not the bytes of its line. Its cost and envelope are
#: part of it: a request logged again with another cost is a conflict like any other column.
CONTENT = (
    *(name for name in REQUIRED if name != "request_id"),
    *OPTIONAL,
    *MARKS,
    *COST_COLUMNS,
)


@dataclass(frozen=True)
class Matched:
    """A validated file against the rows already stored for its request ids."""

    fresh: pl.DataFrame
    skipped: int
    conflicts: pl.DataFrame
    # Rows that resolve a request stored unresolved: they replace its stored rows.
    resolved: pl.DataFrame = field(default_factory=pl.DataFrame)
    # Of ``skipped``: unresolved rows of requests stored resolved (never an overwrite).
    unresolved_after_resolved: int = 0


def match_stored(events: pl.DataFrame, stored: pl.DataFrame) -> Matched:
    """Split a file's rows (:func:`validate_log`) by request (:data:`REQUEST_KEY`, its
    workspace and id): ``fresh`` ones never stored;
    ``resolved``, rows with an outcome of requests stored without one (unresolved, censored)
    and otherwise the same content (:data:`CONTENT`): the update a log writes when the
    outcome arrives; ``skipped``, how many are stored with the same content, or stored
    resolved and arrive unresolved (``unresolved_after_resolved`` of them); ``conflicts``,
    one row per request stored with other content (a resolved outcome that changes
    included): ``workspace_id``, ``request_id``, ``line``, ``stored_line``, ``stored_path``,
    the first differing ``column`` and both values (as text).

    ``stored`` has ``request_id``, ``stored_line``, ``stored_path`` and the :data:`CONTENT`
    columns typed as :func:`validate_log` types them (every stored row of those requests)."""
    compared = [c for c in CONTENT if c not in REQUEST_KEY]
    joined = events.select("request_id", "line", *CONTENT).join(
        stored.select("request_id", "stored_line", "stored_path", *CONTENT),
        on=list(REQUEST_KEY),
        how="inner",
        suffix="__stored",
    )
    differs = {c: ~pl.col(c).eq_missing(pl.col(f"{c}__stored")) for c in compared}
    # Only the outcome differs, and one side has none: the stored row unresolved (this row
    # resolves it) or this row unresolved (its outcome is already stored).
    others_same = ~pl.any_horizontal(*(d for c, d in differs.items() if c != "outcome"))
    resolves = others_same & pl.col("outcome__stored").is_null() & pl.col("outcome").is_not_null()
    late = others_same & pl.col("outcome").is_null() & pl.col("outcome__stored").is_not_null()

    def first_difference(of: str) -> pl.Expr:
        """The first differing column: its name (``"name"``), its value here (``""``) or
        stored (``"__stored"``)."""
        return pl.coalesce(
            *(
                pl.when(d).then(
                    pl.lit(c) if of == "name" else pl.col(c + of).cast(pl.String).fill_null("null")
                )
                for c, d in differs.items()
            )
        )

    first = first_difference("name")
    value, stored_value = first_difference(""), first_difference("__stored")
    paired = joined.with_columns(
        column=first, value=value, stored_value=stored_value, resolves=resolves, late=late
    )
    flagged = paired.filter(pl.col("column").is_not_null() & ~pl.col("resolves") & ~pl.col("late"))
    conflicts = (
        flagged.sort("line", "stored_line")
        .unique(REQUEST_KEY, keep="first", maintain_order=True)
        .select(
            *REQUEST_KEY, "line", "stored_line", "stored_path", "column", "value", "stored_value"
        )
    )
    settled = paired.join(conflicts.select(REQUEST_KEY), on=list(REQUEST_KEY), how="anti")
    by_request = settled.group_by(REQUEST_KEY).agg(
        resolves=pl.col("resolves").any(), late=pl.col("late").any()
    )
    resolving = by_request.filter("resolves").select(REQUEST_KEY)
    skipped = by_request.filter(~pl.col("resolves"))
    matched = joined.select(REQUEST_KEY).unique()
    fresh = events.join(matched, on=list(REQUEST_KEY), how="anti", maintain_order="left")
    return Matched(
        fresh=fresh,
        skipped=skipped.height,
        conflicts=conflicts,
        resolved=events.join(resolving, on=list(REQUEST_KEY), how="semi", maintain_order="left"),
        unresolved_after_resolved=skipped.filter("late").height,
    )


def conflict_error(conflicts: pl.DataFrame, path: Path | str, *, kind: str = "jsonl") -> InputError:
    """The refusal of a file whose requests are already stored with other content, naming
    both lines of each (up to 10, and how many more)."""
    label = _line_label(kind)
    shown = []
    for item in conflicts.head(ERRORS_SHOWN).iter_rows(named=True):
        stored_label = _line_label(
            SUFFIXES.get(Path(item["stored_path"] or "").suffix.lower(), "jsonl")
        )
        shown.append(
            f"request_id={item['request_id']!r}: {label} {item['line']} of {path} has "
            f"{item['column']}={item['value']}, {stored_label} {item['stored_line']} of "
            f"{item['stored_path']} (stored) has {item['column']}={item['stored_value']}"
        )
    more = conflicts.height - ERRORS_SHOWN
    return InputError(
        "log",
        f"{conflicts.height} request{'' if conflicts.height == 1 else 's'} already stored with "
        "other content",
        "; ".join(shown)
        + (f"; and {more} more" if more > 0 else "")
        + "; a request is stored once, and its content never changes (nothing was ingested)",
    )


MIXED_SCOPE = ("workspace_id", "exposure_epoch", "artifact_key")


def mixed_artifacts(events: pl.DataFrame) -> pl.DataFrame:
    """Artifacts whose requests disagree on their arm within one workspace and epoch
    (ineligible to anchor a contrast there): ``workspace_id``, ``exposure_epoch``,
    ``artifact_key`` and the arms seen. An artifact key is a workspace's own, and a new epoch
    is a new split (membership may move): the same key consistent in each of two workspaces,
    or in each of two epochs, is not mixed."""
    keyed = events.filter(pl.col("artifact_key").is_not_null())
    arms = keyed.group_by(*MIXED_SCOPE).agg(pl.col("exposure_arm").unique().sort().alias("arms"))
    return arms.filter(pl.col("arms").list.len() > 1).sort(*MIXED_SCOPE)
