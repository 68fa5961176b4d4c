import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.spec import (
    ClassifyConfig,
    parse_config,
    parse_grouping,
    parse_variants,
)


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
            {"name": "base line"},
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
