"""Live lift through the API on a real warehouse and real Dagster runs: settings within the
band, logs taken whole or refused, a known true lift confirmed, claims invalidated by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines_tests.helpers.lift_traffic import LEVER, lever_split, write_log


def _counts() -> dict[str, int]:
    from eval_pipelines import settings
    from eval_pipelines.storage.warehouse import connect

    with connect(settings.warehouse_location(), read_only=True) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
            for table in ("lift_files", "lift_events", "lift_claims")
        }


def test_a_holdout_outside_the_band_is_refused_and_nothing_is_written(workdir: Path) -> None:
    from eval_pipelines.api import lift

    for fraction in (0.04, 0.31):
        with pytest.raises(InputError, match=r"holdout_fraction=0\.(04|31)"):
            lift.set_settings("ws", holdout_fraction=fraction)
    assert not (workdir / "warehouse.duckdb").exists()


def test_a_change_of_split_starts_a_new_epoch(workdir: Path) -> None:
    from eval_pipelines.api import lift

    # Settings equal to the defaults (e1, 10%, no lever) keep e1: nothing moved.
    same = lift.set_settings("other", holdout_fraction=0.10)
    assert (same.epoch, same.new_epoch) == ("e1", False)
    first = lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2")
    assert (first.epoch, first.new_epoch) == ("e2", True)  # the lever split the traffic
    assert lift.set_settings("ws", holdout_fraction=0.10).epoch == "e2"  # unchanged
    second = lift.set_settings("ws", holdout_fraction=0.20)
    assert (second.epoch, second.new_epoch) == ("e3", True)
    assert lift.config_for("ws").epoch == "e3"


def test_the_first_settings_change_from_the_defaults_starts_a_new_epoch(workdir: Path) -> None:
    """Requests assigned before any `lift settings` were stamped e1 at the default 10%; a
    first change of the split must not keep e1, or two splits pool under one epoch."""
    from eval_pipelines.api import lift

    assert lift.config_for("ws").epoch == "e1"  # what assignment stamps with the defaults
    first = lift.set_settings("ws", holdout_fraction=0.20)
    assert (first.epoch, first.new_epoch) == ("e2", True)
    assert lift.config_for("ws").epoch == "e2"
    assert lift.config_for("ws").holdout_fraction == 0.20


def test_a_known_true_lift_is_confirmed_with_its_interval_and_n(workdir: Path) -> None:
    from eval_pipelines.api import lift

    log = write_log(workdir / "week.jsonl", lever_split(), true_lift=0.08, seed=4)
    ingested = lift.ingest(log)
    assert ingested.new and len(ingested.days) >= 7
    assert lift.ingest(log).new is False  # the same content again changes nothing
    report = lift.report()
    (claim,) = report.report["claims"]
    assert claim["claimId"] == "ws/invoice_coding/e2/memo-v2"
    assert claim["verdict"] == "superior" and claim["status"] == "confirmed"
    low, high = claim["interval"]
    assert low > 0 and low < 0.08 < high  # covers the true lift (seeded: reproducible)
    assert claim["nTreated"] > 1000 and claim["nControl"] > 1000
    assert claim["aa"]["passed"] and claim["aa"]["splits"] == 20
    assert claim["mde"] is not None and claim["evidence"] == "live_confirmation"
    assert "superior" in report.markdown and "[+0.0" in report.markdown
    (row,) = lift.ledger()
    assert row.to_json()["interval"] == claim["interval"] and row.offline is None


def test_no_true_lift_is_not_claimed(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "null.jsonl", LEVER, true_lift=0.0, seed=3))
    (claim,) = lift.report().report["claims"]
    assert claim["verdict"] in ("not_established", "inferior")
    assert claim["status"] == "open"


def test_a_bad_log_is_refused_whole(workdir: Path) -> None:
    from eval_pipelines.api import lift

    log = write_log(workdir / "week.jsonl", LEVER, true_lift=0.08, days=1)
    lines = log.read_text().splitlines()
    bad = json.loads(lines[5])
    bad["exposure_arm"] = "control"
    lines[5] = json.dumps(bad)
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="line 6: exposure_arm='control'"):
        lift.ingest(log)
    assert not (workdir / "warehouse.duckdb").exists()  # refused before anything was opened
    from eval_pipelines.runs.instance import dagster_instance

    assert dagster_instance().get_runs() == []  # and before a run was launched


def test_a_log_is_validated_once_per_ingest(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API validates the file (in core, before anything is written); the run it launches
    is given the validated bytes' digest and does not validate the same bytes again (it used
    to: once in the API, once in the run)."""
    from eval_pipelines.api import lift
    from eval_pipelines.core.lift import logs
    from eval_pipelines.stages import lift_ingest

    calls: list[int] = []
    real = logs.validate_log

    def counted(frame: object, **options: object) -> object:
        calls.append(1)
        return real(frame, **options)  # type: ignore[arg-type]

    # Every name the validator is reached by (the core module's and the stage's import).
    monkeypatch.setattr(logs, "validate_log", counted)
    monkeypatch.setattr(lift_ingest, "validate_log", counted)
    ingested = lift.ingest(write_log(workdir / "week.jsonl", LEVER, true_lift=0.0, days=2))
    assert ingested.new and ingested.stored_rows == ingested.rows > 0
    assert len(calls) == 1


