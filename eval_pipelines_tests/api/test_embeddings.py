"""A case's own embeddings: loaded with the case, validated in full, refused with nothing
written; LSA embeddings computed from the case; evaluations retrieving in embedding space."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from eval_pipelines import api
from eval_pipelines.api.embeddings import embed_case, list_embeddings
from eval_pipelines.core.errors import InputError
from eval_pipelines.storage import embeddings as embeddings_store
from eval_pipelines_tests.helpers.ann_indexes import SmallCaseAnnIndexes
from eval_pipelines_tests.helpers.nn_descent_builds import BUILDS_NN_DESCENT

TREE = pl.DataFrame({"code": ["A", "A1", "A2", "B", "B1"], "parent": [None, "A", "A", None, "B"]})
KEYS = ["r1", "r2", "r3", "r4"]


@pytest.fixture
def files(workdir: Path) -> dict[str, Path]:
    records = pl.DataFrame(
        {
            "record_key": KEYS,
            "text": ["alpha one", "alpha two", "beta one", "beta two"],
            "label": ["A1", "A2", "B1", "B1"],
        }
    )
    paths = {"records": workdir / "records.parquet", "tree": workdir / "tree.csv"}
    records.write_parquet(paths["records"])
    TREE.write_csv(paths["tree"])
    return paths


def _vectors_file(workdir: Path, keys: list[str], vectors: list, name: str = "emb") -> Path:
    path = workdir / f"{name}.parquet"
    pl.DataFrame(
        {"record_key": keys, "vector": vectors},
        schema={"record_key": pl.String, "vector": pl.List(pl.Float64)},
    ).write_parquet(path)
    return path


def _stored(workdir: Path) -> tuple[int, int, int]:
    """(cases, embedding sets, vectors) in the warehouse; zeros when it was never created."""
    path = workdir / "warehouse.duckdb"
    if not path.exists():
        return (0, 0, 0)
    with duckdb.connect(str(path), read_only=True) as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
            for table in ("cases", "embedding_sets", "record_embeddings")
        ]
    return (counts[0], counts[1], counts[2])


def test_own_embeddings_are_stored_normalised_in_record_order(
    workdir: Path, files: dict[str, Path]
) -> None:
    raw = [[3.0, 4.0], [1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]
    path = _vectors_file(workdir, list(reversed(KEYS)), list(reversed(raw)))
    result = api.create_case(
        "c1", api.CaseSource(files["records"], tree_path=files["tree"], embeddings_path=path)
    )
    assert result.embeddings is not None and result.embeddings_added is True
    assert result.embeddings.dim == 2 and result.embeddings.records == 4
    version = result.embeddings.embeddings_version
    assert result.to_json()["embeddings"]["embeddingsVersion"] == version
    with duckdb.connect(str(workdir / "warehouse.duckdb"), read_only=True) as conn:
        stored = embeddings_store.load_vectors(conn, "c1", version)
    expected = np.array(raw) / np.linalg.norm(raw, axis=1, keepdims=True)
    np.testing.assert_allclose(stored, expected, rtol=1e-6)
    assert list_embeddings("c1")[0].embeddings_version == version


def test_embedding_column_of_the_records_file(workdir: Path, files: dict[str, Path]) -> None:
    records = pl.read_parquet(files["records"]).with_columns(
        pl.Series("vec", [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]])
    )
    records.write_parquet(workdir / "with_vectors.parquet")
    result = api.create_case(
        "c2",
        api.CaseSource(
            workdir / "with_vectors.parquet", tree_path=files["tree"], embedding_column="vec"
        ),
    )
    assert result.embeddings is not None and result.embeddings.dim == 2
    # The vector column is not metadata.
    assert result.metadata_columns == ()


@pytest.mark.parametrize(
    ("keys", "vectors", "field", "words"),
    [
        (KEYS, [[1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0], [1.0, 1.0]], "vector", "r2"),
        (KEYS, [[1.0, 0.0], [float("nan"), 1.0], [0.0, 1.0], [1.0, 1.0]], "embeddings", "r2"),
        (KEYS, [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [1.0, 1.0]], "embeddings", "r2"),
        (KEYS[:3], [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], "embeddings", "r4"),
        ([*KEYS, "zz"], [[1.0, 0.0]] * 5, "embeddings", "zz"),
        (["r1", "r1", "r3", "r4"], [[1.0, 0.0]] * 4, "embeddings", "r1"),
    ],
    ids=["ragged", "not-finite", "zero-vector", "record-missing", "unknown-key", "duplicate"],
)
def test_bad_embeddings_are_refused_and_nothing_is_written(
    workdir: Path, files: dict[str, Path], keys, vectors, field, words
) -> None:
    path = _vectors_file(workdir, keys, vectors, name="bad")
    with pytest.raises(InputError) as caught:
        api.create_case(
            "c1", api.CaseSource(files["records"], tree_path=files["tree"], embeddings_path=path)
        )
    # The message names the field (the vector column or the keys), the offending key, the rule.
    assert caught.value.field.startswith(field)
    assert words in str(caught.value)
    assert _stored(workdir) == (0, 0, 0)


def test_lsa_embeddings_of_a_case(small_case: str) -> None:
    result = embed_case(small_case, method="lsa", dim=16, seed=0)
    assert result.dim == 16 and result.records == 3049 and result.added
    again = embed_case(small_case, method="lsa", dim=16, seed=0)
    assert again.embeddings_version == result.embeddings_version and not again.added
    with pytest.raises(InputError) as caught:
        embed_case(small_case, dim=1)
    assert caught.value.field == "dim"


@BUILDS_NN_DESCENT
def test_evaluation_retrieving_in_embedding_space(
    small_case: str, workdir: Path, small_case_ann_indexes: SmallCaseAnnIndexes
) -> None:
    embed_case(small_case, method="lsa", dim=32, seed=0)
    small_case_ann_indexes.install(32, workdir / "indexes")
    variants = [
        {"name": "tfidf"},
        {"name": "lsa", "config": {"retrieval": {"space": "embedding", "backend": "exact"}}},
        {
            "name": "lsa-ann",
            "config": {"retrieval": {"space": "embedding", "backend": "pynndescent"}},
        },
    ]
    started = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=60, seed=4), wait=True
    )
    report = api.get_holdout_eval(small_case, started.eval_id).report
    assert report["versions"]["embeddings"]
    by_key = {row["retrieval"]: row for row in report["retrievals"]}
    assert set(by_key) == {"tfidf:exact", "embedding:exact", "embedding:pynndescent"}
    assert by_key["tfidf:exact"]["purpose"] == "grouping+evidence"
    approximate = by_key["embedding:pynndescent"]
    assert approximate["recallAtK"] >= 0.9 and approximate["recallProbeQueries"] == 60
    assert "recall@20" in api.get_holdout_eval(small_case, started.eval_id).report_markdown
    with duckdb.connect(str(workdir / "warehouse.duckdb"), read_only=True) as conn:
        rows = conn.execute(
            "SELECT retrieval, count(DISTINCT sample_key), count(*) FROM candidates "
            "WHERE eval_id = ? GROUP BY retrieval ORDER BY retrieval",
            [started.eval_id],
        ).fetchall()
        # No space returned a held-out record (itself or a near-duplicate in TF-IDF space).
        leaked = conn.execute(
            "SELECT count(*) FROM candidates c JOIN leave_out l ON l.eval_id = c.eval_id "
            "AND l.sample_key = c.sample_key AND l.excluded_key = c.evidence_key "
            "WHERE c.eval_id = ?",
            [started.eval_id],
        ).fetchone()
    assert [r[0] for r in rows] == ["embedding:exact", "embedding:pynndescent", "tfidf:exact"]
    assert all(r[1] == 60 for r in rows)
    assert leaked == (0,)
    accuracies = [v["score"]["targetDepth"]["3"]["value"] for v in report["variants"]]
    assert len(set(accuracies)) > 1  # the spaces retrieved different evidence
