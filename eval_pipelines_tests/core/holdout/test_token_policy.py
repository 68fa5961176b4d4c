"""The token-confirmation policy (core.holdout.token_policy) and the rules chat variants add
(core.holdout.chat_variants), on specs built in memory: no warehouse, no endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout import classify
from eval_pipelines.core.holdout.chat_variants import chat_estimates, chat_variants_checked
from eval_pipelines.core.holdout.spec import (
    CaseContext,
    HoldoutOptions,
    HoldoutSpec,
    parse_holdout_request,
)
from eval_pipelines.core.holdout.token_policy import (
    TOKEN_CONFIRMATION_LIMIT,
    TokenConfirmationNeeded,
    check_token_budget,
    estimate_tokens,
)


def _case() -> CaseContext:
    """The case the specs are made for (the classifiers registered at the time of the call)."""
    return CaseContext(
        case_id="c",
        records_version="r1",
        tree_version="t1",
        max_depth=2,
        target_depth=(2,),
        metadata_columns=(),
        memo={"m_1": ("active", {"id": "m_1", "instruction": "Prefer the specific code."})},
        classifiers=(*classify.known_classifiers(), "chat"),
        n_records=1_000,
    )


ENVIRON = {"MY_KEY": "secret"}
CHAT = {
    "classifier": "chat",
    "options": {"model": "m1", "baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "MY_KEY"},
}


@pytest.fixture
def wordy_classifier() -> Iterator[str]:
    """knn-vote registered again under a name that declares 3,000 tokens per record."""
    classify.register_classifier("wordy", classify.knn_vote, tokens_per_record=3000)
    yield "wordy"
    classify._REGISTRY.pop("wordy")
    classify._TOKEN_ESTIMATES.pop("wordy")


def _spec(variants: list[Any], **options: Any) -> HoldoutSpec:
    return parse_holdout_request(variants, HoldoutOptions(**options), case=_case(), sequence=1)


def test_the_estimate_is_the_sample_times_each_classifiers_tokens_per_record(
    wordy_classifier: str,
) -> None:
    spec = _spec(
        [{"name": "baseline"}, {"name": "wordy", "config": {"classifier": wordy_classifier}}],
        sample_size=200,
    )
    estimate = estimate_tokens(spec)
    assert [(v.name, v.records, v.tokens_per_record, v.tokens) for v in estimate.variants] == [
        ("baseline", 200, 0, 0),
        ("wordy", 200, 3000, 600_000),
    ]
    assert estimate.total_tokens == 600_000


def test_above_the_limit_only_a_confirmation_lets_it_through(wordy_classifier: str) -> None:
    variants = [{"name": "baseline"}, {"name": "wordy", "config": {"classifier": "wordy"}}]
    above = estimate_tokens(_spec(variants, sample_size=200))
    with pytest.raises(TokenConfirmationNeeded) as refused:
        check_token_budget(above, confirmed=False)
    assert refused.value.estimate is above
    assert str(refused.value) == (
        "tokens=600,000: the estimate is above the limit of 400,000 tokens (baseline: 200 x 0, "
        "wordy: 200 x 3,000); confirm with `confirm_tokens`"
    )
    check_token_budget(above, confirmed=True)
    at_most = estimate_tokens(_spec(variants, sample_size=100))
    assert at_most.total_tokens == 300_000 <= TOKEN_CONFIRMATION_LIMIT
    check_token_budget(at_most, confirmed=False)


def test_a_chat_variants_estimate_comes_from_the_spec() -> None:
    spec = _spec([{"name": "baseline"}, {"name": "chat", "config": CHAT}], sample_size=50)
    stored = {"records": 50, "tokens": 5_000, "calls": 50}
    (_, chat) = estimate_tokens(
        HoldoutSpec(**{**vars(spec), "token_estimate": {"chat": stored}})
    ).variants
    assert (chat.records, chat.tokens_per_record, chat.tokens, chat.chat) == (
        50,
        100,
        5_000,
        stored,
    )


def test_trials_are_set_on_every_chat_variant_and_only_with_one() -> None:
    spec = _spec([{"name": "baseline"}, {"name": "chat", "config": CHAT}])
    checked, settings = chat_variants_checked(spec, 3, ENVIRON)
    assert [v.config.trials for v in checked.variants] == [None, 3]
    assert list(settings) == ["chat"] and settings["chat"].trials == 3
    for bad in (0, 21, True, 2.5):
        with pytest.raises(InputError) as refused:
            chat_variants_checked(spec, bad, ENVIRON)
        assert refused.value.field == "trials"
    knn_only = _spec([{"name": "baseline"}])
    assert chat_variants_checked(knn_only, None, ENVIRON) == (knn_only, {})
    with pytest.raises(InputError, match="has no chat variant"):
        chat_variants_checked(knn_only, 2, ENVIRON)


@pytest.mark.parametrize(("option", "field"), [("aa", "aa"), ("leakage_check", "leakageCheck")])
def test_a_chat_baseline_takes_no_aa_arm_nor_leakage_check(option: str, field: str) -> None:
    spec = _spec([{"name": "chat", "config": CHAT}], **{option: True})
    with pytest.raises(InputError) as refused:
        chat_variants_checked(spec, None, ENVIRON)
    assert refused.value.field == field


def test_chat_settings_are_checked_against_the_environment_given() -> None:
    spec = _spec([{"name": "baseline"}, {"name": "chat", "config": CHAT}])
    with pytest.raises(InputError) as refused:
        chat_variants_checked(spec, None, {})
    assert refused.value.field == "variants[1].config.options.apiKeyEnv"


def test_the_chat_estimate_is_made_from_the_prompts_of_the_first_sampled_rows() -> None:
    spec = _spec([{"name": "baseline"}, {"name": "chat", "config": CHAT}], sample_size=10)
    spec, settings = chat_variants_checked(spec, 2, ENVIRON)
    keys = [f"k{i}" for i in range(10)]
    rows = {key: ("x" * 40, "A1" if i % 2 else "B2") for i, key in enumerate(keys)}
    estimates = chat_estimates(spec, settings, keys, rows, {"A1": "Asthma"})
    assert list(estimates) == ["chat"]
    chat = estimates["chat"]
    assert (chat["records"], chat["trials"], chat["calls"], chat["sampledRows"]) == (10, 2, 20, 5)
    assert chat["tokens"] == 20 * (chat["inputTokensPerCall"] + chat["outputTokensPerCall"])
    longer = chat_estimates(
        spec, settings, keys, {k: ("x" * 400, v[1]) for k, v in rows.items()}, {}
    )
    # 360 more characters a prompt, 4 to a token (each call's count rounded up).
    assert 89 <= longer["chat"]["inputTokensPerCall"] - chat["inputTokensPerCall"] <= 90
