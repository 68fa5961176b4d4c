"""Comparing two evaluations (000's evals:compare) and the memo A/B shortcut."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines import api
from eval_pipelines.core.errors import ConflictError, InputError


def _start(case: str, **kwargs) -> str:
    variants = kwargs.pop("variants", [{"name": "baseline"}])
    return api.start_holdout_eval(case, variants, launch="inline", **kwargs)["evalId"]


def test_compare_two_evaluations_matches_the_in_eval_comparison(small_case: str) -> None:
    both = _start(
        small_case,
        sample_size=80,
        seed=4,
        variants=[{"name": "baseline"}, {"name": "k5", "config": {"candidates": 5}}],
    )
    first = _start(small_case, sample_size=80, seed=4)
    second = _start(
        small_case, sample_size=80, seed=4, variants=[{"name": "k5", "config": {"candidates": 5}}]
    )
    compared = api.compare_holdout_evals(
        small_case,
        baseline_eval_id=first,
        candidate_eval_id=second,
        baseline_variant="baseline",
        candidate_variant="k5",
    )
    inside = api.get_holdout_eval(small_case, both)["report"]["comparisons"][0]["levels"]
    assert compared["levels"] == inside


@pytest.mark.parametrize(
    ("other", "what"),
    [
        ({"seed": 5}, "sample hash"),
        ({"grouping": {"mode": "none"}}, "grouping"),
        ({"grouping": {"threshold": 0.9}}, "grouping"),
        ({"config": {"targetDepth": [4]}}, "target depth"),
    ],
)
def test_compare_refuses_different_samples_grouping_or_depth(
    small_case: str, other: dict, what: str
) -> None:
    first = _start(small_case, sample_size=30, seed=4)
    second = _start(small_case, **({"sample_size": 30, "seed": 4} | other))
    with pytest.raises(ConflictError, match=what):
        api.compare_holdout_evals(
            small_case,
            baseline_eval_id=first,
            candidate_eval_id=second,
            baseline_variant="baseline",
            candidate_variant="baseline",
        )


def test_compare_names_an_unknown_variant(small_case: str) -> None:
    first = _start(small_case, sample_size=20, seed=4)
    with pytest.raises(InputError) as error:
        api.compare_holdout_evals(
            small_case,
            baseline_eval_id=first,
            candidate_eval_id=first,
            baseline_variant="baseline",
            candidate_variant="nope",
        )
    assert error.value.field == "--candidate-variant"


def test_memo_shortcut_runs_active_memo_against_the_proposed_entry(
    small_case: str, tmp_path: Path
) -> None:
    entry = tmp_path / "entry.yaml"
    entry.write_text(
        "id: m_asthma\ninstruction: Asthma is J45.909 here.\n"
        "when: {keywords: [asthma]}\nthen: {assign: J45.909}\n"
    )
    api.add_memo_entry(small_case, entry)
    started = api.evaluate_memo_entry(
        small_case, "m_asthma", sample_size=50, seed=1, launch="inline"
    )
    report = api.get_holdout_eval(small_case, started["evalId"])["report"]
    assert [v["name"] for v in report["variants"]] == ["active-memo", "with-m_asthma"]
    assert report["variants"][1]["memoInclude"] == ["m_asthma"]
    assert api.list_memo_entries(small_case)[0]["status"] == "proposed"
    api.approve_memo_entry(small_case, "m_asthma", by="lead")
    with pytest.raises(InputError, match="already active"):
        api.evaluate_memo_entry(small_case, "m_asthma", launch="inline")