def test_an_open_confirmation_is_invalidated_when_the_epoch_changes(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "e1.jsonl", LEVER, true_lift=0.0, seed=5, days=3))
    (first,) = lift.report().report["claims"]
    assert first["status"] == "open"
    second = LiftConfig("ws", "e2", 0.20, lever="memo-v2")
    lift.ingest(
        write_log(workdir / "e2.jsonl", second, true_lift=0.0, seed=6, days=1, first_day=_day(26))
    )
    claims = {c["epoch"]: c for c in lift.report().report["claims"]}
    assert claims["e1"]["status"] == "invalidated" and claims["e1"]["reason"] == "epoch_changed"
    assert claims["e2"]["status"] == "open"  # the two epochs are never pooled


def test_a_new_baseline_head_invalidates_an_open_confirmation(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "a.jsonl", LEVER, true_lift=0.0, seed=7, days=2))
    lift.report()
    later = write_log(
        workdir / "b.jsonl",
        LEVER,
        true_lift=0.0,
        seed=8,
        days=1,
        first_day=_day(25),
        baseline_head="baseline-9e1c",
    )
    lift.ingest(later)
    (claim,) = lift.report().report["claims"]
    assert (claim["status"], claim["reason"]) == ("invalidated", "stale_head")


def _day(day: int):  # type: ignore[no-untyped-def]
    from datetime import date

    return date(2026, 11, day)


def test_the_ledger_sets_the_offline_screening_beside_the_live_lift(
    small_case: str, workdir: Path
) -> None:
    """Offline -> online validity: the candidate screened offline (a holdout variant of the
    same name) shows its offline difference beside its live lift."""
    from eval_pipelines import api
    from eval_pipelines.api import lift

    started = api.start_holdout_eval(
        small_case,
        [{"name": "baseline"}, {"name": "memo-v2", "config": {"candidates": 5}}],
        api.HoldoutOptions(sample_size=60, seed=3),
        wait=True,
    )
    report = api.get_holdout_eval(small_case, started.eval_id).report
    (comparison,) = report["comparisons"]
    level = comparison["levels"][str(report["targetDepth"][0])]
    lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2", case=small_case)
    lift.ingest(write_log(workdir / "week.jsonl", LEVER, true_lift=0.08, seed=4))
    (claim,) = lift.report().report["claims"]
    offline = claim["offline"]
    assert offline["kind"] == "offline_screening" and offline["evalId"] == started.eval_id
    assert offline["candidate"] == "memo-v2" and offline["baseline"] == "baseline"
    assert offline["difference"] == level["difference"] and offline["n"] == level["pairs"]
    assert claim["evidence"] == "live_confirmation"  # the two kinds side by side, never merged


