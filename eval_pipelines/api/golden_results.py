"""The frozen results :mod:`eval_pipelines.api.golden` returns (spec 001): golden sets and
cases, run launches, reports, comparisons and trends; ``to_json()`` is the document the CLI
prints."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.golden.case import CaseScore
from eval_pipelines.core.golden.compare import CaseChange, FieldDelta
from eval_pipelines.core.golden.gate import SetGate
from eval_pipelines.core.golden.report import case_why
from eval_pipelines.core.golden.run import ScoredRun
from eval_pipelines.core.golden.scoring import RunScore
from eval_pipelines.core.golden.shares import json_difference, json_share
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.core.workflows.nodes import StepUsage


@dataclass(frozen=True, kw_only=True)
class GoldenSetResult(JsonResult):
    """A golden set; ``created`` is False when an identical set existed (a script re-run)."""

    set_name: str = json_field("set")
    workflow: str
    node: str
    threshold: float
    gate: bool
    created_at: str
    created: bool


@dataclass(frozen=True, kw_only=True)
class GoldenCaseResult(JsonResult):
    """A golden case: a document of the set and the values it should produce (``labels``,
    keyed by field id), its tables' key columns, the test run it was seeded from."""

    set_name: str = json_field("set")
    case_id: str
    document_id: str
    labels: Mapping[str, object]
    key_columns: Mapping[str, tuple[str, ...]]
    from_test_run: str | None
    enabled: bool
    authored_revision: str


@dataclass(frozen=True, kw_only=True)
class ListedGoldenCaseResult(GoldenCaseResult):
    """A golden case with its schema-drift flag against the workflow's newest revision."""

    schema_drift: bool


@dataclass(frozen=True, kw_only=True)
class AddedGoldenCaseResult(GoldenCaseResult):
    """A golden case added (``added`` False: the same one existed), with the label keys that
    map onto no field (``unmapped``, not labels)."""

    unmapped: tuple[str, ...]
    added: bool


@dataclass(frozen=True)
class RecordGoldenCaseResult(JsonResult):
    """A golden case made from a labelled record of a classify workflow's case."""

    case_id: str
    record: str
    labels: Mapping[str, object]


@dataclass(frozen=True, kw_only=True)
class AddedRecordsResult(JsonResult):
    """The golden cases added from records; records already in the set are counted in
    ``skipped_as_present``."""

    set_name: str = json_field("set")
    added: tuple[RecordGoldenCaseResult, ...]
    skipped_as_present: int


@dataclass(frozen=True, kw_only=True)
class DeletedGoldenCaseResult(JsonResult):
    set_name: str = json_field("set")
    case_id: str
    deleted: bool
    results_deleted: int


@dataclass(frozen=True, kw_only=True)
class GoldenRunLaunchResult(JsonResult):
    """The Dagster run of job ``golden_gate`` that runs the set, and its state."""

    set_name: str = json_field("set")
    revision: str
    run_id: str
    state: str


@dataclass(frozen=True)
class ModelUsageResult(JsonResult):
    """What the model calls of a run's (or a case's) ``chat`` steps did: ``calls`` answered
    by the endpoint now (paid), ``from_cache`` served from a cache (free), ``failed`` without
    an answer; the endpoint's token counts of the calls made now; ``cost`` theirs from the
    node's price table, None when the model has no price (``cost_note`` says so)."""

    calls: int
    from_cache: int
    failed: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    cost_note: str | None = json_field(omit_none=True, default=None)


def _model_usage(usage: StepUsage | None) -> ModelUsageResult | None:
    if usage is None:
        return None
    return ModelUsageResult(
        usage.calls,
        usage.from_cache,
        usage.failed,
        usage.input_tokens,
        usage.output_tokens,
        usage.cost,
        usage.cost_note,
    )


@dataclass(frozen=True)
class ChargedResult(JsonResult):
    """What a golden run's steps charged (a cached step bills nothing); ``model``: its
    ``chat`` steps' calls, tokens and cost (absent when it has none)."""

    executed_steps: int
    cached_steps: int
    cost_units: float
    model: ModelUsageResult | None = json_field(omit_none=True, default=None)


@dataclass(frozen=True)
class GoldenCaseScoreResult(CaseScore):
    """A golden case's score in a run, with ``why`` it did not pass (None when it did)."""

    why: str | None = None
    model: ModelUsageResult | None = None  # its document's chat calls (absent: none)

    def to_json(self) -> dict[str, object]:
        document: dict[str, object] = {**super().to_json(), "why": self.why}
        if self.model is not None:
            document["model"] = self.model.to_json()
        return document


