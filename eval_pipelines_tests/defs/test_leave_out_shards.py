"""The leave-out step with its TF-IDF search split into shard steps stores exactly what the
unsharded step stores: the same leave-out list, candidates (ids, ranks, float32
similarities) and report."""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from eval_pipelines import api
from eval_pipelines.defs.holdout import holdout_assets, holdout_eval_job
from eval_pipelines.defs.holdout_checks import holdout_checks
from eval_pipelines.defs.io_managers import TransientPickleIOManager
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.settings import warehouse_location

DEFS = dg.Definitions(
    assets=holdout_assets,
    asset_checks=holdout_checks,
    jobs=[holdout_eval_job],
    resources={"warehouse": WarehouseResource(), "io_manager": TransientPickleIOManager()},
)


def _run(eval_id: str, shards: int) -> dg.ExecuteInProcessResult:
    instance = dg.DagsterInstance.get()
    if not instance.has_dynamic_partition("holdout_evaluations", eval_id):
        instance.add_dynamic_partitions("holdout_evaluations", [eval_id])
    config = {"ops": {"leave_out": {"ops": {"retrieval_shards": {"config": {"shards": shards}}}}}}
    return DEFS.resolve_job_def("holdout_eval").execute_in_process(
        instance=instance, partition_key=eval_id, run_config=config
    )


def _stored(eval_id: str) -> tuple[list[tuple], list[tuple], str]:
    with duckdb.connect(str(warehouse_location()), read_only=True) as conn:
        candidates = conn.execute(
            "SELECT sample_key, rank, evidence_key, similarity, retrieval FROM candidates "
            "WHERE eval_id = ? ORDER BY ALL",
            [eval_id],
        ).fetchall()
        held_out = conn.execute(
            "SELECT sample_key, excluded_key, reason FROM leave_out WHERE eval_id = ? ORDER BY ALL",
            [eval_id],
        ).fetchall()
        markdown = conn.execute(
            "SELECT markdown FROM eval_reports WHERE eval_id = ?", [eval_id]
        ).fetchone()
    assert markdown is not None
    return candidates, held_out, markdown[0]


@pytest.mark.parametrize(
    "grouping",
    [{"mode": "nearDuplicate", "threshold": 0.9}, {"mode": "field", "field": "group_key"}],
    ids=["near-duplicates", "field"],
)
def test_sharded_leave_out_stores_exactly_the_unsharded_rows(small_case: str, grouping) -> None:
    variants = [{"name": "baseline"}, {"name": "five", "config": {"candidates": 5}}]
    eval_id = api.start_holdout_eval(
        small_case,
        variants,
        api.HoldoutOptions(sample_size=80, seed=9, grouping=grouping),
        register_only=True,
    ).eval_id
    single = _run(eval_id, 1)
    unsharded = _stored(eval_id)
    sharded_run = _run(eval_id, 3)
    sharded = _stored(eval_id)
    steps = {e.step_key for e in sharded_run.all_events if e.event_type_value == "STEP_SUCCESS"}
    assert {f"leave_out.retrieve_shard[shard_{i}]" for i in range(3)} <= steps
    assert "leave_out.retrieve_shard[shard_1]" not in {
        e.step_key for e in single.all_events if e.event_type_value == "STEP_SUCCESS"
    }
    assert len(unsharded[0]) == 80 * 20
    assert sharded[0] == unsharded[0]
    assert sharded[1] == unsharded[1]
    assert sharded[2] == unsharded[2]


def test_shard_count_is_checked(small_case: str) -> None:
    eval_id = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        api.HoldoutOptions(sample_size=20, seed=1),
        register_only=True,
    ).eval_id
    with pytest.raises(dg.Failure, match="shards"):
        _run(eval_id, 0)


def test_a_space_searched_for_groups_and_evidence_has_one_retrieval_row(small_case: str) -> None:
    from eval_pipelines.api.embeddings import embed_case

    embed_case(small_case, method="lsa", dim=16, seed=0)
    dense = {"space": "embedding", "backend": "exact"}
    variants = [{"name": "baseline"}, {"name": "dense", "config": {"retrieval": dense}}]
    eval_id = api.start_holdout_eval(
        small_case,
        variants,
        api.HoldoutOptions(
            sample_size=80,
            seed=9,
            grouping={"mode": "nearDuplicate", "threshold": 0.9, "retrieval": dense},
        ),
        register_only=True,
    ).eval_id
    _run(eval_id, 1)
    unsharded = _stored(eval_id)
    _run(eval_id, 3)
    assert _stored(eval_id) == unsharded
    with duckdb.connect(str(warehouse_location()), read_only=True) as conn:
        rows = conn.execute(
            "SELECT retrieval, purpose, json_extract(payload, '$.queries')::INT "
            "FROM eval_retrievals WHERE eval_id = ? ORDER BY retrieval",
            [eval_id],
        ).fetchall()
    # The plan searched the dense space for the groups, the store for the evidence: one row.
    assert rows == [("embedding:exact", "grouping+evidence", 160), ("tfidf:exact", "evidence", 80)]
    assert unsharded[2].count("`embedding` exact for grouping+evidence") == 1