def test_a_settled_claim_is_history_and_the_current_epoch_is_the_settings(workdir: Path) -> None:
    from eval_pipelines.api import lift

    started = lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2").epoch
    assert started == "e2"  # the lever changed the defaults' split
    lever = LiftConfig("ws", started, 0.10, lever="memo-v2")
    lift.ingest(write_log(workdir / "e1.jsonl", lever, true_lift=0.08, seed=4))
    (confirmed,) = lift.report().report["claims"]
    assert confirmed["status"] == "confirmed"
    epoch = lift.set_settings("ws", holdout_fraction=0.20).epoch
    assert epoch == "e3"
    # The new epoch's rows carry the same dates as the old ones: time alone cannot say which
    # epoch is current; the workspace's settings do.
    newer = LiftConfig("ws", epoch, 0.20, lever="memo-v2")
    lift.ingest(
        write_log(workdir / "e2.jsonl", newer, true_lift=0.0, seed=9, days=2, request_prefix="e2-")
    )
    claims = {c["epoch"]: c for c in lift.report().report["claims"]}
    assert claims["e2"] == {**confirmed, "updatedAt": claims["e2"]["updatedAt"]}
    assert claims["e2"]["updatedAt"] == confirmed["updatedAt"]  # settled: not re-read
    assert claims["e3"]["status"] == "open" and claims["e3"]["reason"] is None


def test_offline_screening_is_matched_on_the_workspace_case_and_lever(
    small_case: str, workdir: Path
) -> None:
    """A screening is attached to a claim only when it screened the claim's lever on the
    case the claim's workspace declared, and only when that identifies one candidate."""
    from eval_pipelines import api
    from eval_pipelines.api import lift
    from eval_pipelines.core.lift.report import claim_line

    variants = [{"name": "baseline"}, {"name": "memo-v2", "config": {"candidates": 5}}]
    first = api.start_holdout_eval(
        small_case, variants, api.HoldoutOptions(sample_size=60, seed=3), wait=True
    )
    other = LiftConfig("other", "e1", 0.10, lever="memo-v2")  # same lever name, another app
    lift.ingest(write_log(workdir / "ws.jsonl", lever_split(), true_lift=0.0, seed=3, days=2))
    lift.ingest(
        write_log(
            workdir / "other.jsonl", other, true_lift=0.0, seed=5, days=2, request_prefix="other-"
        )
    )
    claims = {c["workspaceId"]: c for c in lift.report().report["claims"]}
    # No workspace said which case its traffic is: a variant name alone identifies nothing.
    assert claims["ws"]["offline"] is None and claims["other"]["offline"] is None
    assert "lift settings --case" in claims["other"]["offlineNote"]

    settings = lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2", case=small_case)
    assert settings.case_id == small_case and settings.new_epoch is False
    claims = {c["workspaceId"]: c for c in lift.report().report["claims"]}
    offline = claims["ws"]["offline"]
    assert offline["kind"] == "offline_screening" and offline["evalId"] == first.eval_id
    assert offline["caseId"] == small_case and offline["candidate"] == "memo-v2"
    assert claims["other"]["offline"] is None  # the other workspace's claim stays bare
    assert small_case not in str(claims["other"]["offlineNote"])

    # A second screening of a different candidate under the same name: ambiguous, none shown.
    changed = [{"name": "baseline"}, {"name": "memo-v2", "config": {"candidates": 3}}]
    api.start_holdout_eval(
        small_case, changed, api.HoldoutOptions(sample_size=60, seed=4), wait=True
    )
    (ws,) = [c for c in lift.report().report["claims"] if c["workspaceId"] == "ws"]
    assert ws["offline"] is None and "ambiguous" in ws["offlineNote"]
    assert "no offline screening" in claim_line(ws) and "ambiguous" in claim_line(ws)


def test_a_workspace_case_must_exist(workdir: Path) -> None:
    from eval_pipelines.api import lift

    with pytest.raises(InputError, match=r"case='nosuch'.*no such case"):
        lift.set_settings("ws", case="nosuch")


def test_logs_whose_keys_are_not_the_assigned_ones_park_the_claim(workdir: Path) -> None:
    """Cluster keys logged per request while the arms were assigned per trace: the A/A of the
    control arm passes, but the arms re-derived from the logged keys disagree with the
    stamped ones, so the claim is parked, not confirmed; with child spans logged, the
    cluster-size check names the trace key logged per request too."""
    from eval_pipelines.api import lift

    log = write_log(workdir / "week.jsonl", lever_split(), true_lift=0.08, seed=4, marks=True)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    for row in rows:
        if row["key_source"] == "trace":
            row["cluster"] = row["request_id"]  # the bug: the request, not the trace
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lift.ingest(log)
    report = lift.report()
    (claim,) = report.report["claims"]
    assert claim["status"] == "parked" and claim["verdict"] == "parked"
    assert "assignment mismatch" in claim["reason"]
    assert "(the trace key was logged per request" in claim["reason"]
    assert claim["checks"]["assignment"]["mismatchedRows"] > 0
    assert "FAILED: the instrument is parked" in report.markdown


