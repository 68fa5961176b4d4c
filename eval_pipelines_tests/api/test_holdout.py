"""Holdout evaluations through the Python API, on real ICD-10-CM records, a real DuckDB file
and a real Dagster instance (runs executed in-process)."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus
from scipy.stats import bootstrap
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from eval_pipelines import api
from eval_pipelines.core.errors import InputError, NotFoundError

VARIANTS = [{"name": "baseline"}, {"name": "five-nearest", "config": {"candidates": 5}}]


def _count(table: str) -> int:
    with duckdb.connect(str(Path("warehouse.duckdb").absolute()), read_only=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


def test_report_statistics_match_independent_oracles(small_case: str) -> None:
    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=150, seed=11), wait=True
    )
    assert started.status == "complete"
    status = api.get_holdout_eval(small_case, started.eval_id)
    assert status.status == "complete"
    report = status.report
    rows = api.eval_rows(small_case, started.eval_id)
    assert len(rows) == 2 * 150

    for variant in report["variants"]:
        mine = [r for r in rows if r.variant == variant["name"]]
        for depth, level in variant["score"]["levels"].items():
            scored = [r for r in mine if depth in r.correct]
            k = sum(r.correct[depth] for r in scored)
            accuracy = level["accuracy"]
            assert (accuracy["k"], accuracy["n"]) == (k, len(scored))
            if accuracy["n"] >= 10:
                # expected from statsmodels proportion_confint(method="wilson"); the report
                # rounds to 6 decimals, hence the tolerance.
                low, high = proportion_confint(k, len(scored), alpha=0.05, method="wilson")
                assert accuracy["interval"] == pytest.approx([low, high], abs=1e-6)
                assert accuracy["value"] == pytest.approx(k / len(scored), abs=1e-6)
        declined = sum(r.route == "declined" for r in mine)
        assert variant["score"]["declineRate"]["k"] == declined
        # Diagnostics: every row wrong at the shallowest target depth is an error or a decline.
        target = str(min(report["targetDepth"]))
        severity = report["diagnostics"]["variants"][variant["name"]]["errorSeverity"]
        wrong = sum(not r.correct[target] for r in mine if target in r.correct)
        assert severity["errors"] + severity["declined"] == wrong

    (comparison,) = report["comparisons"]
    base = {r.record_key: r for r in rows if r.variant == "baseline"}
    cand = {r.record_key: r for r in rows if r.variant == "five-nearest"}
    for depth, level in comparison["levels"].items():
        keys = [k for k in base if depth in base[k].correct]
        b = sum(base[k].correct[depth] and not cand[k].correct[depth] for k in keys)
        c = sum(not base[k].correct[depth] and cand[k].correct[depth] for k in keys)
        both = sum(base[k].correct[depth] and cand[k].correct[depth] for k in keys)
        assert (level["newlyWrong"], level["newlyRight"], level["bothRight"]) == (b, c, both)
        # expected from statsmodels mcnemar(exact=True); same closed form, so 1e-12
        table = [[both, b], [c, len(keys) - both - b - c]]
        assert level["mcnemarP"] == pytest.approx(mcnemar(table, exact=True).pvalue, abs=1e-12)
        # expected from scipy.stats.bootstrap(paired, percentile) over the clusters in the
        # rows, with the report's seed (evaluation seed, level): the same resampling done by
        # a general implementation; the report rounds to 6 decimals, hence 1e-6.
        if len(keys) >= 20:
            # Clusters numbered in order of first appearance over the records sorted by key,
            # as the report numbers them.
            ordered = sorted(keys)
            first_seen: dict[int, int] = {}
            codes = np.array(
                [first_seen.setdefault(base[k].cluster, len(first_seen)) for k in ordered]
            )
            diffs = [int(cand[k].correct[depth]) - int(base[k].correct[depth]) for k in ordered]
            sums = np.bincount(codes, weights=diffs)
            sizes = np.bincount(codes).astype(float)
            expected = bootstrap(
                (sums, sizes),
                lambda s, m, axis=-1: s.sum(axis=axis) / m.sum(axis=axis),
                paired=True,
                vectorized=True,
                method="percentile",
                n_resamples=level["resamples"],
                rng=np.random.default_rng([11, int(depth)]),
            ).confidence_interval
            assert level["clusters"] == sums.size
            assert level["interval"] == pytest.approx([expected.low, expected.high], abs=1e-6)


def test_report_shape_follows_000(small_case: str) -> None:
    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=40, seed=3), wait=True
    )
    report = api.get_holdout_eval(small_case, started.eval_id).report
    assert set(report["sample"]) >= {
        "size",
        "requestedSize",
        "seed",
        "groupField",
        "grouping",
        "sampleHash",
        "excludedRecords",
    }
    assert report["sample"]["grouping"]["mode"] == "nearDuplicate"
    assert report["sample"]["grouping"]["threshold"] == 0.98
    assert "groupMembersExcluded" in report["sample"]["grouping"]
    assert [v["name"] for v in report["variants"]] == ["baseline", "five-nearest"]
    for variant in report["variants"]:
        assert set(variant) >= {"name", "score", "failedRows", "usage", "leaveOut"}
        assert set(variant["score"]["targetDepth"]) == {"3", "4"}
        assert set(variant["score"]["routing"]) == {"auto", "review", "declined"}
    assert "agreement with past filing" in report["note"]
    row = api.eval_rows(small_case, started.eval_id, variant="baseline")[0]
    assert set(row.to_json()) >= {
        "recordKey",
        "variant",
        "label",
        "prediction",
        "confidence",
        "route",
        "correct",
        "candidates",
        "effectiveCandidates",
    }


def test_nearest_routes_on_the_confidence_it_shows_and_is_not_short(
    small_case: str, small_case_files: dict[str, Path]
) -> None:
    """Issue 7, end to end: with ``nearest`` no row is reported short when retrieval returned
    every record asked for (votes are counted apart), every ``auto`` row's confidence is at
    least ``autoAbove``, ``declined`` rows are exactly those whose prediction does not reach
    the shallowest target depth, and the markdown shows every level and each variant's memo
    version and config."""
    variants = [
        {"name": "baseline"},
        {"name": "nearest", "config": {"strategy": "nearest", "candidates": 8}},
    ]
    started = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=120, seed=13), wait=True
    )
    status = api.get_holdout_eval(small_case, started.eval_id)
    report = status.report
    rows = api.eval_rows(small_case, started.eval_id)
    depth_of = dict(pl.read_parquet(small_case_files["tree"]).select("code", "level").iter_rows())
    for variant in report["variants"]:
        mine = [r for r in rows if r.variant == variant["name"]]
        requested = variant["config"]["candidates"]
        short = sum(r.effective_candidates < requested for r in mine)
        assert variant["leaveOut"]["requestedCandidates"] == requested
        assert variant["leaveOut"]["rowsShort"] == short
        votes = [sum(c["votes"] for c in r.candidates) for r in mine]
        assert variant["leaveOut"]["votesMin"] == min(votes)
        assert variant["leaveOut"]["votesMean"] == pytest.approx(sum(votes) / len(votes), abs=1e-3)
        auto_above = variant["config"]["autoAbove"]
        for r in mine:
            reaches = r.prediction is not None and depth_of[r.prediction] >= 3
            assert (r.route == "declined") == (not reaches), r
            if r.route == "auto":
                assert r.confidence >= auto_above, r
            if r.route == "review":
                assert r.confidence < auto_above, r
        assert {r.route for r in mine} >= {"auto", "review"}
    nearest = report["variants"][1]
    assert nearest["leaveOut"]["votesMean"] == 1.0
    assert nearest["leaveOut"]["effectiveCandidatesMin"] == 8
    assert "candidates_short" not in [w["code"] for w in report["warnings"]]
    markdown = status.report_markdown
    for level in report["levels"]:
        assert f"| L{level['depth']} " in markdown or f"| **L{level['depth']} " in markdown
    assert "(target)" in markdown
    for variant in report["variants"]:
        assert f"`{variant['memoVersion']}`" in markdown
        assert '"strategy": "' + variant["config"]["strategy"] + '"' in markdown


def test_same_seed_same_sample_and_ungrouped_warns(small_case: str) -> None:
    first = api.start_holdout_eval(
        small_case, VARIANTS[:1], api.HoldoutOptions(sample_size=30, seed=5), wait=True
    )
    second = api.start_holdout_eval(
        small_case,
        VARIANTS[:1],
        api.HoldoutOptions(sample_size=30, seed=5, grouping={"mode": "none"}),
        wait=True,
    )
    third = api.start_holdout_eval(
        small_case, VARIANTS[:1], api.HoldoutOptions(sample_size=30, seed=6), wait=True
    )
    reports = [api.get_holdout_eval(small_case, s.eval_id).report for s in (first, second, third)]
    assert first.eval_id.endswith("-s5") and third.eval_id.endswith("-s6")
    assert reports[0]["sample"]["sampleHash"] == reports[1]["sample"]["sampleHash"]
    assert reports[0]["sample"]["sampleHash"] != reports[2]["sample"]["sampleHash"]
    assert [w["code"] for w in reports[1]["warnings"]] == ["ungrouped"]
    assert "ungrouped" not in [w["code"] for w in reports[0]["warnings"]]


def test_field_grouping_leaves_out_the_whole_group(small_case: str) -> None:
    started = api.start_holdout_eval(
        small_case,
        VARIANTS[:1],
        api.HoldoutOptions(sample_size=60, seed=2, group_field="group_key"),
        wait=True,
    )
    eval_id = started.eval_id
    with duckdb.connect("warehouse.duckdb", read_only=True) as conn:
        wrong = conn.execute(
            "SELECT count(*) FROM leave_out l JOIN records s ON s.record_key = l.sample_key "
            "JOIN records e ON e.record_key = l.excluded_key WHERE l.eval_id = ? AND "
            "json_extract_string(s.metadata, '$.group_key') <> "
            "json_extract_string(e.metadata, '$.group_key')",
            [eval_id],
        ).fetchone()
        expected = conn.execute(
            "SELECT count(*) FROM holdout_samples h JOIN records s ON s.record_key = h.record_key "
            "JOIN records o ON json_extract_string(o.metadata, '$.group_key') = "
            "json_extract_string(s.metadata, '$.group_key') AND o.record_key <> s.record_key "
            "WHERE h.eval_id = ?",
            [eval_id],
        ).fetchone()
        leaked = conn.execute(
            "SELECT count(*) FROM candidates c JOIN leave_out l ON l.eval_id = c.eval_id AND "
            "l.sample_key = c.sample_key AND l.excluded_key = c.evidence_key WHERE c.eval_id = ?",
            [eval_id],
        ).fetchone()
    report = api.get_holdout_eval(small_case, eval_id).report
    assert wrong == (0,)
    assert leaked == (0,)
    assert expected is not None
    assert report["sample"]["grouping"] == {
        "mode": "field",
        "field": "group_key",
        "groupMembersExcluded": expected[0],
    }
    assert report["sample"]["groupField"] == "group_key"


def test_memo_entry_changes_only_the_variant_that_includes_it(
    small_case: str, tmp_path: Path
) -> None:
    entry = tmp_path / "entry.yaml"
    entry.write_text(
        "id: m_otitis\ninstruction: Otitis media goes to H66.9 in this test.\n"
        "when: {keywords: [otitis]}\nthen: {assign: H66.90}\n"
    )
    assert api.add_memo_entry(small_case, entry).status == "proposed"
    variants = [{"name": "baseline"}, {"name": "with-rule", "memo_include": ["m_otitis"]}]
    started = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=300, seed=1), wait=True
    )
    rows = api.eval_rows(small_case, started.eval_id)
    ruled = [r for r in rows if r.variant == "with-rule" and r.memo_applied]
    assert ruled, "the sample should contain otitis records"
    assert all(r.prediction == "H66.90" and r.route == "auto" for r in ruled)
    assert not any(r.memo_applied for r in rows if r.variant == "baseline")
    status = api.get_holdout_eval(small_case, started.eval_id)
    baseline, with_rule = status.report["variants"]
    assert (baseline["memoRules"], with_rule["memoRules"]) == ({}, {"m_otitis": len(ruled)})
    assert f"`m_otitis` {len(ruled)}" in status.report_markdown
    listed = api.list_memo_entries(small_case)
    assert [(e.entry_id, e.status) for e in listed] == [("m_otitis", "proposed")]
    approved = api.approve_memo_entry(small_case, "m_otitis", by="reviewer")
    assert approved.status == "active" and approved.memo_version != "empty"


BAD_STARTS = [
    ({"sample_size": 9}, "sampleSize"),
    ({"sample_size": 5001}, "sampleSize"),
    ({"variants": []}, "variants"),
    ({"variants": [{"name": "a"}, {"name": "a"}]}, "variants[1].name"),
    ({"variants": [{"name": "x" * 65}]}, "variants[0].name"),
    ({"variants": [{"name": "a", "memo_include": ["m_nope"]}]}, "variants[0].memo_include"),
    ({"variants": [{"name": "a", "config": {"candidate": 5}}]}, "variants[0].config.candidate"),
    ({"grouping": {"threshold": 0.0}}, "grouping.threshold"),
    ({"grouping": {"threshold": 1.5}}, "grouping.threshold"),
    ({"grouping": {"mode": "fuzzy"}}, "grouping.mode"),
    ({"grouping": {"mode": "nearDuplicate"}, "group_field": "group_key"}, "groupField"),
    ({"group_field": "no_such_column"}, "groupField"),
    ({"config": {"targetDepth": [9]}}, "config.targetDepth"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_STARTS)
def test_bad_input_names_the_field_and_writes_nothing(
    small_case: str, overrides: dict, field: str
) -> None:
    arguments = {"variants": VARIANTS, "sample_size": 50, "seed": 7} | overrides
    variants = arguments.pop("variants")
    with pytest.raises(InputError) as error:
        api.start_holdout_eval(small_case, variants, api.HoldoutOptions(**arguments), wait=True)
    assert error.value.field == field
    assert _count("evaluations") == 0
    assert DagsterInstance.get().get_dynamic_partitions("holdout_evaluations") == []


def test_unknown_case_is_refused(small_case: str) -> None:
    with pytest.raises(NotFoundError, match="no such case"):
        api.start_holdout_eval("nope", VARIANTS, wait=True)
    assert _count("evaluations") == 0


def test_replacing_the_case_keeps_earlier_evaluations_readable_and_rerunnable(
    small_case: str, small_case_files: dict[str, Path], tmp_path: Path
) -> None:
    done = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=30, seed=4), wait=True
    )
    pending = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20), register_only=True
    )
    before = api.get_holdout_eval(small_case, done.eval_id)
    rows_before = api.eval_rows(small_case, done.eval_id)

    changed = tmp_path / "changed.parquet"
    pl.read_parquet(small_case_files["records"]).head(2000).write_parquet(changed)
    replaced = api.create_case(
        small_case, api.CaseSource(changed, tree_path=small_case_files["tree"]), replace=True
    )
    assert replaced.records_version != before.records_version

    # The finished evaluation still reads: status, rows and compare use its own version.
    after = api.get_holdout_eval(small_case, done.eval_id)
    assert after.status == "complete" and after.report == before.report
    assert api.eval_rows(small_case, done.eval_id) == rows_before
    compared = api.compare_holdout_evals(
        small_case,
        baseline_eval_id=done.eval_id,
        candidate_eval_id=done.eval_id,
        baseline_variant="baseline",
        candidate_variant="five-nearest",
    )
    assert compared.levels == after.report["comparisons"][0]["levels"]
    # An evaluation registered before the replacement runs on the records it pinned.
    api.rerun_holdout_eval(small_case, pending.eval_id, wait=True)
    pinned = api.get_holdout_eval(small_case, pending.eval_id)
    assert pinned.status == "complete"
    assert pinned.report["versions"]["records"] == before.records_version
    assert pinned.report["sample"]["size"] == 20
    # A re-run of the finished one reproduces its report exactly.
    api.rerun_holdout_eval(small_case, done.eval_id, wait=True)
    again = api.get_holdout_eval(small_case, done.eval_id)
    assert again.report_run_id != before.report_run_id
    assert [v["score"] for v in again.report["variants"]] == [
        v["score"] for v in before.report["variants"]
    ]
    assert again.report["comparisons"] == before.report["comparisons"]


def test_a_registered_evaluation_has_no_run_and_says_how_to_start_one(small_case: str) -> None:
    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20), register_only=True
    )
    status = api.get_holdout_eval(small_case, started.eval_id)
    assert (status.status, status.run, status.run_id) == ("registered", None, None)
    with pytest.raises(api.EvalFailed, match="eval rerun"):
        api.wait_for_eval(small_case, started.eval_id, timeout=5)


def test_sample_larger_than_the_case_takes_every_record_and_says_so(small_case: str) -> None:
    started = api.start_holdout_eval(
        small_case,
        VARIANTS[:1],
        api.HoldoutOptions(sample_size=5000, grouping={"mode": "none"}),
        wait=True,
    )
    report = api.get_holdout_eval(small_case, started.eval_id).report
    assert (report["sample"]["size"], report["sample"]["requestedSize"]) == (3049, 5000)
    assert "sample_smaller_than_requested" in [w["code"] for w in report["warnings"]]


def test_a_partial_materialisation_reads_incomplete_not_complete(small_case: str) -> None:
    import dagster as dg

    from eval_pipelines.definitions import defs

    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20), register_only=True
    )
    result = defs.resolve_job_def("holdout_eval").execute_in_process(
        instance=DagsterInstance.get(),
        partition_key=started.eval_id,
        asset_selection=[dg.AssetKey("eval_spec"), dg.AssetKey("holdout_sample")],
    )
    assert result.success
    status = api.get_holdout_eval(small_case, started.eval_id)
    assert (status.status, status.run.state) == ("incomplete", "succeeded")
    assert [v.status for v in status.variants] == ["not in this run", "not in this run"]
    assert status.run_assets == ("eval_spec", "holdout_sample")
    with pytest.raises(api.EvalFailed, match="finished without writing the report"):
        api.wait_for_eval(small_case, started.eval_id, timeout=5)


def test_a_partial_ui_run_after_the_report_is_not_complete_and_its_steps_not_pending(
    small_case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20: after a run launched from the UI for only some assets of a complete
    evaluation's partition (here only ``holdout_sample``, as the Materialize dialog's asset
    selection does), `eval status` listed the classify steps as "pending" (they were never
    going to run) and said `complete`, though that run wrote no report. The status now comes
    from whether the stored report matches the newest run: it is that run's (`incomplete`),
    its steps read "not in this run", and the earlier report is still shown, said to be from
    before it. A whole run makes it complete again."""
    import json

    import dagster as dg

    from eval_pipelines.cli.main import main
    from eval_pipelines.definitions import defs

    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20), wait=True
    )
    assert api.get_holdout_eval(small_case, started.eval_id).status == "complete"
    partial = defs.resolve_job_def("holdout_eval").execute_in_process(
        instance=DagsterInstance.get(),
        partition_key=started.eval_id,
        asset_selection=[dg.AssetKey("holdout_sample")],
    )
    assert partial.success

    status = api.get_holdout_eval(small_case, started.eval_id)
    assert status.run is not None
    assert (status.run.run_id, status.run.state) == (partial.run_id, "succeeded")
    assert status.status == "incomplete"
    assert [v.status for v in status.variants] == ["not in this run", "not in this run"]
    assert status.run_assets == ("holdout_sample",)
    assert status.report is not None and status.report_run_id == started.run_id
    with pytest.raises(api.EvalFailed, match="the report of run .* is from before it"):
        api.wait_for_eval(small_case, started.eval_id, timeout=5)

    capsys.readouterr()
    assert main(["eval", "status", small_case, started.eval_id]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"# `{started.eval_id}`: incomplete\n")
    assert (
        "- classify steps of the newest run: baseline (not in this run), "
        "five-nearest (not in this run)"
    ) in shown
    assert (
        "- the newest run materialised only holdout_sample, not eval_report: the report below "
        f"is from before it; run the whole evaluation with eval-pipelines eval rerun "
        f"{small_case} {started.eval_id}"
    ) in shown
    assert main(["eval", "status", small_case, started.eval_id, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["status"], document["runAssets"]) == ("incomplete", ["holdout_sample"])
    assert [v["status"] for v in document["variants"]] == ["not in this run"] * 2

    again = api.rerun_holdout_eval(small_case, started.eval_id, wait=True)
    whole = api.get_holdout_eval(small_case, started.eval_id)
    assert (whole.status, whole.report_run_id, whole.run_assets) == ("complete", again.run_id, None)
    assert [v.status for v in whole.variants] == ["succeeded", "succeeded"]
    assert "runAssets" not in whole.to_json()


def test_partition_keys_added_by_hand_can_be_pruned(small_case: str) -> None:
    started = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20), register_only=True
    )
    instance = DagsterInstance.get()
    instance.add_dynamic_partitions("holdout_evaluations", ["small-e9999-s1"])
    assert api.prune_partitions() == ["small-e9999-s1"]
    assert instance.get_dynamic_partitions("holdout_evaluations") == [started.eval_id]


