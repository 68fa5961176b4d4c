"""Python API: golden sets, their golden cases, golden runs, comparisons and trends (001).

A *golden case* is one document of a golden set with the values it should produce (not a
labelled dataset: that is a case of :mod:`eval_pipelines.api.cases`). Every function returns a
frozen result; ``to_json()`` is the document the CLI prints.

The feature's one namespace (``api.golden``); each concern has its module: sets and cases
(:mod:`~eval_pipelines.api.golden_sets`), runs, reports, the gate, comparisons and trends
(:mod:`~eval_pipelines.api.golden_runs`), the results they return
(:mod:`~eval_pipelines.api.golden_results`).
"""

from eval_pipelines.api.golden_results import (
    AddedGoldenCaseResult,
    AddedRecordsResult,
    ChargedResult,
    ComparedRunResult,
    DeletedGoldenCaseResult,
    GoldenCaseResult,
    GoldenCaseScoreResult,
    GoldenComparisonResult,
    GoldenReportResult,
    GoldenRunLaunchResult,
    GoldenRunResult,
    GoldenSetResult,
    GoldenTrendResult,
    ListedGoldenCaseResult,
    ModelUsageResult,
    RecordGoldenCaseResult,
    TrendPointResult,
)
from eval_pipelines.api.golden_runs import (
    compare_golden_runs,
    golden_runs_of,
    run_and_report,
    run_report,
    run_set,
    trend,
)
from eval_pipelines.api.golden_sets import (
    add_golden_case,
    add_golden_case_from_run,
    add_golden_cases_from_records,
    create_set,
    delete_golden_case,
    list_golden_cases,
    set_golden_case_enabled,
)

__all__ = [
    "AddedGoldenCaseResult",
    "AddedRecordsResult",
    "ChargedResult",
    "ComparedRunResult",
    "DeletedGoldenCaseResult",
    "GoldenCaseResult",
    "GoldenCaseScoreResult",
    "GoldenComparisonResult",
    "GoldenReportResult",
    "GoldenRunLaunchResult",
    "GoldenRunResult",
    "GoldenSetResult",
    "GoldenTrendResult",
    "ListedGoldenCaseResult",
    "ModelUsageResult",
    "RecordGoldenCaseResult",
    "TrendPointResult",
    "add_golden_case",
    "add_golden_case_from_run",
    "add_golden_cases_from_records",
    "compare_golden_runs",
    "create_set",
    "delete_golden_case",
    "golden_runs_of",
    "list_golden_cases",
    "run_and_report",
    "run_report",
    "run_set",
    "set_golden_case_enabled",
    "trend",
]