def test_a_reading_without_the_split_is_not_confirmed(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "week.jsonl", LEVER, true_lift=0.08, seed=4))
    (claim,) = lift.report().report["claims"]
    assert claim["verdict"] == "superior" and claim["status"] == "open"
    assert claim["reason"].startswith("unchecked") and "lift settings" in claim["reason"]
    assert claim["checks"]["complete"] is False


def test_a_daily_look_does_not_confirm_a_null_lift_it_would_have_by_chance(workdir: Path) -> None:
    """Optional stopping: a report after each day's logs. With the one-look bootstrap interval
    this null experiment (seed 43, no true lift) read superior after day 1 and was settled
    confirmed with day 1's n, although days 1-3 together read nothing. The ledger reads the
    always-valid interval: no look confirms it, and the claim keeps being re-read."""
    from eval_pipelines.api import lift

    week = write_log(workdir / "all.jsonl", lever_split(), true_lift=0.0, seed=43, days=5)
    by_day: dict[str, list[str]] = {}
    for line in week.read_text().splitlines():
        by_day.setdefault(json.loads(line)["timestamp"][:10], []).append(line)
    days = sorted(by_day)
    first = workdir / "day1.jsonl"
    first.write_text("\n".join(by_day[days[0]]) + "\n")
    lift.ingest(first)
    (day1,) = lift.report().report["claims"]
    assert day1["status"] == "open", day1  # the one-look interval read superior here
    assert day1["verdict"] == "not_established"
    later = workdir / "days2-3.jsonl"
    later.write_text("\n".join(by_day[days[1]] + by_day[days[2]]) + "\n")
    lift.ingest(later)
    (day3,) = lift.report().report["claims"]
    assert day3["status"] == "open" and day3["nTreated"] > day1["nTreated"]  # re-read
    sequence = day3["interval"]
    assert sequence[0] < 0 < sequence[1]
    (row,) = lift.ledger()
    assert row.to_json()["interval"] == sequence and row.interval_kind == "always_valid"


def _row(i: int, workspace: str, arm: str, artifact: str, **changes: object) -> dict[str, object]:
    return {
        "timestamp": "2026-11-24T10:00:00Z",
        "request_id": f"{workspace}-r{i}",
        "workspace_id": workspace,
        "cluster": f"{workspace}-c{i}",
        "exposure_arm": arm,
        "exposure_epoch": "e1",
        "claim_type": "coding",
        "situation_class": "single",
        "source": "declared",
        "outcome": bool(i % 2),
        "artifact_key": artifact,
        "candidate": "memo-v2" if arm == "treated" else None,
        **changes,
    }


def test_an_artifact_consistent_in_each_workspace_is_not_mixed(workdir: Path) -> None:
    """The same artifact key, treated in one workspace and lever_holdout in another, is two
    artifacts each consistent in its own (workspace, epoch): none of its rows is left out."""
    from eval_pipelines.api import lift

    rows = [_row(i, "ws-a", "treated", "shared") for i in range(4)]
    rows += [_row(i, "ws-a", "lever_holdout", f"own-{i}") for i in range(4, 8)]
    rows += [_row(i, "ws-b", "lever_holdout", "shared") for i in range(4)]
    rows += [_row(i, "ws-b", "treated", f"own-{i}") for i in range(4, 8)]
    # A really mixed artifact: within ws-b/e1 its requests disagree.
    rows += [_row(8, "ws-b", "treated", "split"), _row(9, "ws-b", "lever_holdout", "split")]
    log = workdir / "two.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert lift.ingest(log).mixed_artifacts == 1
    report = lift.report()
    assert (report.report["mixedArtifacts"], report.report["rowsLeftOutAsMixed"]) == (1, 2)
    claims = {c["workspaceId"]: c for c in report.report["claims"]}
    assert (claims["ws-a"]["nTreated"], claims["ws-a"]["nControl"]) == (4, 4)
    assert (claims["ws-b"]["nTreated"], claims["ws-b"]["nControl"]) == (4, 4)