def test_a_failed_run_reads_failed_with_the_step_and_its_error(small_case: str) -> None:
    from eval_pipelines.core.holdout import classify

    def broken(records, evidence, memo, config, *, tree):  # type: ignore[no-untyped-def]
        raise RuntimeError("model service unavailable")

    classify.register_classifier("broken-for-status", broken)
    started = api.start_holdout_eval(
        small_case,
        [{"name": "ok"}, {"name": "bad", "config": {"classifier": "broken-for-status"}}],
        api.HoldoutOptions(sample_size=20),
        wait=True,
    )
    status = api.get_holdout_eval(small_case, started.eval_id)
    assert (status.status, status.run.state) == ("failed", "failed")
    assert status.run.reason == (
        "step variant_predictions.classify_variant[bad] failed: "
        "RuntimeError: model service unavailable"
    )
    with pytest.raises(api.EvalFailed, match="model service unavailable") as failed:
        api.wait_for_eval(small_case, started.eval_id, timeout=10)
    assert isinstance(failed.value.status, api.HoldoutStatus)
    assert failed.value.status.status == "failed"


def test_an_evaluation_run_here_reports_progress_as_it_goes(small_case: str) -> None:
    """A start that waits, without a daemon, executes the run in this process (what ``eval
    holdout --wait`` does) and tells the caller as its variant steps go."""
    seen: list[api.HoldoutStatus] = []
    started = api.start_holdout_eval(
        small_case,
        VARIANTS,
        api.HoldoutOptions(sample_size=30, seed=2),
        wait=True,
        progress=seen.append,
    )
    assert started.status == "complete"
    first, last = seen[0], seen[-1]
    # Told once the run exists, before it does anything.
    assert first.run_id == started.run_id and first.run.state == "running"
    assert [v.status for v in first.variants] == ["pending", "pending"]
    assert [v.status for v in last.variants] == ["succeeded", "succeeded"]
    summaries = [(s.status, tuple(v.status for v in s.variants)) for s in seen]
    assert all(a != b for a, b in zip(summaries, summaries[1:], strict=False))  # changes only
    final = api.wait_for_eval(small_case, started.eval_id, run_id=started.run_id, timeout=5)
    assert final.status == "complete" and final.report_run_id == started.run_id

    again = api.rerun_holdout_eval(small_case, started.eval_id, wait=True)
    assert again.status == "complete" and again.run_id != started.run_id
    rerun = api.get_holdout_eval(small_case, started.eval_id)
    assert rerun.report_run_id == again.run_id
    assert rerun.report["sample"] == final.report["sample"]


