import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.classify_config import ClassifyConfig, parse_config
from eval_pipelines.core.holdout.grouping_settings import parse_grouping
from eval_pipelines.core.holdout.variants import parse_variants


def test_grouping_resolution():
    assert parse_grouping(None, None, None).to_json() == {
        "mode": "nearDuplicate",
        "threshold": 0.98,
    }
    assert parse_grouping(None, None, "base").to_json() == {"mode": "field", "field": "base"}
    assert parse_grouping("nearDuplicate", 1.0, None).threshold == 1.0
    assert parse_grouping("none", None, None).to_json() == {"mode": "none"}
    with pytest.raises(InputError, match="needs a groupField"):
        parse_grouping("field", None, None)
    with pytest.raises(InputError, match="nearDuplicate only"):
        parse_grouping("none", 0.9, None)
    with pytest.raises(InputError, match="above 0 and at most 1"):
        parse_grouping(None, float("nan"), None)


def _variants(raw, shared=None):
    return parse_variants(
        raw,
        shared_config=shared or ClassifyConfig(),
        pinned_target_depth=(4,),
        known_memo_ids={"m_1"},
        max_depth=7,
    )


def test_variants_get_safe_unique_step_keys_and_pinned_depth():
    parsed = _variants(
        [
            {"name": "base.line"},
            {"name": "base-line"},
            {"name": "x", "memo_include": ["m_1"], "config": {"candidates": 3}},
        ]
    )
    assert [v.step_key for v in parsed] == ["base_line", "base_line_2", "x"]
    assert all(v.config.target_depth == (4,) for v in parsed)
    assert parsed[2].config.candidates == 3 and parsed[2].memo_include == ("m_1",)


def test_a_variant_cannot_change_the_pinned_target_depth():
    with pytest.raises(InputError) as error:
        _variants([{"name": "a", "config": {"targetDepth": [5]}}])
    assert error.value.field == "variants[0].config.targetDepth"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"strategy": "best"}, "config.strategy"),
        ({"candidates": 0}, "config.candidates"),
        ({"candidates": True}, "config.candidates"),
        ({"declineBelow": 2}, "config.declineBelow"),
        ({"autoAbove": 0.1, "declineBelow": 0.5}, "config.autoAbove"),
        ({"llmLevel": 3}, "config.llmLevel"),
        ({"targetDepth": []}, "config.targetDepth"),
    ],
)
def test_bad_config_values(raw, field):
    with pytest.raises(InputError) as error:
        parse_config(raw, where="config", max_depth=7)
    assert error.value.field == field


@pytest.mark.parametrize(
    "name",
    [
        "a\nb",  # a newline
        "baseline\n",
        "x'; DROP TABLE variant_runs; --",  # SQL punctuation
        'say "hi"',
        "k-5 (fewer)",
        "base line",  # a space: names are one token, like case and memo ids
        "-leading-dash",
        "a|b",  # a pipe breaks the markdown report's tables
        "x" * 65,
    ],
)
def test_variant_names_follow_the_one_name_pattern(name):
    with pytest.raises(InputError) as error:
        _variants([{"name": name}])
    assert error.value.field == "variants[0].name"
    assert "1-64 letters, digits, '_', '.' or '-'" in str(error.value)


def test_the_number_of_variants_is_bounded():
    from eval_pipelines.core.holdout.variants import VARIANTS_MAX

    assert len(_variants([{"name": f"v{i}"} for i in range(VARIANTS_MAX)])) == VARIANTS_MAX
    with pytest.raises(InputError) as error:
        _variants([{"name": f"v{i}"} for i in range(VARIANTS_MAX + 1)])
    assert error.value.field == "variants"
    assert f"at most {VARIANTS_MAX}" in str(error.value)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"options": {"temperature": float("nan")}}, "config.options.temperature"),
        ({"options": {"weights": [1.0, float("inf")]}}, "config.options.weights[1]"),
        ({"declineBelow": float("nan")}, "config.declineBelow"),
        ({"autoAbove": float("inf")}, "config.autoAbove"),
    ],
)
def test_non_finite_config_numbers_are_refused(raw, field):
    with pytest.raises(InputError) as error:
        parse_config(raw, where="config", max_depth=7)
    assert error.value.field == field
    assert "finite" in str(error.value) or "[0, 1]" in str(error.value)


def test_a_config_nested_past_the_document_bound_is_refused():
    # What a Python caller can pass that no file reader would: options nested 5,000 deep
    # (stored as JSON, they ended in a RecursionError).
    options: dict = {}
    inner = options
    for _ in range(5_000):
        inner["x"] = {}
        inner = inner["x"]
    with pytest.raises(InputError, match="nests deeper than 64 levels") as error:
        parse_config({"options": options}, where="config", max_depth=7)
    assert error.value.field == "config"


@pytest.mark.parametrize("currency", ["usd", "US", "USDT", 840, ""])
def test_a_price_table_currency_is_three_upper_case_letters(currency):
    raw = {"classifier": "chat", "prices": {"m": {"input": 1, "output": 2}}, "currency": currency}
    with pytest.raises(InputError) as error:
        parse_config(raw, where="variants[1].config", max_depth=7)
    assert error.value.field == "variants[1].config.currency"
    assert "3 upper-case letters" in str(error.value)
    assert parse_config({**raw, "currency": "EUR"}, where="c", max_depth=7).currency == "EUR"


def test_a_currency_is_refused_on_a_classifier_without_prices():
    with pytest.raises(InputError) as error:
        parse_config({"currency": "USD"}, where="config", max_depth=7)
    assert error.value.field == "config.currency"
    assert "applies to classifier 'chat' only" in str(error.value)