@dataclass(frozen=True, kw_only=True)
class GoldenReportResult(JsonResult):
    """A golden run scored: ``score`` is the run's figures (the 001 score document in JSON),
    ``cases`` each golden case's score by case id. ``counts`` is False for a run stored as
    completed by a ``golden_run`` step that did not succeed (canceled or interrupted after
    storing): the gate and the trend leave it out, and ``reason`` says so."""

    golden_run_id: str
    set_name: str = json_field("set")
    workflow: str
    revision: str
    dagster_run_id: str | None
    status: str
    reason: str | None = json_field(omit_none=True, default=None)
    started_at: str
    finished_at: str | None
    threshold: float
    charged: ChargedResult
    score: RunScore
    mixed_revisions: tuple[str, ...]
    schema_drift: tuple[str, ...]
    cases: Mapping[str, GoldenCaseScoreResult]
    counts: bool = True

    @staticmethod
    def of(scored: ScoredRun, *, step_succeeded: bool = True) -> GoldenReportResult:
        """The report of a run read back and scored
        (:func:`~eval_pipelines.stages.golden.score_run`); ``step_succeeded`` whether the
        ``golden_run`` step that stored it succeeded."""
        run = scored.run
        counts = run.status != "completed" or step_succeeded
        return GoldenReportResult(
            golden_run_id=run.golden_run_id,
            set_name=run.set_name,
            workflow=run.workflow,
            revision=run.revision,
            dagster_run_id=run.dagster_run_id,
            status=run.status,
            reason=(run.reason or None)
            if counts
            else (
                f"its golden_run step in Dagster run {run.dagster_run_id} did not succeed "
                "(canceled or interrupted after storing), so it does not count: the gate and "
                "the trend leave it out"
            ),
            counts=counts,
            started_at=run.started_at.isoformat(timespec="seconds"),
            finished_at=run.finished_at.isoformat(timespec="seconds") if run.finished_at else None,
            threshold=run.threshold,
            charged=ChargedResult(
                run.executed_steps, run.cached_steps, run.cost_units, _model_usage(run.usage)
            ),
            score=scored.score,
            mixed_revisions=scored.mixed_revisions,
            schema_drift=scored.drifted,
            cases={
                case_id: GoldenCaseScoreResult(
                    **{f.name: getattr(case, f.name) for f in dataclasses.fields(case)},
                    why=case_why(case) if case.status != "passed" else None,
                    model=_model_usage(scored.usage.get(case_id)),
                )
                for case_id, case in scored.cases.items()
            },
        )


@dataclass(frozen=True, kw_only=True)
class GoldenRunResult(GoldenReportResult):
    """:func:`~eval_pipelines.api.golden_runs.run_and_report`'s report, with this set's gate
    verdict (None unless the set is a gate)."""

    gate: SetGate | None = None


@dataclass(frozen=True)
class ComparedRunResult(JsonResult):
    """One side of a comparison: its run, revision and the counts its deltas come from."""

    golden_run_id: str
    revision: str
    field_correct: int
    field_scored: int
    passed: int
    pass_rate_n: int


@dataclass(frozen=True, kw_only=True)
class GoldenComparisonResult(JsonResult):
    """Run ``b`` against run ``a`` of one set: deltas are ``b - a``, exact here; the JSON
    writes a delta with a side of fewer than 20 observations as ``insufficient_evidence``
    (each side's counts are in ``a`` and ``b``)."""

    set_name: str = json_field("set")
    a: ComparedRunResult
    b: ComparedRunResult
    field_accuracy_delta: float | None
    pass_rate_delta: float | None
    fields: tuple[FieldDelta, ...]
    cases: tuple[CaseChange, ...]

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["fieldAccuracyDelta"] = json_difference(
            self.field_accuracy_delta, self.a.field_scored, self.b.field_scored
        )
        document["passRateDelta"] = json_difference(
            self.pass_rate_delta, self.a.pass_rate_n, self.b.pass_rate_n
        )
        return document


@dataclass(frozen=True)
class TrendPointResult(JsonResult):
    """One run's accuracy (exact here; ``insufficient_evidence`` in the JSON from fewer than
    20 values) and its n."""

    golden_run_id: str
    revision: str
    finished_at: str | None
    accuracy: float | None
    n: int

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        document["accuracy"] = json_share(self.accuracy, self.n)
        return document


@dataclass(frozen=True, kw_only=True)
class GoldenTrendResult(JsonResult):
    """Accuracy over a set's last completed runs (``field`` None: overall)."""

    set_name: str = json_field("set")
    field: str | None
    points: tuple[TrendPointResult, ...]