def _with_head(path: Path, head: str, *, arm: str | None = None) -> Path:
    """The log with ``baseline_head`` set to ``head`` (on the rows of ``arm`` only, if given)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if arm is None or row["exposure_arm"] == arm:
            row["baseline_head"] = head
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_deploy_and_rollback_between_two_reports_invalidates(workdir: Path) -> None:
    """h1 -> h2 -> h1: the first and last heads agree, but h2 traffic was served in between;
    pooling it would credit an unrelated deploy."""
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "a.jsonl", LEVER, true_lift=0.0, seed=7, days=2))
    (opened,) = lift.report().report["claims"]
    assert opened["status"] == "open" and opened["baseline"]["head"] == "baseline-7f3a"
    for name, day, head in (("b", 25, "deploy-h2"), ("c", 26, "baseline-7f3a")):
        log = write_log(workdir / f"{name}.jsonl", LEVER, true_lift=0.0, seed=day, days=1,
                        first_day=_day(day))  # fmt: skip
        lift.ingest(_with_head(log, head))
    (claim,) = lift.report().report["claims"]
    assert (claim["status"], claim["reason"]) == ("invalidated", "stale_head")


def test_a_head_change_in_treated_rows_only_invalidates(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "a.jsonl", LEVER, true_lift=0.0, seed=7, days=2))
    assert lift.report().report["claims"][0]["status"] == "open"
    later = write_log(workdir / "b.jsonl", LEVER, true_lift=0.0, seed=8, days=1,
                      first_day=_day(25))  # fmt: skip
    lift.ingest(_with_head(later, "deploy-h2", arm="treated"))
    (claim,) = lift.report().report["claims"]
    assert (claim["status"], claim["reason"]) == ("invalidated", "stale_head")


def test_a_head_that_changes_within_the_first_report_invalidates(workdir: Path) -> None:
    """No report ran in between: the rows themselves hold h1, then h2, then h1 again."""
    from eval_pipelines.api import lift

    log = write_log(workdir / "a.jsonl", LEVER, true_lift=0.0, seed=7, days=3)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    for row in rows:
        if row["timestamp"].startswith("2026-11-24"):
            row["baseline_head"] = "deploy-h2"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lift.ingest(log)
    (claim,) = lift.report().report["claims"]
    assert (claim["status"], claim["reason"]) == ("invalidated", "stale_head")


def _stored_rows() -> tuple[int, int]:
    """(rows stored, distinct request ids stored)."""
    from eval_pipelines import settings
    from eval_pipelines.storage.warehouse import connect

    with connect(settings.warehouse_location(), read_only=True) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT request_id) FROM lift_events")
        counts = row.fetchone()
    assert counts is not None
    return int(counts[0]), int(counts[1])


def test_ingest_is_idempotent_per_request_id_whatever_the_file(workdir: Path) -> None:
    """The same rows as Parquet, with CRLF line ends, with timestamps written with an offset,
    a subset, or a superset with one new line: each request is stored once."""
    import polars as pl

    from eval_pipelines.api import lift

    log = write_log(workdir / "day.jsonl", LEVER, true_lift=0.0, days=1, seed=11)
    lines = log.read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    n = len(rows)
    first = lift.ingest(log)
    assert (first.new, first.stored_rows, first.skipped_rows) == (True, n, 0)
    parquet = workdir / "day.parquet"
    pl.DataFrame(rows).write_parquet(parquet)
    crlf = workdir / "crlf.jsonl"
    crlf.write_bytes("".join(line + "\r\n" for line in lines).encode())
    shifted = workdir / "offset.jsonl"  # the same instants, written in another zone
    shifted.write_text(
        "".join(
            json.dumps({**r, "timestamp": r["timestamp"].replace("+00:00", "Z")}) + "\n"
            for r in rows
        )
    )
    subset = workdir / "subset.jsonl"
    subset.write_text("".join(line + "\n" for line in lines[: n // 2]))
    for again in (parquet, crlf, shifted, subset):
        result = lift.ingest(again)
        assert (result.new, result.stored_rows, result.skipped_rows) == (
            False,
            0,
            result.rows,
        ), again
    extra = {**rows[0], "request_id": "req-new-1", "timestamp": "2026-11-23T23:59:00Z"}
    superset = workdir / "superset.jsonl"
    superset.write_text("".join(line + "\n" for line in [*lines, json.dumps(extra)]))
    result = lift.ingest(superset)
    assert (result.new, result.stored_rows, result.skipped_rows) == (True, 1, n)
    assert _stored_rows() == (n + 1, n + 1)


def test_a_request_seen_again_with_other_content_is_refused_naming_both_lines(
    workdir: Path,
) -> None:
    from eval_pipelines.api import lift

    log = write_log(workdir / "day.jsonl", LEVER, true_lift=0.0, days=1, seed=11)
    lift.ingest(log)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    changed = {**rows[4], "outcome": not rows[4]["outcome"] if rows[4]["outcome"] is not None
               else True}  # fmt: skip
    later = workdir / "later.jsonl"
    new_row = {**rows[0], "request_id": "req-new-1"}
    later.write_text("\n".join(json.dumps(r) for r in (new_row, rows[1], changed)) + "\n")
    before = _stored_rows()
    with pytest.raises(InputError) as raised:
        lift.ingest(later)
    message = str(raised.value)
    assert f"request_id={rows[4]['request_id']!r}" in message
    assert f"line 3 of {later}" in message and f"line 5 of {log}" in message
    assert "outcome" in message and message.endswith("(nothing was ingested)")
    assert _stored_rows() == before  # not even the new row


def test_rows_stored_twice_before_ingest_was_idempotent_are_read_once(workdir: Path) -> None:
    """A warehouse from before: the same rows stored again under another file (the old
    per-file idempotence), and one request stored twice with different outcomes. The report
    reads each identical row once, and leaves the conflicting request out, saying so."""
    from eval_pipelines import settings
    from eval_pipelines.api import lift
    from eval_pipelines.stages.lift_ingest import read_events
    from eval_pipelines.storage import lift as lift_store
    from eval_pipelines.storage.warehouse import connect

    log = write_log(workdir / "day.jsonl", LEVER, true_lift=0.0, days=2, seed=7)
    lift.ingest(log)
    (before,) = lift.report().report["claims"]
    events = read_events(log).events
    treated = events.filter(
        (events.get_column("exposure_arm") == "treated")
        & events.get_column("outcome").is_not_null()
    ).head(1)
    with connect(settings.warehouse_location()) as conn:
        lift_store.insert_file(conn, "legacy-copy", str(log), events)
        flipped = treated.with_columns(outcome=~treated.get_column("outcome"))
        lift_store.insert_file(conn, "legacy-flip", str(log), flipped)
    report = lift.report()
    (after,) = report.report["claims"]
    assert report.report["conflictingRequests"] == 1
    assert "1 request ids stored more than once with different content" in report.markdown
    assert (after["nTreated"], after["nControl"]) == (before["nTreated"] - 1, before["nControl"])


def test_a_new_warehouse_does_not_inherit_the_settings_copy_of_a_removed_one(
    workdir: Path,
) -> None:
    from eval_pipelines import settings
    from eval_pipelines.api import lift
    from eval_pipelines.storage.warehouse import connect

    assert lift.set_settings("ws", holdout_fraction=0.2).epoch == "e2"
    assert lift.config_for("ws").epoch == "e2"  # read from the copy
    for path in workdir.glob("warehouse.duckdb*"):
        if not path.name.endswith(".json"):
            path.unlink()  # the warehouse removed (make clean), its copy left behind
    with connect(settings.warehouse_location(), create=True):
        pass  # e.g. `case create` makes a new one
    config = lift.config_for("ws")
    assert (config.epoch, config.holdout_fraction) == ("e1", 0.10)  # the new one has none


def test_a_lift_ingest_on_postgresql_is_idempotent_per_request_id(postgres_workdir: Path) -> None:
    """The same requests as Parquet, CRLF, another offset, a subset, on a PostgreSQL
    warehouse: each stored once."""
    test_ingest_is_idempotent_per_request_id_whatever_the_file(postgres_workdir)
