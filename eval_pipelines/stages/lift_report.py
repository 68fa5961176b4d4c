"""The live-lift report over the warehouse (spec 004): every scope's lift read from the
stored rows, its claim decided by :mod:`eval_pipelines.core.lift.claim` and saved in the
ledger, and the report's JSON document (rendered by :mod:`eval_pipelines.core.lift.report`).

Every lift is treated against lever_holdout within one exposure epoch, after its A/A check;
arms and epochs are never pooled.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import duckdb
import polars as pl

from eval_pipelines.core.lift.application_ci_ledger import ledger_with_application_ci
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines.core.lift.claim import Scope, claim_candidate, claim_id, decide_claim
from eval_pipelines.core.lift.claim_cost import CostInputs
from eval_pipelines.core.lift.intents import DecisionIntent
from eval_pipelines.core.lift.ledger import Claim, LedgerClaim, ledger_claim
from eval_pipelines.core.lift.lift import live_lift
from eval_pipelines.core.lift.logs import MIXED_SCOPE, REQUEST_KEY, mixed_artifacts
from eval_pipelines.core.lift.prices import parse_price_table
from eval_pipelines.core.lift.rollup import rollup
from eval_pipelines.storage import application_ci as application_ci_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store
from eval_pipelines.storage import lift as lift_store


def _scopes(events: pl.DataFrame) -> list[Scope]:
    contrasted = events.filter(pl.col("exposure_arm").is_in(["treated", "lever_holdout"]))
    keys = (
        contrasted.select("workspace_id", "claim_type", "exposure_epoch")
        .unique()
        .sort("workspace_id", "claim_type", "exposure_epoch")
    )
    return [Scope(*row) for row in keys.iter_rows()]


def current_epoch(conn: duckdb.DuckDBPyConnection, events: pl.DataFrame, workspace_id: str) -> str:
    """The workspace's epoch now: its settings' (``lift settings``), else the epoch of its
    latest row."""
    stored = lift_store.settings(conn, workspace_id)
    if stored is not None:
        return stored.epoch
    rows = events.filter(pl.col("workspace_id") == workspace_id).sort("ts")
    return str(rows.get_column("exposure_epoch")[-1])


def _split_of(conn: duckdb.DuckDBPyConnection, scope: Scope) -> LiftConfig | None:
    """The split the scope's rows were assigned under: the workspace's settings, when they are
    of the scope's epoch (the checks that need the split do not run otherwise)."""
    stored = lift_store.settings(conn, scope.workspace_id)
    if stored is None or stored.epoch != scope.epoch or stored.lever is None:
        return None
    return LiftConfig(
        scope.workspace_id,
        stored.epoch,
        stored.holdout_fraction,
        stored.lever,
        stored.lever_holdout_share,
    )


def cost_inputs(
    conn: duckdb.DuckDBPyConnection, workspace_id: str, *, seed: int, n_resamples: int
) -> CostInputs:
    """The workspace's cost options (``lift settings --intent/--lever-changes/--prices``) as a
    claim's cost bar reads them."""
    stored = lift_store.cost_settings(conn, workspace_id)
    if stored is None:
        return CostInputs(rng=seed, n_resamples=n_resamples)
    return CostInputs(
        declared=DecisionIntent.from_json(stored.intent) if stored.intent else None,
        lever_changes=stored.lever_changes,
        prices=parse_price_table(stored.prices) if stored.prices else None,
        rng=seed,
        n_resamples=n_resamples,
    )


def build_report(
    conn: duckdb.DuckDBPyConnection, *, seed: int = 0, n_resamples: int = 2000
) -> tuple[dict[str, Any], list[Claim]]:
    """Every scope's lift (per workspace, claim type and epoch), with its rollup cells; the
    ledger updated (inside the caller's transaction). Mixed artifacts are left out."""
    events = lift_store.events(conn)
    mixed = mixed_artifacts(events)
    # Mixed within its (workspace, epoch) only: the same key elsewhere is another artifact.
    unmixed = events.join(mixed.select(MIXED_SCOPE), on=list(MIXED_SCOPE), how="anti")
    # A request stored twice with different content (before ingest was idempotent per
    # request): which copy is true is unknown, so neither is read. A request is its
    # workspace's: another workspace's request of the same id is another request.
    copies = events.group_by(REQUEST_KEY).len().filter(pl.col("len") > 1)
    eligible = unmixed.join(copies, on=list(REQUEST_KEY), how="anti", maintain_order="left")
    # The outcome audit: each audited request's independently established outcome beside its
    # logged one (null where not audited).
    audited = lift_store.audits(conn).select(*REQUEST_KEY, "audited_outcome")
    eligible = eligible.join(audited, on=list(REQUEST_KEY), how="left", maintain_order="left")
    now = datetime.now(UTC).replace(tzinfo=None)
    screenings = holdout_evaluations_store.reports_newest_first(
        conn, "holdout"
    )  # read once per report
    claims: list[Claim] = []
    scopes_json: list[dict[str, Any]] = []
    for scope in _scopes(eligible):
        rows = eligible.filter(
            (pl.col("workspace_id") == scope.workspace_id)
            & (pl.col("claim_type") == scope.claim_type)
            & (pl.col("exposure_epoch") == scope.epoch)
        )
        result = live_lift(
            rows,
            workspace_id=scope.workspace_id,
            claim_type=scope.claim_type,
            epoch=scope.epoch,
            rng=seed,
            n_resamples=n_resamples,
            config=_split_of(conn, scope),
        )
        claim = decide_claim(
            scope,
            result,
            rows,
            existing=lift_store.claim(conn, claim_id(scope, claim_candidate(rows))),
            current_epoch=current_epoch(conn, eligible, scope.workspace_id),
            screenings=screenings,
            case_id=lift_store.workspace_case(conn, scope.workspace_id),
            now=now,
            cost=cost_inputs(conn, scope.workspace_id, seed=seed, n_resamples=n_resamples),
        )
        lift_store.save_claim(conn, claim)
        claims.append(claim)
        cells = [c.to_json() for c in rollup(rows, epoch=scope.epoch)]
        scopes_json.append({"scope": scope.label, "claimId": claim.claim_id, "cells": cells})
    # Each claim with the application-CI results of its candidate beside it (never read into
    # its status or verdict).
    ci_results = application_ci_store.results(conn)
    beside = ledger_with_application_ci([ledger_claim(c) for c in claims], ci_results)
    report = {
        "rows": events.height,
        "mixedArtifacts": mixed.height,
        "rowsLeftOutAsMixed": events.height - unmixed.height,
        "conflictingRequests": copies.height,
        "rowsLeftOutAsConflicting": int(copies.get_column("len").sum()),
        "claims": [row.to_json() for row in beside if isinstance(row, LedgerClaim)],
        "scopes": scopes_json,
    }
    if ci_results:  # a report without any is as it was before application CI existed
        report["applicationCi"] = [r.to_json() for r in ci_results]
    return report, claims
