"""Python API: cases, memo entries and holdout evaluations (000's SDK calls, synchronous).

Every function validates its input before anything is written; a bad value raises
:class:`~eval_pipelines.core.errors.InputError` naming the field, the value and the rule.
"""

from eval_pipelines.api._shared import EvalFailed
from eval_pipelines.api.cases import create_case, list_cases
from eval_pipelines.api.compare import compare_holdout_evals, evaluate_memo_entry
from eval_pipelines.api.evaluate import evaluate, get_evaluation, list_evaluations
from eval_pipelines.api.holdout import (
    eval_rows,
    get_holdout_eval,
    list_evals,
    prune_partitions,
    rerun_holdout_eval,
    start_holdout_eval,
    wait_for_eval,
)
from eval_pipelines.api.memo import add_memo_entry, approve_memo_entry, list_memo_entries
from eval_pipelines.api.tables import list_tables, load_table, show_table

__all__ = [
    "EvalFailed",
    "add_memo_entry",
    "approve_memo_entry",
    "compare_holdout_evals",
    "create_case",
    "eval_rows",
    "evaluate",
    "evaluate_memo_entry",
    "get_evaluation",
    "get_holdout_eval",
    "list_cases",
    "list_evals",
    "list_evaluations",
    "list_memo_entries",
    "list_tables",
    "load_table",
    "prune_partitions",
    "rerun_holdout_eval",
    "show_table",
    "start_holdout_eval",
    "wait_for_eval",
]
