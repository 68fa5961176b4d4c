"""The power planner (`eval plan`): the planned n comes from the same formula as the reports'
minimum detectable effect, and is checked against statsmodels' normal power functions."""

from __future__ import annotations

import json
import math

import pytest

from eval_pipelines import api
from eval_pipelines.api.plan import EvalDiscordance, StatedDiscordance, plan_comparison
from eval_pipelines.core.errors import InputError


def test_a_stated_discordance_gives_the_statsmodels_sample_size(workdir: object) -> None:
    from statsmodels.stats.power import normal_sample_size_one_tail

    plan = plan_comparison("any", difference=0.02, discordance=0.10)
    # Oracle: the McNemar design as a one-sample normal test of the per-record difference
    # (mean d, variance q under H0 and q - d^2 under H1), two-sided alpha 0.05, power 0.8:
    # statsmodels' normal_sample_size_one_tail with std_null sqrt(q), std_alternative
    # sqrt(q - d^2), alpha/2. Equal after rounding up.
    expected = normal_sample_size_one_tail(
        0.02, 0.8, 0.025, std_null=math.sqrt(0.10), std_alternative=math.sqrt(0.10 - 0.02**2)
    )
    assert plan.records_needed == math.ceil(expected)
    assert plan.source == StatedDiscordance()


def test_the_discordance_of_a_previous_evaluation(small_case: str) -> None:
    variants = [{"name": "baseline"}, {"name": "k5", "config": {"candidates": 5}}]
    eval_id = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=80, seed=4), wait=True
    ).eval_id
    report = api.get_holdout_eval(small_case, eval_id).report
    level = report["comparisons"][0]["levels"]["3"]
    discordance = (level["newlyRight"] + level["newlyWrong"]) / level["pairs"]
    plan = plan_comparison(small_case, difference=0.05, from_eval=eval_id)
    assert plan.discordance == round(discordance, 6)
    assert plan.source == EvalDiscordance(eval_id, "k5 vs baseline", 3, level["pairs"])
    assert plan.to_json()["source"] == {
        "evalId": eval_id,
        "comparison": "k5 vs baseline",
        "level": 3,
        "pairs": level["pairs"],
    }
    with pytest.raises(InputError) as refused:
        plan_comparison(small_case, difference=0.05, from_eval=eval_id, level=0)
    assert refused.value.field == "level"
    from eval_pipelines.core.stats.power import minimum_detectable_effect

    mde = minimum_detectable_effect(level["pairs"], discordance)
    expected_mde = None if math.isinf(mde) else round(mde, 6)
    assert plan.minimum_detectable_effect_at_eval_n == expected_mde
    assert plan.to_json()["minimumDetectableEffectAtEvalN"] == expected_mde


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"difference": 0.02}, "discordance"),
        ({"difference": 0.02, "discordance": 0.1, "from_eval": "x"}, "discordance"),
        ({"difference": 0.3, "discordance": 0.1}, "difference"),
        ({"difference": 0.0, "discordance": 0.1}, "difference"),
        ({"difference": float("nan"), "discordance": 0.1}, "difference"),
        ({"difference": 0.02, "discordance": 0.0}, "discordance"),
    ],
)
def test_bad_plans_are_refused_naming_the_parameter(
    workdir: object, kwargs: dict, field: str
) -> None:
    with pytest.raises(InputError) as refused:
        plan_comparison("any", **kwargs)
    assert refused.value.field == field


def test_the_cli_prints_the_plan_document_and_shows_flags(
    workdir: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.cli.main import main

    argv = ["eval", "plan", "any", "--difference", "0.02", "--discordance", "0.1", "--json"]
    assert main(argv) == 0
    # The document as the planner always printed it: key order and no MDE for a stated share.
    assert (
        capsys.readouterr().out
        == json.dumps(
            {
                "caseId": "any",
                "difference": 0.02,
                "discordance": 0.1,
                "alpha": 0.05,
                "power": 0.8,
                "recordsNeeded": plan_comparison(
                    "any", difference=0.02, discordance=0.1
                ).records_needed,
                "source": {"stated": True},
                "method": "McNemar, normal approximation (Connor 1987); the exact test reported "
                "beside each comparison reaches about 0.77 power at this n",
            },
            indent=2,
        )
        + "\n"
    )
    assert main(argv[:-1]) == 0
    assert "discordant: " in capsys.readouterr().out
    assert main(["eval", "plan", "any", "--difference", "0.3", "--discordance", "0.1"]) == 2
    # The value is said once (the planner used to repeat "difference=0.3: " after the flag).
    assert capsys.readouterr().err == (
        "error: --difference=0.3: |difference| must not exceed discordance=0.1 "
        "(|p01 - p10| <= p01 + p10)\n"
    )
