"""One evaluation run's figures: field accuracy, document pass rate and per-field breakdown."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.golden.case import STATUSES, CaseScore
from eval_pipelines.core.golden.shares import json_share
from eval_pipelines.core.results import JsonResult
from eval_pipelines.core.stats import Interval, estimate_proportion
from eval_pipelines.core.workflows.schema import Schema


def _share_from_json(value: Any, k: int, n: int) -> float | None:
    """The exact share back from :func:`json_share`'s value and the counts beside it."""
    return None if value is None else k / n


@dataclass(frozen=True)
class FieldScore(JsonResult):
    """One row of the per-field breakdown.

    Attributes
    ----------
    key
        A header field id, ``table.column`` for a table's cells, the table id for its invented
        rows, or a stale label's path.
    scored, correct
        Items counted in this row over all scored cases.
    accuracy
        ``correct / scored``; None when nothing was scored (a gap, never 0).
    stale
        True for a row that exists only because labels name something no longer in the schema.
    stale_labels
        Cases in which a label at this key was stale.
    """

    key: str
    scored: int
    correct: int
    accuracy: float | None
    stale: bool = False
    stale_labels: int = 0

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["accuracy"] = json_share(self.accuracy, self.scored)
        return document

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FieldScore:
        return cls(
            key=data["key"],
            scored=data["scored"],
            correct=data["correct"],
            accuracy=_share_from_json(data["accuracy"], data["correct"], data["scored"]),
            stale=bool(data.get("stale", False)),
            stale_labels=int(data.get("staleLabels", 0)),
        )


@dataclass(frozen=True)
class RunScore(JsonResult):
    """An evaluation run's figures, each with its n.

    The shares are kept here as exact ratios of their counts (the gate compares them with its
    threshold at any n); :meth:`to_json` and every report write a share of fewer than 20
    observations as ``insufficient_evidence`` beside its counts (:func:`json_share`,
    :func:`counted_share`).

    Attributes
    ----------
    field_correct, field_scored, field_accuracy
        Micro average over every scored item of every passed or failed case;
        ``field_accuracy`` is None when nothing was scored.
    passed, failed, errored, skipped, disabled
        Cases per status.
    pass_rate
        ``passed / (passed + failed)``: errored and skipped cases leave the denominator.
        None when no case was scored.
    pass_rate_interval
        Wilson 95% interval of the pass rate, None below the minimum sample
        (:mod:`eval_pipelines.core.stats.policy`). Field accuracy has none: items of one
        document are not independent, so a binomial interval over items would be too narrow.
    stale_fields, stale_labels
        Distinct stale label paths, and stale labels summed over cases.
    fields
        The per-field breakdown: schema order, then stale rows.
    """

    field_correct: int
    field_scored: int
    field_accuracy: float | None
    passed: int
    failed: int
    errored: int
    skipped: int
    disabled: int
    pass_rate: float | None
    pass_rate_interval: Interval | None
    stale_fields: int
    stale_labels: int
    fields: tuple[FieldScore, ...]

    @property
    def pass_rate_n(self) -> int:
        return self.passed + self.failed

    def field(self, key: str) -> FieldScore | None:
        return next((f for f in self.fields if f.key == key), None)

    def to_json(self) -> dict[str, Any]:
        interval = self.pass_rate_interval
        return {
            "fieldAccuracy": {
                "correct": self.field_correct,
                "n": self.field_scored,
                "value": json_share(self.field_accuracy, self.field_scored),
            },
            "passRate": {
                "passed": self.passed,
                "n": self.pass_rate_n,
                "value": json_share(self.pass_rate, self.pass_rate_n),
                "interval": None
                if interval is None
                else {
                    "low": interval.low,
                    "high": interval.high,
                    "confidenceLevel": interval.confidence_level,
                },
            },
            "counts": {status: getattr(self, status) for status in STATUSES},
            "stale": {"fields": self.stale_fields, "labels": self.stale_labels},
            "fields": [f.to_json() for f in self.fields],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunScore:
        interval = data["passRate"]["interval"]
        return cls(
            field_correct=data["fieldAccuracy"]["correct"],
            field_scored=data["fieldAccuracy"]["n"],
            field_accuracy=_share_from_json(
                data["fieldAccuracy"]["value"],
                data["fieldAccuracy"]["correct"],
                data["fieldAccuracy"]["n"],
            ),
            **{status: data["counts"][status] for status in STATUSES},
            pass_rate=_share_from_json(
                data["passRate"]["value"], data["passRate"]["passed"], data["passRate"]["n"]
            ),
            pass_rate_interval=None
            if interval is None
            else Interval(interval["low"], interval["high"], interval["confidenceLevel"]),
            stale_fields=data["stale"]["fields"],
            stale_labels=data["stale"]["labels"],
            fields=tuple(FieldScore.from_json(f) for f in data["fields"]),
        )


def summarise_run(case_scores: Iterable[CaseScore], *, schema: Schema) -> RunScore:
    """Aggregate case results into the run's figures.

    Parameters
    ----------
    case_scores
        Every case of the run, whatever its status.
    schema
        The scored node's schema: each of its fields (each column of a table, plus the table's
        invented rows) gets a breakdown row, scored or not.

    Returns
    -------
    RunScore
    """
    cases = list(case_scores)
    counts = {status: sum(c.status == status for c in cases) for status in STATUSES}
    # Only passed and failed cases carry items; filtering says so explicitly.
    items = [item for c in cases if c.status in ("passed", "failed") for item in c.items]
    tallies: dict[str, list[int]] = {key: [0, 0] for key in _schema_keys(schema)}
    for item in items:
        tally = tallies.setdefault(item.key, [0, 0])  # scored against another schema version
        tally[0] += 1
        tally[1] += item.matched
    stale_counts: dict[str, int] = {}
    for case in cases:
        for path in case.stale:
            stale_counts[path] = stale_counts.get(path, 0) + 1
    rows = [
        FieldScore(key, n, k, k / n if n else None, stale_labels=stale_counts.get(key, 0))
        for key, (n, k) in tallies.items()
    ]
    rows.extend(
        FieldScore(path, 0, 0, None, stale=True, stale_labels=count)
        for path, count in sorted(stale_counts.items())
        if path not in tallies
    )
    scored = len(items)
    correct = sum(item.matched for item in items)
    n_cases = counts["passed"] + counts["failed"]
    return RunScore(
        field_correct=correct,
        field_scored=scored,
        field_accuracy=correct / scored if scored else None,
        passed=counts["passed"],
        failed=counts["failed"],
        errored=counts["errored"],
        skipped=counts["skipped"],
        disabled=counts["disabled"],
        pass_rate=counts["passed"] / n_cases if n_cases else None,
        pass_rate_interval=estimate_proportion(counts["passed"], n_cases).interval,
        stale_fields=len(stale_counts),
        stale_labels=sum(stale_counts.values()),
        fields=tuple(rows),
    )


def _schema_keys(schema: Schema) -> list[str]:
    keys: list[str] = []
    for field in schema.fields:
        if field.is_table:
            keys.extend(f"{field.id}.{column.id}" for column in field.columns)
        keys.append(field.id)  # for a table: its invented rows
    return keys
