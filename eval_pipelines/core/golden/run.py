"""A golden run (spec 001): its record as stored, and the run scored against its cases'
labels (what the report renders, :mod:`eval_pipelines.core.golden.report`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from eval_pipelines.core.golden.case import CaseScore
from eval_pipelines.core.golden.summary import RunScore
from eval_pipelines.core.workflows.nodes import StepUsage

__all__ = ["GoldenRun", "ScoredRun"]


@dataclass(frozen=True)
class GoldenRun:
    """A golden run as stored: its set, revision and status, and what it was charged."""

    golden_run_id: str
    set_name: str
    workflow: str
    revision: str
    dagster_run_id: str | None
    status: str
    started_at: datetime
    finished_at: datetime | None
    executed_steps: int
    cached_steps: int
    cost_units: float
    threshold: float
    reason: str | None = None  # why a run closed by reconciliation failed
    usage: StepUsage | None = None  # its model calls (None: no metered step ran)


@dataclass(frozen=True)
class ScoredRun:
    """A golden run read back and scored against the labels of its cases."""

    run: GoldenRun
    score: RunScore
    cases: dict[str, CaseScore]
    drifted: tuple[str, ...]
    mixed_revisions: tuple[str, ...]
    usage: dict[str, StepUsage] = field(default_factory=dict)  # model calls, by case id
