"""The leave-out steps read only what they use: the evidence index opens the cached index
against a count of the records, a shard reads no record at all, and a retrieval searched in
two steps (grouping in the plan, evidence in the store) is built in each but logged once,
with its recall probed once. Real DuckDB, real indexes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import numpy as np
import pytest

from eval_pipelines import api
from eval_pipelines.api.embeddings import embed_case
from eval_pipelines.stages import embedding_index, text_index
from eval_pipelines.stages.holdout_sample import index_stage, sample_stage
from eval_pipelines.stages.leave_out import (
    leave_out_stage,
    one_row_per_retrieval,
    plan_retrieval,
    retrieve_shard,
)
from eval_pipelines.storage.warehouse import connect, transaction
from eval_pipelines_tests.helpers.nn_descent_builds import BUILDS_NN_DESCENT

ANN = {"space": "embedding", "backend": "pynndescent"}


@contextmanager
def _open(*, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    with connect(Path("warehouse.duckdb"), read_only=read_only) as conn:
        yield conn


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    """Each test opens its indexes from disk, as a new step process would."""
    text_index.clear_index_cache()
    embedding_index.clear_embedding_cache()
    yield
    text_index.clear_index_cache()
    embedding_index.clear_embedding_cache()


def _registered(case: str, variants: list, grouping: dict | None = None) -> str:
    """An evaluation with its sample drawn (what the steps before the leave-out leave)."""
    eval_id = api.start_holdout_eval(
        case,
        variants,
        api.HoldoutOptions(sample_size=60, seed=3, grouping=grouping),
        register_only=True,
    ).eval_id
    with _open() as conn, transaction(conn):
        sample_stage(conn, eval_id)
    return eval_id


def _execute(sql: str, params: list) -> list[tuple]:
    with _open() as conn, transaction(conn):
        return conn.execute(sql, params).fetchall()


def test_the_evidence_index_is_opened_against_a_count_of_the_records(
    small_case: str, workdir: Path
) -> None:
    eval_id = _registered(small_case, [{"name": "baseline"}])
    index_dir = workdir / "indexes"
    built = index_stage(_open, eval_id, index_dir=index_dir)
    assert built["built"] and built["records"] == 3049
    # An index covering another number of records than stored is built again.
    _execute(
        "DELETE FROM records WHERE case_id = ? AND record_key = "
        "(SELECT min(record_key) FROM records WHERE case_id = ?)",
        [small_case, small_case],
    )
    rebuilt = index_stage(_open, eval_id, index_dir=index_dir)
    assert rebuilt["built"] and rebuilt["records"] == 3048
    # The texts are not read to open it: blanking them changes nothing.
    _execute("UPDATE records SET text = '' WHERE case_id = ?", [small_case])
    text_index.clear_index_cache()
    opened = index_stage(_open, eval_id, index_dir=index_dir)
    assert not opened["built"] and opened["nonzeros"] == rebuilt["nonzeros"]


def test_a_shard_reads_no_record(small_case: str, workdir: Path) -> None:
    eval_id = _registered(small_case, [{"name": "baseline"}])
    index_dir = workdir / "indexes"
    index_stage(_open, eval_id, index_dir=index_dir)
    plan = plan_retrieval(_open, eval_id, index_dir=index_dir, threads=2, shards=2)
    before = [retrieve_shard(_open, plan, s, index_dir=index_dir, threads=2) for s in (0, 1)]
    # Without the records, the shards still search the memory-mapped index.
    _execute("DELETE FROM records WHERE case_id = ?", [small_case])
    text_index.clear_index_cache()
    after = [retrieve_shard(_open, plan, s, index_dir=index_dir, threads=2) for s in (0, 1)]
    for old, new in zip(before, after, strict=True):
        assert old.result is not None and new.result is not None
        np.testing.assert_array_equal(old.result.neighbours, new.result.neighbours)
        np.testing.assert_array_equal(old.result.similarities, new.result.similarities)
        np.testing.assert_array_equal(
            old.result.near_duplicate_indices, new.result.near_duplicate_indices
        )


@BUILDS_NN_DESCENT
def test_a_space_searched_for_groups_and_for_evidence_is_logged_once(
    small_case: str, workdir: Path
) -> None:
    embed_case(small_case, method="lsa", dim=16, seed=0)
    variants = [{"name": "ann", "config": {"retrieval": ANN}}, {"name": "tfidf"}]
    grouping = {"mode": "nearDuplicate", "threshold": 0.9, "retrieval": ANN}
    eval_id = _registered(small_case, variants, grouping)
    index_dir = workdir / "indexes"
    index_stage(_open, eval_id, index_dir=index_dir)
    plan = plan_retrieval(_open, eval_id, index_dir=index_dir, threads=2, shards=2)
    (grouping_log,) = plan.logs
    # The plan's grouping search skips the recall probe: the store's evidence search has it.
    assert grouping_log["retrieval"] == "embedding:pynndescent"
    assert "recallAtK" not in grouping_log
    meta = leave_out_stage(_open, eval_id, index_dir=index_dir, threads=2, shards=2)
    rows = _execute(
        "SELECT retrieval, purpose, payload FROM eval_retrievals WHERE eval_id = ? "
        "ORDER BY retrieval",
        [eval_id],
    )
    assert [(r[0], r[1]) for r in rows] == [
        ("embedding:pynndescent", "grouping+evidence"),
        ("tfidf:exact", "evidence"),
    ]
    approximate = json.loads(rows[0][2])
    assert approximate["queries"] == 2 * 60  # the grouping search, then the evidence search
    assert approximate["recallK"] == 20 and approximate["recallProbeQueries"] == 60
    assert [r["retrieval"] for r in meta["retrievals"]] == ["tfidf:exact", "embedding:pynndescent"]


def test_rows_of_one_retrieval_from_two_steps_are_merged() -> None:
    plan_row = {
        "retrieval": "embedding:pynndescent",
        "purpose": "grouping",
        "space": "embedding",
        "seconds": 1.25,
        "queries": 60,
        "fallbackQueries": 2,
        "indexBuilt": True,
        "indexSeconds": 3.0,
    }
    store_row = {
        **plan_row,
        "purpose": "evidence",
        "seconds": 0.5,
        "fallbackQueries": 1,
        "indexBuilt": False,
        "indexSeconds": 0.25,
        "recallAtK": 0.97,
    }
    other = {"retrieval": "tfidf:exact", "purpose": "evidence", "seconds": 2.0, "queries": 60}
    merged, tfidf = one_row_per_retrieval([plan_row, other, store_row])
    assert tfidf == other
    assert merged == {
        **plan_row,
        "purpose": "grouping+evidence",
        "seconds": 1.75,
        "queries": 120,
        "fallbackQueries": 3,
        "indexBuilt": True,
        "indexSeconds": 3.25,
        "recallAtK": 0.97,
    }


@BUILDS_NN_DESCENT
def test_vectors_and_the_approximate_index_are_opened_once_per_process(
    small_case: str, workdir: Path
) -> None:
    version = embed_case(small_case, method="lsa", dim=16, seed=0).embeddings_version
    index_dir = workdir / "indexes"
    vectors = embedding_index.load_vectors(_open, index_dir, small_case, version)
    assert embedding_index.load_vectors(_open, index_dir, small_case, version) is vectors
    built = embedding_index.load_or_build_ann(index_dir, small_case, version, vectors, n_threads=2)
    again = embedding_index.load_or_build_ann(index_dir, small_case, version, vectors, n_threads=2)
    assert built.built and not again.built and again.index is built.index
    # A file replaced under the same name is read again, and so is the index checked on it.
    path = embedding_index.vectors_path(index_dir, small_case, version)
    embedding_index._write_npy(path, np.load(path))
    reread = embedding_index.load_vectors(_open, index_dir, small_case, version)
    assert reread is not vectors
    np.testing.assert_array_equal(reread, vectors)
    checked = embedding_index.load_or_build_ann(index_dir, small_case, version, reread, n_threads=2)
    assert not checked.built and checked.index is not built.index