def test_a_waiting_start_submits_to_the_queue_while_a_daemon_dequeues(small_case: str) -> None:
    """With ``make dev`` running, its daemon starts every run: a start that waits submits
    its run and waits for the daemon (this one never dequeues: the wait times out), and no
    dispatcher is started beside the daemon."""
    from dagster._daemon.types import DaemonHeartbeat

    instance = DagsterInstance.get()
    instance.add_daemon_heartbeat(
        DaemonHeartbeat(time.time(), "QUEUED_RUN_COORDINATOR", "make dev", None)
    )
    with pytest.raises(TimeoutError, match="still running after 2 s"):
        api.start_holdout_eval(
            small_case, VARIANTS, api.HoldoutOptions(sample_size=20), wait=True, timeout=2
        )
    (run,) = instance.get_runs()
    assert run.status == DagsterRunStatus.QUEUED
    enqueued = instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_ENQUEUED)
    assert len(enqueued) == 1
    assert not (Path(instance.root_directory) / "eval_pipelines_dispatcher.log").exists()


def test_a_run_into_another_warehouse_than_the_run_reads_is_refused(
    small_case: str, small_case_files: dict[str, Path], workdir: Path
) -> None:
    """The run reads $EVAL_PIPELINES_WAREHOUSE: an evaluation registered in another file (here
    one holding the same case) would have its report written where the caller never looks.
    Refused, nothing registered there."""
    other = workdir / "other.duckdb"
    api.create_case(
        small_case,
        api.CaseSource(
            small_case_files["records"], tree_path=small_case_files["tree"], target_depth=[3, 4]
        ),
        warehouse=other,
    )
    with pytest.raises(
        InputError, match=r"^warehouse=.*: the run reads .*EVAL_PIPELINES_WAREHOUSE"
    ):
        api.start_holdout_eval(small_case, [{"name": "baseline"}], warehouse=other)
    assert api.list_evals(small_case, warehouse=other) == []
    with pytest.raises(InputError, match="the run reads"):
        api.rerun_holdout_eval(small_case, "small-e0001-s1", warehouse=other)
    # Registering without a run stays allowed, and the file the run reads is accepted by name.
    assert api.start_holdout_eval(
        small_case, [{"name": "baseline"}], register_only=True, warehouse=other
    ).eval_id.startswith("small-e")
    assert api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}],
        register_only=True,
        warehouse=workdir / "warehouse.duckdb",
    ).eval_id.startswith("small-e")


def test_refusals_name_parameters_to_python_and_flags_in_the_shell(
    small_case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20: the API's errors name its parameters (`variant`, `candidate_variant`), the
    CLI shows the flags that set them (--variant, --candidate-variant), exit 2."""
    from eval_pipelines.cli.main import main

    eval_id = api.start_holdout_eval(
        small_case, VARIANTS, api.HoldoutOptions(sample_size=20), wait=True
    ).eval_id
    with pytest.raises(InputError) as refused:
        api.eval_rows(small_case, eval_id, variant="nope")
    assert refused.value.field == "variant"
    with pytest.raises(InputError) as refused:
        api.compare_holdout_evals(
            small_case,
            baseline_eval_id=eval_id,
            candidate_eval_id=eval_id,
            baseline_variant="baseline",
            candidate_variant="nope",
        )
    assert refused.value.field == "candidate_variant"
    capsys.readouterr()
    assert main(["eval", "rows", small_case, eval_id, "--variant", "nope"]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: --variant='nope': is not a variant of {eval_id}"
    )
    compare = ["eval", "compare", small_case, eval_id, eval_id]
    assert main([*compare, "--baseline-variant", "baseline", "--candidate-variant", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: --candidate-variant='nope': is not")
