"""Retrieval spaces and backends in the spec: parsed, resolved, refused, stored."""

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.retrieval import Retrieval, parse_retrieval
from eval_pipelines.core.holdout.spec import (
    CaseContext,
    HoldoutOptions,
    parse_holdout_request,
    spec_from_json,
)


def _case(*, embeddings: str | None = "emb0001", n_records: int = 1000) -> CaseContext:
    return CaseContext(
        case_id="c1",
        records_version="r1",
        tree_version="t1",
        max_depth=2,
        target_depth=(2,),
        metadata_columns=("group_key",),
        memo={},
        classifiers=("knn-vote",),
        n_records=n_records,
        embeddings_version=embeddings,
    )


def _request(variants, *, case=None, grouping=None):
    return parse_holdout_request(
        variants,
        HoldoutOptions(sample_size=50, seed=3, grouping=grouping),
        case=case or _case(),
        sequence=1,
    )


EMBEDDING = {"space": "embedding", "backend": "exact"}


def test_default_retrieval_is_exact_tfidf_and_stays_out_of_the_json():
    spec = _request([{"name": "a"}])
    assert spec.variants[0].config.retrieval == Retrieval()
    assert "retrieval" not in spec.variants[0].config.to_json()
    assert "retrieval" not in spec.grouping.to_json()
    assert spec.embeddings_version is None


def test_a_variant_in_embedding_space_pins_the_embeddings_and_round_trips():
    spec = _request([{"name": "a"}, {"name": "b", "config": {"retrieval": EMBEDDING}}])
    assert spec.embeddings_version == "emb0001"
    assert [r.key for r in spec.retrievals] == ["tfidf:exact", "embedding:exact"]
    again = spec_from_json(spec.to_json())
    assert again == spec
    assert again.variants[1].config.retrieval.space == "embedding"


def test_grouping_in_embedding_space():
    spec = _request([{"name": "a"}], grouping={"mode": "nearDuplicate", "retrieval": EMBEDDING})
    assert spec.grouping.retrieval.space == "embedding"
    assert spec.grouping.to_json()["retrieval"] == {"space": "embedding", "backend": "exact"}
    assert spec.embeddings_version == "emb0001"
    assert spec_from_json(spec.to_json()) == spec


def test_auto_follows_the_measured_cost_model_and_remembers_what_was_asked():
    from eval_pipelines.core.embeddings.ann import choose_backend

    auto = {"space": "embedding", "backend": "auto"}
    small = parse_retrieval(auto, where="r", n_records=130_525, n_queries=200)
    assert (small.backend, small.requested) == ("exact", "auto")
    assert small.to_json() == {"space": "embedding", "backend": "exact", "requested": "auto"}
    for n_records, n_queries in [(130_525, 5_000), (10**7, 5_000), (10**6, 10**6)]:
        resolved = parse_retrieval(auto, where="r", n_records=n_records, n_queries=n_queries)
        assert resolved.backend == choose_backend("auto", n_records, n_queries)
    # Many queries against a large case: the index build pays for itself.
    assert parse_retrieval(auto, where="r", n_records=10**6, n_queries=10**6).backend == (
        "pynndescent"
    )
    tfidf = parse_retrieval({"backend": "auto"}, where="r", n_records=10**7, n_queries=10**6)
    assert tfidf.backend == "exact"


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"space": "bm25"}, "x.space", "must be one of tfidf, embedding"),
        ({"backend": "faiss"}, "x.backend", "must be one of exact, pynndescent, auto"),
        ({"space": "tfidf", "backend": "pynndescent"}, "x.backend", "serves space embedding"),
        ({"spaces": "tfidf"}, "x.spaces", "unknown"),
        ("embedding", "x", "must be an object"),
    ],
)
def test_bad_retrieval_is_refused_naming_field_and_rule(raw, field, words):
    with pytest.raises(InputError) as caught:
        parse_retrieval(raw, where="x")
    assert caught.value.field == field
    assert words in str(caught.value)


def test_embedding_space_without_embeddings_is_refused_naming_the_field():
    with pytest.raises(InputError) as caught:
        _request(
            [{"name": "a"}, {"name": "b", "config": {"retrieval": EMBEDDING}}],
            case=_case(embeddings=None),
        )
    assert caught.value.field == "variants[1].config.retrieval.space"
    assert "case embed c1" in str(caught.value)


def test_grouping_retrieval_only_with_near_duplicates():
    with pytest.raises(InputError) as caught:
        _request([{"name": "a"}], grouping={"mode": "none", "retrieval": EMBEDDING})
    assert caught.value.field == "grouping.retrieval"
