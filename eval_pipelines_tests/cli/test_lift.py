"""``eval-pipelines lift ...`` as a user types it: the published vectors, one-line refusals
(exit 2), and the demo path from a log to a verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.core.lift.assignment import LiftConfig, fnv1a_32
from eval_pipelines_tests.helpers.cli_calls import cli
from eval_pipelines_tests.helpers.lift_traffic import write_log
from eval_pipelines_tests.helpers.paths import REPO

VECTORS = json.loads(
    (resources.files("eval_pipelines.core.lift") / "vectors.json").read_text(encoding="utf-8")
)


def test_assign_reproduces_the_published_bucket_vectors(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for vector in VECTORS["bucket"]["vectors"]:
        code, out, err = cli(
            capsys,
            "lift",
            "assign",
            "--workspace",
            vector["workspace_id"],
            "--trace",
            vector["cluster_key"],
            "--json",
        )
        assert code == 0, err
        assigned = json.loads(out)
        assert assigned["bucket"] == vector["bucket"]
        assert assigned["arm"] == vector["arm_at_10_percent"]
    assert not (workdir / "warehouse.duckdb").exists()  # assignment needs no warehouse


def test_assign_keys_an_untagged_conversation_on_its_opening(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vector = VECTORS["conversation"]["vectors"][0]
    messages = workdir / "messages.json"
    messages.write_text(json.dumps([{"role": r, "content": c} for r, c in vector["messages"]]))
    code, out, _ = cli(
        capsys,
        "lift",
        "assign",
        "--workspace",
        vector["workspace_id"],
        "--messages",
        messages,
        "--json",
    )
    assert code == 0
    assert json.loads(out)["cluster"] == vector["token"]
    assert json.loads(out)["keySource"] == "conversation"


def test_refusals_are_one_line_with_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "lift", "settings", "--workspace", "ws", "--fraction", "0.4")
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: --fraction=0.4: ")
    code, _, err = cli(capsys, "lift", "assign", "--workspace", "ws")
    assert code == 2 and "nothing to key on" in err
    code, _, err = cli(capsys, "lift", "assign", "--workspace", "")
    assert code == 2 and err.startswith("error: workspace_id='': ")  # unchanged (issue 20)
    log = write_log(workdir / "bad.jsonl", LiftConfig("ws", "e1", lever="l"), true_lift=0.0, days=1)
    log.write_text(log.read_text().replace('"e1"', '""', 1))
    code, _, err = cli(capsys, "lift", "ingest", log)
    assert code == 2 and err.count("\n") == 1
    assert "line 1: exposure_epoch='': must not be empty" in err
    code, _, err = cli(capsys, "lift", "settings", "--workspace", "ws", "--case", "nosuch")
    assert code == 2 and err.count("\n") == 1 and "case='nosuch': no such case" in err
    assert not (workdir / "warehouse.duckdb").exists()


def test_from_a_log_to_a_verdict(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "lift", "settings", "--workspace", "ws", "--lever", "memo-v2")
    assert code == 0 and "epoch e2 (new: the split changed)" in out  # from the defaults' e1
    log = write_log(
        workdir / "week.jsonl", LiftConfig("ws", "e2", lever="memo-v2"), true_lift=0.08, seed=4
    )
    code, out, err = cli(capsys, "lift", "ingest", log)
    assert code == 0, err
    assert "ingested; 5119 rows over 7 days (2026-11-23 .. 2026-11-29)" in out
    code, out, _ = cli(capsys, "lift", "report")
    assert code == 0 and "verdict superior, confirmed" in out and "A/A: " in out
    assert "confirmed, outcome audit unaudited" in out  # confirmed, and marked unaudited
    code, out, _ = cli(capsys, "lift", "ledger")
    assert out.startswith("ws/invoice_coding/e2/memo-v2: treated − lever_holdout +0.0")
    assert "n " in out and "clusters" in out and "no offline screening" in out


def _rewritten(log: Path, keep: Any) -> Path:
    """The log with each row passed through ``keep`` (a row, or None to leave it out)."""
    rows = [keep(json.loads(line)) for line in log.read_text().splitlines()]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows if r is not None))
    return log


def test_single_request_traffic_is_read_and_the_report_says_the_check_could_not_run(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 28, item 1: a one-call service (every trace and conversation one request) with a
    # true lift read `parked` (the cluster-size check); now it is read, and the report and
    # ledger say the check could not run.
    code, _, _ = cli(capsys, "lift", "settings", "--workspace", "ws", "--lever", "memo-v2")
    log = write_log(
        workdir / "week.jsonl",
        LiftConfig("ws", "e2", lever="memo-v2"),
        true_lift=0.06,
        seed=5,
        days=3,
    )
    _rewritten(log, lambda row: row if row["request_id"].endswith("-0") else None)
    code, out, err = cli(capsys, "lift", "ingest", log)
    assert code == 0, err
    code, out, _ = cli(capsys, "lift", "report")
    assert code == 0 and "verdict parked" not in out and "FAILED" not in out
    assert "passed, but the cluster-size check could not run (not parked)" in out
    assert "could not run: " in out and "trace-keyed clusters hold one request" in out
    code, out, _ = cli(capsys, "lift", "ledger")
    assert "cluster-size check could not run (" in out and "parked" not in out


@pytest.mark.parametrize("turns", [True, False])
def test_conversation_keys_logged_per_request_are_parked_or_said_unchecked(
    workdir: Path, capsys: pytest.CaptureFixture[str], turns: bool
) -> None:
    # Issue 28, item 2: each request of an untagged conversation logged under its own conv-
    # token. With `turn` logged the report parks the claim; without it, it says the check
    # could not run for the conversation keys (the trace keys beside them pass).
    cli(capsys, "lift", "settings", "--workspace", "ws", "--lever", "memo-v2")
    log = write_log(
        workdir / "week.jsonl",
        LiftConfig("ws", "e2", lever="memo-v2"),
        true_lift=0.0,
        seed=4,
        days=3,
        marks=turns,
    )

    def per_request(row: dict[str, Any]) -> dict[str, Any]:
        if row["key_source"] == "conversation":
            row["cluster"] = f"conv-{fnv1a_32(row['request_id'].encode()):08x}"
        return row

    code, _, err = cli(capsys, "lift", "ingest", _rewritten(log, per_request))
    assert code == 0, err
    code, out, _ = cli(capsys, "lift", "report")
    assert code == 0
    if turns:
        assert "verdict parked" in out and "the conversation key was logged per request" in out
    else:
        assert "verdict parked" not in out
        assert "could not run: " in out and "conversation-keyed clusters hold one request" in out
        code, out, _ = cli(capsys, "lift", "ledger")
        assert "cluster-size check could not run (" in out and "conversation-keyed" in out


def test_assign_does_not_wait_on_another_process_writing_the_warehouse(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Serving code assigns while ingests and reports write: a real write connection held in
    another process must not make `lift assign` wait (it exited 4, busy), and the stored
    settings are still the ones it uses."""
    code, out, err = cli(
        capsys, "lift", "settings", "--workspace", "ws", "--fraction", "0.2", "--lever", "memo-v2"
    )
    assert code == 0, err
    warehouse = workdir / "warehouse.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, duckdb\n"
            f"conn = duckdb.connect({str(warehouse)!r})\n"
            "conn.execute('BEGIN TRANSACTION')\n"
            "conn.execute(\"UPDATE lift_settings SET epoch = 'uncommitted'\")\n"
            "print('holding', flush=True)\n"
            "sys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        code, out, err = cli(
            capsys, "lift", "assign", "--workspace", "ws", "--trace", "t-1", "--json"
        )
    finally:
        holder.communicate("done\n", timeout=60)
    assert code == 0, err
    assigned = json.loads(out)
    assert (assigned["epoch"], assigned["holdoutFraction"], assigned["lever"]) == (
        "e2",
        0.2,
        "memo-v2",
    )


