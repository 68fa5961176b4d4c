"""Cost before a run: the tokens an evaluation is expected to spend are estimated from the
sample size and each classifier's declared tokens per record; above 400,000 the evaluation
needs an explicit yes (`--yes`), and nothing is written without it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from eval_pipelines import api
from eval_pipelines.core.holdout import classify
from eval_pipelines.core.holdout.token_policy import (
    TOKEN_CONFIRMATION_LIMIT,
    TokenConfirmationNeeded,
)


@pytest.fixture
def wordy_classifier() -> Iterator[str]:
    """knn-vote registered again under a name that declares 3,000 tokens per record (as an
    LLM classifier would), so the estimate is the only thing that differs."""
    classify.register_classifier("wordy", classify.knn_vote, tokens_per_record=3000)
    yield "wordy"
    classify._REGISTRY.pop("wordy")
    classify._TOKEN_ESTIMATES.pop("wordy")


VARIANTS = [{"name": "baseline"}, {"name": "wordy", "config": {"classifier": "wordy"}}]


def _evaluations() -> int:
    with duckdb.connect("warehouse.duckdb", read_only=True) as conn:
        row = conn.execute("SELECT count(*) FROM evaluations").fetchone()
    assert row is not None
    return int(row[0])


def test_above_the_limit_nothing_is_written_without_a_yes(
    small_case: str, wordy_classifier: str
) -> None:
    before = _evaluations()
    with pytest.raises(TokenConfirmationNeeded) as refused:
        api.start_holdout_eval(
            small_case, VARIANTS, api.HoldoutOptions(sample_size=200), register_only=True
        )
    # 200 records x (0 for knn-vote + 3,000 for wordy) = 600,000 > 400,000.
    assert refused.value.estimate.total_tokens == 600_000 > TOKEN_CONFIRMATION_LIMIT
    assert str(refused.value).startswith("tokens=600,000: the estimate is above the limit")
    assert _evaluations() == before
    started = api.start_holdout_eval(
        small_case,
        VARIANTS,
        api.HoldoutOptions(sample_size=200, confirm_tokens=True),
        register_only=True,
    )
    assert started.estimated_tokens == 600_000
    assert _evaluations() == before + 1


def test_below_the_limit_no_confirmation_is_needed(small_case: str, wordy_classifier: str) -> None:
    # 100 x 3,000 = 300,000: under the limit.
    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=100), register_only=True
    )
    assert started.estimated_tokens == 300_000


def test_the_cli_refuses_a_non_interactive_run_above_the_limit_without_yes(
    small_case: str, wordy_classifier: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.cli.main import main

    variants = tmp_path / "variants.json"
    variants.write_text(json.dumps(VARIANTS))
    argv = ["eval", "holdout", small_case, "--variants-file", str(variants), "--no-launch"]
    capsys.readouterr()
    assert main([*argv, "--sample-size", "200"]) == 2  # stdin is not a terminal under pytest
    _, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and "confirm with --yes" in err
    assert main([*argv, "--sample-size", "200", "--yes"]) == 0
