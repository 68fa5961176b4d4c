"""Python API: cases, memo entries, holdout evaluations and queries as functions, the other
features as modules (``api.golden``, ``api.workflows``, ``api.lift``, ``api.embeddings``,
``api.plan``, ``api.grouping``), and every error a caller may catch.

Every function validates its input before anything is written; a bad value raises
:class:`~eval_pipelines.core.errors.InputError` naming the field, the value and the rule.
Every error derives from :class:`~eval_pipelines.core.errors.EvalPipelinesError` except the
two interrupts, which are ``KeyboardInterrupt`` subclasses.
"""

# Each name is imported when first used: a command that lists memo entries need not load the
# golden sets' PDF reader, the statistics or the lift modules (the CLI imports this package
# for every command).
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    from eval_pipelines.storage.warehouse import (
        WarehouseBusy,
        WarehouseConflict,
        WarehouseUnavailable,
    )

_HOMES: dict[str, str] = {
    "ActivationRefused": "eval_pipelines.api.workflows",
    "add_memo_entry": "eval_pipelines.api.memo",
    "approve_memo_entry": "eval_pipelines.api.memo",
    "CaseSource": "eval_pipelines.core.cases",
    "compare_holdout_evals": "eval_pipelines.api.compare",
    "ConflictError": "eval_pipelines.core.errors",
    "create_case": "eval_pipelines.api.cases",
    "embeddings": "eval_pipelines.api.embeddings",
    "EpochMixError": "eval_pipelines.core.lift.rollup",
    "eval_rows": "eval_pipelines.api.holdout_results",
    "EvalFailed": "eval_pipelines.api._shared",
    "EvalInterrupted": "eval_pipelines.api._shared",
    "EvalPipelinesError": "eval_pipelines.core.errors",
    "EvalRow": "eval_pipelines.api.holdout_results",
    "EvalSummary": "eval_pipelines.api.holdout_results",
    "evaluate_memo_entry": "eval_pipelines.api.compare",
    "get_holdout_eval": "eval_pipelines.api.holdout_status",
    "get_query": "eval_pipelines.api.queries",
    "golden": "eval_pipelines.api.golden",
    "grouping": "eval_pipelines.api.grouping",
    "HoldoutComparison": "eval_pipelines.api.compare",
    "HoldoutFactNotRetrievableError": "eval_pipelines.core.lift.arms",
    "HoldoutOptions": "eval_pipelines.core.holdout.spec",
    "HoldoutStatus": "eval_pipelines.api._holdout_state",
    "IngestRefused": "eval_pipelines.api.lift",
    "InputError": "eval_pipelines.core.errors",
    "LaunchedEval": "eval_pipelines.api.holdout",
    "lift": "eval_pipelines.api.lift",
    "list_cases": "eval_pipelines.api.cases",
    "list_evals": "eval_pipelines.api.holdout_results",
    "list_memo_entries": "eval_pipelines.api.memo",
    "list_queries": "eval_pipelines.api.queries",
    "list_tables": "eval_pipelines.api.tables",
    "load_table": "eval_pipelines.api.tables",
    "NodeFailed": "eval_pipelines.core.workflows.nodes",
    "NotFoundError": "eval_pipelines.core.errors",
    "plan": "eval_pipelines.api.plan",
    "PluginError": "eval_pipelines.core.plugins",
    "prune_partitions": "eval_pipelines.api.holdout",
    "QueryRefused": "eval_pipelines.api.queries",
    "rerun_holdout_eval": "eval_pipelines.api.holdout",
    "run_query": "eval_pipelines.api.queries",
    "RunInterrupted": "eval_pipelines.runs",
    "RunRefusal": "eval_pipelines.core.errors",
    "SettingError": "eval_pipelines.settings",
    "show_table": "eval_pipelines.api.tables",
    "start_holdout_eval": "eval_pipelines.api.holdout",
    "StepCanceled": "eval_pipelines.core.workflows.step_worker",
    "StepTimedOut": "eval_pipelines.core.workflows.step_worker",
    "TokenConfirmationNeeded": "eval_pipelines.core.holdout.token_policy",
    "wait_for_eval": "eval_pipelines.api.holdout_status",
    "WarehouseBusy": "eval_pipelines.storage.warehouse",
    "WarehouseConflict": "eval_pipelines.storage.warehouse",
    "WarehouseUnavailable": "eval_pipelines.storage.warehouse",
    "WeakerEvidenceError": "eval_pipelines.core.lift.evidence",
    "workflows": "eval_pipelines.api.workflows",
}

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


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(home)
    value = module if home == f"{__name__}.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
