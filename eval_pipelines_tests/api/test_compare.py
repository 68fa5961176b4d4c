"""Comparing two evaluations (000's evals:compare) and the memo A/B shortcut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines import api
from eval_pipelines.api.compare import ChangedBesidesVariant
from eval_pipelines.core.errors import ConflictError, InputError


def _start(case: str, **kwargs) -> str:
    variants = kwargs.pop("variants", [{"name": "baseline"}])
    return api.start_holdout_eval(case, variants, api.HoldoutOptions(**kwargs), wait=True).eval_id


class SharedEvaluations:
    """Evaluations of the module's case (``module_small_case``) that several tests compare:
    each is run when a test first asks for it, once per test process. Comparing writes
    nothing, so a test reads what it would have run itself."""

    def __init__(self, case: str) -> None:
        self.case = case
        self._eval_ids: dict[str, str] = {}

    def eval_id(self, **kwargs) -> str:
        key = json.dumps(kwargs, sort_keys=True)
        if key not in self._eval_ids:
            self._eval_ids[key] = _start(self.case, **kwargs)
        return self._eval_ids[key]


@pytest.fixture(scope="module")
def shared(module_small_case: str) -> SharedEvaluations:
    return SharedEvaluations(module_small_case)


def test_compare_two_evaluations_matches_the_in_eval_comparison(shared: SharedEvaluations) -> None:
    both = shared.eval_id(
        sample_size=80,
        seed=4,
        variants=[{"name": "baseline"}, {"name": "k5", "config": {"candidates": 5}}],
    )
    first = shared.eval_id(sample_size=80, seed=4)
    second = shared.eval_id(
        sample_size=80, seed=4, variants=[{"name": "k5", "config": {"candidates": 5}}]
    )
    compared = api.compare_holdout_evals(
        shared.case,
        baseline_eval_id=first,
        candidate_eval_id=second,
        baseline_variant="baseline",
        candidate_variant="k5",
    )
    inside = api.get_holdout_eval(shared.case, both).report["comparisons"][0]["levels"]
    assert compared.levels == inside


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
    shared: SharedEvaluations, other: dict, what: str
) -> None:
    first = shared.eval_id(sample_size=30, seed=4)
    second = shared.eval_id(**({"sample_size": 30, "seed": 4} | other))
    with pytest.raises(ConflictError, match=what):
        api.compare_holdout_evals(
            shared.case,
            baseline_eval_id=first,
            candidate_eval_id=second,
            baseline_variant="baseline",
            candidate_variant="baseline",
        )


def test_compare_names_an_unknown_variant(shared: SharedEvaluations) -> None:
    first = shared.eval_id(sample_size=30, seed=4)
    with pytest.raises(InputError) as error:
        api.compare_holdout_evals(
            shared.case,
            baseline_eval_id=first,
            candidate_eval_id=first,
            baseline_variant="baseline",
            candidate_variant="nope",
        )
    assert error.value.field == "candidate_variant"


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
        small_case, "m_asthma", api.HoldoutOptions(sample_size=50, seed=1), wait=True
    )
    report = api.get_holdout_eval(small_case, started.eval_id).report
    assert [v["name"] for v in report["variants"]] == ["active-memo", "with-m_asthma"]
    assert report["variants"][1]["memoInclude"] == ["m_asthma"]
    assert api.list_memo_entries(small_case)[0].status == "proposed"
    # The A/B changed nothing: an evaluation started afterwards runs the same memo version.
    later = api.get_holdout_eval(small_case, _start(small_case, sample_size=20, seed=1)).report
    assert later["variants"][0]["memoVersion"] == report["variants"][0]["memoVersion"] == "empty"
    api.approve_memo_entry(small_case, "m_asthma", by="lead")
    with pytest.raises(InputError, match="already active"):
        api.evaluate_memo_entry(small_case, "m_asthma", wait=True)


def test_compare_refuses_a_memo_change_unless_allowed_and_then_says_so(
    small_case: str, tmp_path: Path
) -> None:
    before = _start(small_case, sample_size=30, seed=4)
    entry = tmp_path / "entry.yaml"
    entry.write_text(
        "id: m_asthma\ninstruction: Asthma is J45.909 here.\n"
        "when: {keywords: [asthma]}\nthen: {assign: J45.909}\n"
    )
    api.add_memo_entry(small_case, entry)
    approved = api.approve_memo_entry(small_case, "m_asthma", by="lead")
    after = _start(small_case, sample_size=30, seed=4)
    arguments = {
        "baseline_eval_id": before,
        "candidate_eval_id": after,
        "baseline_variant": "baseline",
        "candidate_variant": "baseline",
    }
    with pytest.raises(ConflictError, match="memo version differs") as refused:
        api.compare_holdout_evals(small_case, **arguments)
    assert "pass `allow_memo_change` to compare anyway" in str(refused.value)
    allowed = api.compare_holdout_evals(small_case, allow_memo_change=True, **arguments)
    assert allowed.changed_besides_variant == (
        ChangedBesidesVariant("memo version", "empty", approved.memo_version),
    )


def test_compare_refuses_the_same_variant_with_another_config(shared: SharedEvaluations) -> None:
    first = shared.eval_id(sample_size=30, seed=4)
    second = shared.eval_id(
        sample_size=30, seed=4, variants=[{"name": "baseline", "config": {"candidates": 5}}]
    )
    arguments = {
        "baseline_eval_id": first,
        "candidate_eval_id": second,
        "baseline_variant": "baseline",
        "candidate_variant": "baseline",
    }
    with pytest.raises(ConflictError, match="config differs"):
        api.compare_holdout_evals(shared.case, **arguments)
    allowed = api.compare_holdout_evals(shared.case, allow_config_change=True, **arguments)
    assert allowed.changed_besides_variant == (
        ChangedBesidesVariant("config", {"candidates": 20}, {"candidates": 5}),
    )


def test_cli_compare_refuses_a_memo_change_and_says_so_first_when_allowed(
    small_case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines.cli.main import main

    before = _start(small_case, sample_size=20, seed=2)
    entry = tmp_path / "entry.yaml"
    entry.write_text(
        "id: m_x\ninstruction: x\nwhen: {keywords: [asthma]}\nthen: {assign: J45.909}\n"
    )
    api.add_memo_entry(small_case, entry)
    api.approve_memo_entry(small_case, "m_x", by="lead")
    after = _start(small_case, sample_size=20, seed=2)
    argv = ["eval", "compare", small_case, before, after]
    argv += ["--baseline-variant", "baseline", "--candidate-variant", "baseline"]
    capsys.readouterr()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "memo version differs" in err
    assert "pass --allow-memo-change to compare anyway" in err  # the API's parameter, as a flag
    assert main([*argv, "--allow-memo-change", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: the memo version changed besides the variant (empty -> ")
    assert json.loads(out)["changedBesidesVariant"][0]["what"] == "memo version"


def test_cli_compare_accepts_000s_own_memo_ab_within_one_evaluation(
    small_case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """000's example: `baseline` against `with-rule` of one evaluation. The variants differ by
    their memo_include, which is the variant; the evaluation's active memo is the same for both,
    so nothing changed besides the variant."""
    from eval_pipelines.cli.main import main

    entry = tmp_path / "entry.yaml"
    entry.write_text(
        "id: m_88\ninstruction: x\nwhen: {keywords: [asthma]}\nthen: {assign: J45.909}\n"
    )
    api.add_memo_entry(small_case, entry)
    both = _start(
        small_case,
        sample_size=20,
        seed=2,
        variants=[{"name": "baseline"}, {"name": "with-rule", "memo_include": ["m_88"]}],
    )
    argv = ["eval", "compare", small_case, both, both]
    argv += ["--baseline-variant", "baseline", "--candidate-variant", "with-rule"]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    compared = json.loads(out)
    assert compared["changedBesidesVariant"] == []
    inside = api.get_holdout_eval(small_case, both).report["comparisons"][0]["levels"]
    assert compared["levels"] == inside
    # Without --json, markdown as `eval holdout --wait` prints it (it printed only JSON).
    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"# `{both} with-rule` vs `{both} baseline`\n")
    rows = [line for line in shown.splitlines() if line.startswith(f"| {both} baseline |")]
    assert len(rows) == len(inside)
    for depth, level in inside.items():
        assert any(
            f"L{depth}" in row
            and f"| {level['pairs']} | {level['newlyRight']} | " in row
            and f"| {level['verdict']} |" in row
            for row in rows
        ), depth
    # With the flag, nothing is said either: the memo did not change besides the variant.
    assert main([*argv, "--allow-memo-change"]) == 0
    assert capsys.readouterr().err == ""


def test_compare_the_same_included_variant_across_a_memo_approval_is_refused(
    small_case: str, tmp_path: Path
) -> None:
    """The same variant (same memo_include) in two evaluations whose active memo differs: the
    active memo changed besides the variant, and the refusal names the active memo versions."""
    entry = tmp_path / "entry.yaml"
    entry.write_text(
        "id: m_88\ninstruction: x\nwhen: {keywords: [asthma]}\nthen: {assign: J45.909}\n"
    )
    other = tmp_path / "other.yaml"
    other.write_text(
        "id: m_89\ninstruction: y\nwhen: {keywords: [wheeze]}\nthen: {assign: J45.909}\n"
    )
    api.add_memo_entry(small_case, entry)
    api.add_memo_entry(small_case, other)
    variants = [{"name": "with-rule", "memo_include": ["m_88"]}]
    before = _start(small_case, sample_size=20, seed=2, variants=variants)
    approved = api.approve_memo_entry(small_case, "m_89", by="lead")
    after = _start(small_case, sample_size=20, seed=2, variants=variants)
    arguments = {
        "baseline_eval_id": before,
        "candidate_eval_id": after,
        "baseline_variant": "with-rule",
        "candidate_variant": "with-rule",
    }
    with pytest.raises(ConflictError, match="memo version differs"):
        api.compare_holdout_evals(small_case, **arguments)
    allowed = api.compare_holdout_evals(small_case, allow_memo_change=True, **arguments)
    assert allowed.changed_besides_variant == (
        ChangedBesidesVariant("memo version", "empty", approved.memo_version),
    )


def test_memo_shortcut_with_a_64_character_entry_id(small_case: str, tmp_path: Path) -> None:
    """An entry id may use all 64 characters of a name; 'with-' + it would not fit one, so the
    B variant is named 'with-entry' (its memoInclude names the entry)."""
    entry_id = "m_" + "x" * 62
    entry = tmp_path / "entry.yaml"
    entry.write_text(
        f"id: {entry_id}\ninstruction: x\nwhen: {{keywords: [asthma]}}\nthen: {{assign: J45.909}}\n"
    )
    api.add_memo_entry(small_case, entry)
    started = api.evaluate_memo_entry(
        small_case, entry_id, api.HoldoutOptions(sample_size=10, seed=1), register_only=True
    )
    spec_variants = api.get_holdout_eval(small_case, started.eval_id).variants
    assert [v.name for v in spec_variants] == ["active-memo", "with-entry"]