def test_the_holdout_threshold_is_the_rounded_fraction(workdir: Path) -> None:
    """docs/lift.md's rule is the code's: holdout when bucket < round(fraction x 10,000)
    (0.07 x 10,000 is 700.0000000000001 in floating point; bucket 700 is not held out)."""
    from eval_pipelines.core.lift.assignment import LiftConfig, Request, assign, buckets

    keys = [f"t-{i}" for i in range(100_000)]
    at = {int(b): k for b, k in zip(buckets("ws", keys), keys, strict=True)}
    config = LiftConfig("ws", "e1", 0.07)
    assert assign(Request("ws", trace_id=at[699]), config).arm == "holdout"
    assert assign(Request("ws", trace_id=at[700]), config).arm == "pre_lever"
    page = (REPO / "docs" / "lift.md").read_text(encoding="utf-8")
    assert "`bucket < round(fraction × 10,000)`" in page


def test_ingest_again_says_what_it_skipped_and_refuses_changed_content(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(workdir / "day.jsonl", LiftConfig("ws", "e1", lever="l"), true_lift=0.0, days=1)
    n = len(log.read_text().splitlines())
    code, out, err = cli(capsys, "lift", "ingest", log)
    assert code == 0, err
    assert f"{n} stored, 0 already stored" in out
    crlf = workdir / "crlf.jsonl"
    crlf.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    code, out, err = cli(capsys, "lift", "ingest", crlf)
    assert code == 0 and f"0 stored, {n} already stored (same content): skipped" in out
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    rows[2]["claim_type"] = "other"
    changed = workdir / "changed.jsonl"
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = cli(capsys, "lift", "ingest", changed)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"line 3 of {changed} has claim_type=other" in err
    assert f"line 3 of {log} (stored) has claim_type=invoice_coding" in err


def _audit_counts(warehouse: Path) -> int:
    import duckdb

    conn = duckdb.connect(str(warehouse), read_only=True)
    try:
        return int(conn.execute("SELECT count(*) FROM lift_audits").fetchone()[0])  # type: ignore[index]
    finally:
        conn.close()


def _week(workdir: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    code, _, err = cli(capsys, "lift", "settings", "--workspace", "ws", "--lever", "memo-v2")
    assert code == 0, err
    log = write_log(
        workdir / "week.jsonl", LiftConfig("ws", "e2", lever="memo-v2"), true_lift=0.08, seed=4
    )
    code, _, err = cli(capsys, "lift", "ingest", log)
    assert code == 0, err
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_an_audit_sample_filled_in_and_ingested_is_read_by_the_report(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The outcome audit end to end on a real warehouse: before any audit the report and the
    ledger say `unaudited` and what that leaves unseen (the claim still confirms, as the
    demo's does); a sample balanced per arm, blinded, the same twice; filled in with the
    outcomes a reviewer found (here: the logged ones, a healthy logging path), ingested
    once (again: skipped), read by the next report as a passed audit."""
    rows = {r["request_id"]: r for r in _week(workdir, capsys)}
    code, out, _ = cli(capsys, "lift", "report")
    assert code == 0 and "verdict superior, confirmed" in out
    assert "Outcome audit: none" in out and "cannot be seen without one" in out
    code, out, _ = cli(capsys, "lift", "ledger")
    assert "confirmed, outcome audit unaudited" in out

    code, first, err = cli(capsys, "lift", "audit-sample", "--workspace", "ws", "--size", "60")
    assert code == 0, err
    _, second, _ = cli(capsys, "lift", "audit-sample", "--workspace", "ws", "--size", "60")
    assert first == second  # deterministic
    sample = [json.loads(line) for line in first.splitlines()]
    assert len(sample) == 120 and all(r["exposure_epoch"] == "e2" for r in sample)
    assert not {"exposure_arm", "outcome", "candidate", "cluster"} & set(sample[0])  # blinded
    arms = [rows[r["request_id"]]["exposure_arm"] for r in sample]
    assert arms.count("treated") == 60 and arms.count("lever_holdout") == 60

    filled = workdir / "audit.csv"
    code, out, err = cli(
        capsys, "lift", "audit-sample", "--workspace", "ws", "--size", "60", "--out", filled
    )
    assert code == 0 and "120 requests to audit" in out, err
    lines = filled.read_text().splitlines()
    assert lines[0].split(",")[0] == "request_id" and "audited_outcome" in lines[0]
    completed = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        cells[6] = "true" if rows[cells[0]]["outcome"] else "false"
        completed.append(",".join(cells))
    filled.write_text("\n".join(completed) + "\n")
    code, out, err = cli(capsys, "lift", "audit", filled)
    assert code == 0, err
    assert "120 audited rows: 120 stored, 0 already stored" in out
    code, out, err = cli(capsys, "lift", "audit", filled)
    assert code == 0 and "0 stored, 120 already stored (same outcome): skipped" in out, err
    assert _audit_counts(workdir / "warehouse.duckdb") == 120

    code, out, _ = cli(capsys, "lift", "report", "--json")
    (claim,) = json.loads(out)["claims"]
    # The claim confirmed unaudited is settled history; the audit reads on the report's checks.
    assert claim["status"] == "confirmed" and claim["audit"]["state"] == "unaudited"
    # ... with the audit read since beside it.
    assert claim["auditSinceSettled"]["state"] == "passed"
    assert claim["auditSinceSettled"]["treated"]["audited"] == 60
    code, out, _ = cli(capsys, "lift", "ledger")
    assert (
        "confirmed, outcome audit unaudited; audited since it was settled: passed (0 of 60" in out
    )


def _audit_biased(
    workdir: Path, capsys: pytest.CaptureFixture[str], rows: dict[str, dict[str, object]]
) -> None:
    """Audit 100 requests per arm; the reviewer finds 15 treated logged successes failures."""
    code, out, _ = cli(capsys, "lift", "audit-sample", "--workspace", "ws", "--size", "100")
    assert code == 0
    audited, flipped = [], 0
    for line in out.splitlines():
        row = json.loads(line)
        logged = rows[row["request_id"]]
        outcome = logged["outcome"]
        if logged["exposure_arm"] == "treated" and outcome and flipped < 15:
            outcome, flipped = False, flipped + 1
        audited.append({**row, "audited_outcome": outcome})
    path = workdir / "audit.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in audited))
    code, out, err = cli(capsys, "lift", "audit", path, "--json")
    assert code == 0 and json.loads(out)["storedRows"] == 200, err


def test_a_bias_audited_after_an_unaudited_confirmation_is_shown_beside_it(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The remaining limit, stated: a claim confirmed unaudited stays confirmed (settled
    history), but a failed audit read since is beside it in the report and the ledger."""
    rows = {r["request_id"]: r for r in _week(workdir, capsys)}
    code, out, _ = cli(capsys, "lift", "report")
    assert code == 0 and "verdict superior, confirmed" in out
    _audit_biased(workdir, capsys, rows)
    code, out, _ = cli(capsys, "lift", "report")
    assert "Outcome audit since the claim was settled unaudited: treated 15 of 100" in out
    assert "FAILED: the claim was settled on biased outcome logging" in out
    code, out, _ = cli(capsys, "lift", "ledger")
    assert "confirmed, outcome audit unaudited; audited since it was settled: failed (15" in out


def test_a_biased_treated_logging_is_parked_by_its_audit(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reviewer finds that treated successes were failures the logger turned into
    successes (15 of 100 treated, none of 100 lever_holdout): the report parks the claim
    before it is ever confirmed, saying per arm how many were audited and disagree."""
    rows = {r["request_id"]: r for r in _week(workdir, capsys)}
    _audit_biased(workdir, capsys, rows)
    code, out, _ = cli(capsys, "lift", "report")
    assert (
        code == 0 and "verdict parked, parked (checks before reading failed: outcome audit" in out
    )
    assert "treated 15 of 100 audited outcomes disagree" in out
    assert "lever_holdout 0 of 100" in out and "FAILED: the instrument is parked" in out
    code, out, _ = cli(capsys, "lift", "ledger", "--json")
    (claim,) = json.loads(out)
    assert claim["status"] == "parked" and claim["audit"]["state"] == "failed"
    assert claim["audit"]["treated"] == {
        "audited": 100,
        "disagreements": 15,
        "loggedSuccessAuditedFailure": 15,
        "loggedFailureAuditedSuccess": 0,
        "departure": 0.15,
    }


def test_bad_audit_input_is_refused_with_exit_2_and_nothing_written(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = workdir / "audit.jsonl"
    path.write_text('{"request_id": "req-2026-11-23-0-0", "audited_outcome": true}\n')
    code, out, err = cli(capsys, "lift", "audit", path)
    assert code == 2 and out == "" and "no stored request has this id" in err
    assert not (workdir / "warehouse.duckdb").exists()  # not even an empty warehouse
    rows = _week(workdir, capsys)
    treated = [r for r in rows if r["exposure_arm"] == "treated" and r["outcome"] is not None]
    holdout = next(r for r in rows if r["exposure_arm"] == "holdout")
    unresolved = next(r for r in rows if r["exposure_arm"] == "treated" and r["outcome"] is None)
    good = {"request_id": treated[0]["request_id"], "audited_outcome": treated[0]["outcome"]}
    cases = [
        (
            {"request_id": "nosuch", "audited_outcome": True},
            "line 2: request_id='nosuch': no stored",
        ),
        (
            {"request_id": treated[1]["request_id"], "audited_outcome": "ok"},
            "line 2: audited_outcome='ok': must be true or false",
        ),
        ({**good, "audited_outcome": not good["audited_outcome"]}, "line 2: audited_outcome="),
        ({"request_id": holdout["request_id"], "audited_outcome": True}, "its arm is holdout"),
        ({"request_id": unresolved["request_id"], "audited_outcome": True}, "unresolved (null)"),
        (
            {**good, "request_id": treated[2]["request_id"], "workspace_id": "other"},
            "line 2: workspace_id='other': request",
        ),
    ]
    for second, message in cases:
        path.write_text(json.dumps(good) + "\n" + json.dumps(second) + "\n")
        code, out, err = cli(capsys, "lift", "audit", path)
        assert code == 2 and out == "" and err.count("\n") == 1, (second, err)
        assert message in err, (message, err)
    assert _audit_counts(workdir / "warehouse.duckdb") == 0  # nothing of any refused file
    path.write_text(json.dumps(good) + "\n")
    assert cli(capsys, "lift", "audit", path)[0] == 0
    path.write_text(json.dumps({**good, "audited_outcome": not good["audited_outcome"]}) + "\n")
    code, _, err = cli(capsys, "lift", "audit", path)
    assert code == 2 and "was audited before with" in err and "never changes" in err
    assert _audit_counts(workdir / "warehouse.duckdb") == 1
    code, _, err = cli(capsys, "lift", "audit-sample", "--workspace", "ws", "--size", "0")
    assert code == 2 and "--size=0" in err
    code, _, err = cli(capsys, "lift", "audit-sample", "--workspace", "nows", "--size", "5")
    assert code == 2 and "no request of this workspace" in err


def test_the_demo_week_still_confirms_marked_unaudited(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make demo`'s lift steps (without its case): the outcome audit does not stop an
    unaudited claim from confirming; the ledger marks it and the report says what an audit
    would see."""
    from eval_pipelines.demo import lift_week

    code, _, err = cli(
        capsys,
        "lift",
        "settings",
        "--workspace",
        "demo-ws",
        "--fraction",
        "0.10",
        "--lever",
        "five-nearest",
    )
    assert code == 0, err
    week, prices = workdir / "demo_week.jsonl", workdir / "demo_prices.json"
    assert lift_week.main([str(week), "--true-lift", "0.06", "--prices-out", str(prices)]) == 0
    code, _, err = cli(
        capsys,
        "lift",
        "settings",
        "--workspace",
        "demo-ws",
        "--intent",
        "cost_optimization",
        "--lever-changes",
        "model",
        "--prices",
        prices,
    )
    assert code == 0, err
    assert cli(capsys, "lift", "ingest", week)[0] == 0
    code, out, _ = cli(capsys, "lift", "report")
    assert code == 0
    assert "demo-ws/invoice_coding/e2/five-nearest" in out
    assert "verdict superior, confirmed, outcome audit unaudited" in out
    assert "Outcome audit: none" in out
    # The cost bar (issue 31): the treated arm's cheaper tier reads cheaper; the quality
    # figures are those of the week without costs (the cost draws have their own generator).
    assert (
        "treated − lever_holdout +0.046 [+0.014, +0.078] (always-valid 95%), n 5220 vs 5034 "
        "(2229 vs 2184 clusters)" in out
    )
    assert "verdict cheaper (cost_optimization); frozen bound" in out


def _cells(report: dict[str, object]) -> list[dict[str, object]]:
    return sorted(
        (cell for scope in report["scopes"] for cell in scope["cells"]),  # type: ignore[attr-defined]
        key=lambda c: (c["situationClass"], c["exposureArm"], c["source"]),
    )


def test_a_request_logged_unresolved_then_resolved_is_an_update(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The serving system logs each request when it is served (no outcome yet: unresolved,
    censored) and again when its outcome arrives. The second line was refused as a conflict;
    it now replaces the first, once, and the rollup reads the resolved outcome."""
    from eval_pipelines.core.lift.logs import read_log, validate_log
    from eval_pipelines.core.lift.rollup import rollup

    log = write_log(workdir / "day.jsonl", LiftConfig("ws", "e1", lever="l"), true_lift=0.0, days=1)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    n, outcomes = len(rows), [r["outcome"] for r in rows]
    resolved = sum(o is not None for o in outcomes)
    assert 0 < resolved < n  # some requests are still unresolved when their outcome log is cut
    served = workdir / "served.jsonl"
    served.write_text("".join(json.dumps({**r, "outcome": None}) + "\n" for r in rows))

    code, out, err = cli(capsys, "lift", "ingest", served)
    assert code == 0 and f"{n} stored, 0 already stored" in out, err
    code, out, err = cli(capsys, "lift", "ingest", log)
    assert code == 0, err
    assert f"0 stored, {n - resolved} already stored (same content): skipped; " in out
    assert f"; {resolved} resolved (replacing their stored unresolved rows)" in out
    code, out, err = cli(capsys, "lift", "report", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["rows"] == n and report["conflictingRequests"] == 0
    # The cells are those of the outcome log alone (the core rollup, not the warehouse).
    expected = rollup(validate_log(read_log(log)), epoch="e1")
    assert _cells(report) == _cells({"scopes": [{"cells": [c.to_json() for c in expected]}]})
    assert sum(c["resolved"] for c in _cells(report)) == resolved  # type: ignore[misc]

    # The served line arriving again, after the outcome: skipped and counted, no overwrite.
    code, out, err = cli(capsys, "lift", "ingest", "--json", served)
    assert code == 0, err
    again = json.loads(out)
    assert (again["storedRows"], again["resolvedRows"], again["skippedRows"]) == (0, 0, n)
    assert again["unresolvedAfterResolvedRows"] == resolved and again["new"] is False
    # The document's keys in the order `lift ingest --json` has always printed them.
    assert list(again) == [
        "days",
        "fileId",
        "mixedArtifacts",
        "new",
        "path",
        "pendingLine",
        "resolvedRows",
        "rows",
        "skippedRows",
        "storedRows",
        "supersededRows",
        "unresolvedAfterResolvedRows",
        "runId",
    ]
    code, out, err = cli(capsys, "lift", "report", "--json")
    assert _cells(json.loads(out)) == _cells(report)

    # A resolved outcome that changes is still refused, naming both lines.
    i = next(i for i, o in enumerate(outcomes) if o is True)
    rows[i]["outcome"] = False
    flipped = workdir / "flipped.jsonl"
    flipped.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = cli(capsys, "lift", "ingest", flipped)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"line {i + 1} of {flipped} has outcome=false" in err
    assert f"line {i + 1} of {log} (stored) has outcome=true" in err


def test_one_log_with_a_request_s_served_and_outcome_lines_is_read_once(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same two lines in one file (a day's log that also holds the outcomes): refused
    as not unique in the file; now the outcome's line is stored and the served one left
    out, counted."""
    from eval_pipelines.core.lift.logs import read_log, validate_log
    from eval_pipelines.core.lift.rollup import rollup

    log = write_log(workdir / "day.jsonl", LiftConfig("ws", "e1", lever="l"), true_lift=0.0, days=1)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    n = len(rows)
    outcomes = [r for r in rows if r["outcome"] is not None]
    both = workdir / "both.jsonl"
    both.write_text(
        "".join(json.dumps({**r, "outcome": None}) + "\n" for r in rows)
        + "".join(json.dumps(r) + "\n" for r in outcomes)
    )
    code, out, err = cli(capsys, "lift", "ingest", "--json", both)
    assert code == 0, err
    ingested = json.loads(out)
    assert ingested["rows"] == n + len(outcomes) and ingested["storedRows"] == n
    assert ingested["supersededRows"] == len(outcomes) and ingested["resolvedRows"] == 0
    code, out, err = cli(capsys, "lift", "report", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["rows"] == n and report["conflictingRequests"] == 0
    expected = rollup(validate_log(read_log(log)), epoch="e1")
    assert _cells(report) == _cells({"scopes": [{"cells": [c.to_json() for c in expected]}]})
    code, out, err = cli(capsys, "lift", "ingest", log)  # the outcomes alone: all stored
    assert code == 0 and f"0 stored, {n} already stored (same content): skipped;" in out, err
