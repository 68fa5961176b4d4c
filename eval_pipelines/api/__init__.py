"""Python API: cases, memo entries, holdout evaluations and queries as functions, the other
features as modules (``api.golden``, ``api.workflows``, ``api.lift``, ``api.embeddings``,
``api.plan``, ``api.grouping``), and every error a caller may catch.

Every function validates its input before anything is written; a bad value raises
:class:`~eval_pipelines.core.errors.InputError` naming the field, the value and the rule.
Every error derives from :class:`~eval_pipelines.core.errors.EvalPipelinesError` except the
two interrupts, which are ``KeyboardInterrupt`` subclasses.
"""

from eval_pipelines.api import embeddings, golden, grouping, lift, plan, workflows
from eval_pipelines.api._holdout_state import HoldoutStatus
from eval_pipelines.api._shared import EvalFailed, EvalInterrupted
from eval_pipelines.api.cases import create_case, list_cases
from eval_pipelines.api.compare import (
    HoldoutComparison,
    compare_holdout_evals,
    evaluate_memo_entry,
)
from eval_pipelines.api.holdout import (
    LaunchedEval,
    prune_partitions,
    rerun_holdout_eval,
    start_holdout_eval,
)
from eval_pipelines.api.holdout_results import EvalRow, EvalSummary, eval_rows, list_evals
from eval_pipelines.api.holdout_status import get_holdout_eval, wait_for_eval
from eval_pipelines.api.lift import IngestRefused
from eval_pipelines.api.memo import add_memo_entry, approve_memo_entry, list_memo_entries
from eval_pipelines.api.queries import QueryRefused, get_query, list_queries, run_query
from eval_pipelines.api.tables import list_tables, load_table, show_table
from eval_pipelines.api.workflows import ActivationRefused
from eval_pipelines.core.cases import CaseSource
from eval_pipelines.core.errors import (
    ConflictError,
    EvalPipelinesError,
    InputError,
    NotFoundError,
    RunRefusal,
)
from eval_pipelines.core.holdout.spec import HoldoutOptions
from eval_pipelines.core.holdout.token_policy import TokenConfirmationNeeded
from eval_pipelines.core.lift.arms import HoldoutFactNotRetrievableError
from eval_pipelines.core.lift.evidence import WeakerEvidenceError
from eval_pipelines.core.lift.rollup import EpochMixError
from eval_pipelines.core.plugins import PluginError
from eval_pipelines.core.workflows.nodes import NodeFailed
from eval_pipelines.core.workflows.step_worker import StepCanceled, StepTimedOut
from eval_pipelines.runs import RunInterrupted
from eval_pipelines.settings import SettingError
from eval_pipelines.storage.warehouse import WarehouseBusy, WarehouseConflict, WarehouseUnavailable

__all__ = [
    "ActivationRefused",
    "CaseSource",
    "ConflictError",
    "EpochMixError",
    "EvalFailed",
    "EvalInterrupted",
    "EvalPipelinesError",
    "EvalRow",
    "EvalSummary",
    "HoldoutComparison",
    "HoldoutOptions",
    "HoldoutFactNotRetrievableError",
    "HoldoutStatus",
    "IngestRefused",
    "InputError",
    "LaunchedEval",
    "NodeFailed",
    "NotFoundError",
    "PluginError",
    "SettingError",
    "QueryRefused",
    "RunInterrupted",
    "RunRefusal",
    "StepCanceled",
    "StepTimedOut",
    "TokenConfirmationNeeded",
    "WeakerEvidenceError",
    "WarehouseBusy",
    "WarehouseConflict",
    "WarehouseUnavailable",
    "embeddings",
    "golden",
    "grouping",
    "lift",
    "plan",
    "workflows",
    "add_memo_entry",
    "approve_memo_entry",
    "compare_holdout_evals",
    "create_case",
    "eval_rows",
    "evaluate_memo_entry",
    "get_holdout_eval",
    "get_query",
    "list_cases",
    "list_evals",
    "list_memo_entries",
    "list_queries",
    "list_tables",
    "load_table",
    "prune_partitions",
    "rerun_holdout_eval",
    "run_query",
    "show_table",
    "start_holdout_eval",
    "wait_for_eval",
]
