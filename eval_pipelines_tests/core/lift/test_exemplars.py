"""The exemplar path is arm-typed: holdout facts cannot be stored, asked for or silently dropped."""

import subprocess
import sys
import textwrap

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.arms import (
    ExposureArm,
    HoldoutFactNotRetrievableError,
    TeachingArm,
    teaching_arm,
)
from eval_pipelines.core.lift.exemplars import ExemplarIndex

NON_TEACHING = [
    ExposureArm.HOLDOUT,
    ExposureArm.LEVER_HOLDOUT,
    "holdout",
    "lever_holdout",
]


def test_teaching_arms_cannot_represent_the_holdouts():
    assert {arm.value for arm in TeachingArm} == {"treated", "pre_lever", "imported"}
    for value in ("holdout", "lever_holdout"):
        with pytest.raises(ValueError):
            TeachingArm(value)
    assert not issubclass(TeachingArm, ExposureArm)
    assert not issubclass(ExposureArm, TeachingArm)


@pytest.mark.parametrize("arm", ["treated", "pre_lever", "imported"])
def test_teaching_arm_converts_the_teaching_arms(arm):
    for given in (arm, ExposureArm(arm), TeachingArm(arm)):
        converted = teaching_arm(given)
        assert type(converted) is TeachingArm
        assert converted.value == arm


@pytest.mark.parametrize("arm", NON_TEACHING)
def test_teaching_arm_fails_closed_on_the_holdouts(arm):
    with pytest.raises(HoldoutFactNotRetrievableError, match="not a teaching arm"):
        teaching_arm(arm)


def test_teaching_arm_refuses_what_is_not_an_arm():
    with pytest.raises(InputError):
        teaching_arm("control")


@pytest.mark.parametrize("arm", NON_TEACHING)
def test_a_holdout_row_cannot_enter_the_index(arm):
    index: ExemplarIndex[str] = ExemplarIndex()
    with pytest.raises(HoldoutFactNotRetrievableError):
        index.add(arm, "a fact from the holdout")  # type: ignore[arg-type]
    assert len(index) == 0
    assert index.arms() == frozenset()
    with pytest.raises(HoldoutFactNotRetrievableError):
        index.exemplars(arm)  # type: ignore[arg-type]


def test_only_teaching_arm_instances_are_keys():
    # An ExposureArm or a plain string equal to a teaching arm is still refused: conversion
    # goes through teaching_arm(), the one place that decides.
    index: ExemplarIndex[str] = ExemplarIndex()
    for arm in (ExposureArm.TREATED, "treated", None, 3):
        with pytest.raises(HoldoutFactNotRetrievableError):
            index.add(arm, "x")  # type: ignore[arg-type]
    assert len(index) == 0


def test_the_index_groups_exemplars_by_teaching_arm():
    index: ExemplarIndex[str] = ExemplarIndex()
    index.add(TeachingArm.TREATED, "t1")
    index.add(teaching_arm("imported"), "i1")
    index.add(TeachingArm.TREATED, "t2")
    assert len(index) == 3
    assert index.arms() == frozenset({TeachingArm.TREATED, TeachingArm.IMPORTED})
    assert index.exemplars(TeachingArm.TREATED) == ("t1", "t2")
    assert index.exemplars(TeachingArm.PRE_LEVER) == ()
    assert repr(index) == "ExemplarIndex(treated=2, imported=1)"


@pytest.mark.exhaustive
def test_a_type_checker_rejects_an_exposure_arm(tmp_path):
    snippet = tmp_path / "leak.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from eval_pipelines.core.lift.arms import ExposureArm, TeachingArm
            from eval_pipelines.core.lift.exemplars import ExemplarIndex

            index: ExemplarIndex[str] = ExemplarIndex()
            index.add(TeachingArm.TREATED, "fine")
            index.add(ExposureArm.HOLDOUT, "leak")
            index.exemplars("lever_holdout")
            """
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--cache-dir=/dev/null",
            "--follow-imports=silent",
            str(snippet),
        ],
        capture_output=True,
        text=True,
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["7", "8"], out.stdout
    assert all('expected "TeachingArm"' in line for line in errors), out.stdout
