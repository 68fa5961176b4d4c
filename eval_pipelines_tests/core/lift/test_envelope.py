"""The execution-envelope rule of a cost claim: every contrasted row logs every element, and
the arms agree on each one the lever does not declare it changes (the same set of values)."""

import polars as pl
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.envelope import (
    ELIGIBLE,
    ENVELOPE,
    envelope_eligibility,
    parse_lever_changes,
)

SAME = {
    "model": "small-1",
    "provider": "acme",
    "tools": "sha256:9f2c",
    "response_format": "json_schema",
    "generation_params": "temperature-zero",
    "streaming": False,
    "provider_policy": "zdr",
}


def rows(n=3, **changes):
    return pl.DataFrame([{**SAME, **changes}] * n)


def test_the_same_envelope_is_eligible():
    assert envelope_eligibility(rows(), rows(5)) == ELIGIBLE


@pytest.mark.parametrize("element", ENVELOPE)
def test_a_row_without_an_element_is_incomplete(element):
    treated = pl.concat([rows(2), rows(1, **{element: None})], how="vertical_relaxed")
    result = envelope_eligibility(treated, rows())
    assert not result.eligible
    assert (result.reason, result.element) == (f"envelope_incomplete: {element}", element)
    assert "1 of 3 treated rows and 0 of 3 lever_holdout rows" in result.detail


def test_a_missing_column_is_incomplete_too():
    assert envelope_eligibility(rows().drop("tools"), rows()).reason == "envelope_incomplete: tools"


@pytest.mark.parametrize("element", ENVELOPE)
def test_arms_that_differ_in_an_element_mismatch(element):
    other = True if element == "streaming" else "other"
    result = envelope_eligibility(rows(**{element: other}), rows())
    assert (result.reason, result.element) == (f"envelope_mismatch: {element}", element)
    # Declared by the lever, the same difference is allowed.
    assert envelope_eligibility(rows(**{element: other}), rows(), lever_changes=[element]).eligible


def test_the_first_element_in_envelope_order_is_named():
    result = envelope_eligibility(rows(tools="none", provider_policy="p2"), rows())
    assert result.reason == "envelope_mismatch: tools"
    # Incompleteness comes before a mismatch.
    result = envelope_eligibility(rows(tools="none", provider_policy=None), rows())
    assert result.reason == "envelope_incomplete: provider_policy"


def test_agree_means_the_same_set_of_values():
    # Both arms log two models, in other proportions: the same set, eligible.
    treated = pl.concat([rows(5), rows(1, model="large-2")])
    control = pl.concat([rows(1), rows(5, model="large-2")])
    assert envelope_eligibility(treated, control).eligible
    # One arm logs a value the other never does: mismatch, the value named.
    result = envelope_eligibility(treated, rows())
    assert result.reason == "envelope_mismatch: model"
    assert "only treated: large-2" in result.detail


def test_an_empty_arm_is_only_checked_for_completeness():
    assert envelope_eligibility(rows(), rows(0)).eligible
    assert envelope_eligibility(rows(model=None), rows(0)).reason == "envelope_incomplete: model"


def test_lever_changes_are_parsed_in_envelope_order():
    assert parse_lever_changes("provider,model") == ("model", "provider")
    assert parse_lever_changes(" tools , ") == ("tools",)
    assert parse_lever_changes(None) == () == parse_lever_changes("")
    with pytest.raises(InputError, match="lever_changes='price': must name envelope elements"):
        parse_lever_changes("model,price")
    with pytest.raises(InputError, match="lever_changes='price'"):
        envelope_eligibility(rows(), rows(), lever_changes=["price"])
