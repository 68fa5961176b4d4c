"""Golden-set scoring, pure and without I/O: the one import for callers.

Each concern lives in its own module: :mod:`.case` (one case), :mod:`.summary` (one run),
:mod:`.compare` (two runs), :mod:`.gate` (activation gate and schema drift).
"""

from eval_pipelines.core.golden.case import (
    ITEM_KINDS,
    STATUSES,
    CaseScore,
    ScoredItem,
    disabled_case,
    score_case,
    skipped_case,
)
from eval_pipelines.core.golden.compare import CaseChange, CompareResult, FieldDelta, compare_runs
from eval_pipelines.core.golden.gate import (
    GateDecision,
    passes_gate,
    schema_drift,
    validate_threshold,
)
from eval_pipelines.core.golden.summary import FieldScore, RunScore, summarise_run
from eval_pipelines.core.golden.values import REL_TOL, values_match

__all__ = [
    "ITEM_KINDS",
    "REL_TOL",
    "STATUSES",
    "CaseChange",
    "CaseScore",
    "CompareResult",
    "FieldDelta",
    "FieldScore",
    "GateDecision",
    "RunScore",
    "ScoredItem",
    "compare_runs",
    "disabled_case",
    "passes_gate",
    "schema_drift",
    "score_case",
    "skipped_case",
    "summarise_run",
    "validate_threshold",
    "values_match",
]
