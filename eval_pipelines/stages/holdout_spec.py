"""A holdout evaluation's stored spec, read by every holdout stage (Dagster-free): each
stage reads its inputs from the warehouse, calls the core and writes its rows back (replacing
the evaluation's previous rows). The Dagster assets in ``eval_pipelines.defs.holdout`` are thin
adapters over the stage functions.

Every stage reads the records version, tree version and memo entries the evaluation pinned
when it was registered, so a re-run reproduces the report even after the case was replaced or
its memo changed.
"""

from __future__ import annotations

import duckdb

from eval_pipelines.core.errors import ConflictError, NotFoundError
from eval_pipelines.core.holdout.spec import HoldoutSpec, spec_from_json
from eval_pipelines.core.tree import CodeTree
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store

KIND = "holdout"


def load_spec(conn: duckdb.DuckDBPyConnection, eval_id: str) -> HoldoutSpec:
    """The stored spec of a holdout evaluation, with its pinned records version present.

    Raises
    ------
    NotFoundError
        When no holdout evaluation has this id: evaluations are registered by the CLI or the
        API (``eval-pipelines eval holdout``), never by adding a partition in the UI.
    """
    try:
        row = holdout_evaluations_store.evaluation_row(conn, eval_id)
    except NotFoundError:
        raise NotFoundError(
            f"No holdout evaluation is registered under the key {eval_id!r}: create "
            "evaluations with 'eval-pipelines eval holdout CASE --variants-file FILE' (or "
            "api.start_holdout_eval), which stores the spec and adds the partition, instead of "
            "adding a partition in the UI."
        ) from None
    if row.kind != KIND:
        raise ConflictError(f"evalId={eval_id!r}: is a {row.kind} evaluation, not {KIND}")
    spec = spec_from_json(row.spec)
    cases_store.require_records_version(conn, spec.case_id, spec.records_version)
    return spec


def pinned_tree(conn: duckdb.DuckDBPyConnection, spec: HoldoutSpec) -> CodeTree:
    return cases_store.load_tree(conn, spec.case_id, spec.tree_version)
