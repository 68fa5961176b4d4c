"""Live lift through the API on a real warehouse and real Dagster runs: settings within the
band, logs taken whole or refused, a known true lift confirmed, claims invalidated by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.assignment import LiftConfig
from eval_pipelines_tests.lift_traffic import write_log

LEVER = LiftConfig("ws", "e1", 0.10, lever="memo-v2")


def _counts() -> dict[str, int]:
    from eval_pipelines import settings
    from eval_pipelines.storage.warehouse import connect

    with connect(settings.warehouse_path(), read_only=True) as conn:
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

    first = lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2")
    assert (first["epoch"], first["newEpoch"]) == ("e1", False)
    assert lift.set_settings("ws", holdout_fraction=0.10)["epoch"] == "e1"  # unchanged
    second = lift.set_settings("ws", holdout_fraction=0.20)
    assert (second["epoch"], second["newEpoch"]) == ("e2", True)
    assert lift.config_for("ws").epoch == "e2"


def test_a_known_true_lift_is_confirmed_with_its_interval_and_n(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2")  # the split the checks use
    log = write_log(workdir / "week.jsonl", LEVER, true_lift=0.08, seed=4)
    ingested = lift.ingest(log)
    assert ingested["new"] and len(ingested["days"]) >= 7
    assert lift.ingest(log)["new"] is False  # the same content again changes nothing
    report = lift.report()
    (claim,) = report["claims"]
    assert claim["claimId"] == "ws/invoice_coding/e1/memo-v2"
    assert claim["verdict"] == "superior" and claim["status"] == "confirmed"
    low, high = claim["interval"]
    assert low > 0 and low < 0.08 < high  # covers the true lift (seeded: reproducible)
    assert claim["nTreated"] > 1000 and claim["nControl"] > 1000
    assert claim["aa"]["passed"] and claim["aa"]["splits"] == 20
    assert claim["mde"] is not None and claim["evidence"] == "live_confirmation"
    assert "superior" in report["markdown"] and "[+0.0" in report["markdown"]
    (row,) = lift.ledger()
    assert row["interval"] == claim["interval"] and row["offline"] is None


def test_no_true_lift_is_not_claimed(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "null.jsonl", LEVER, true_lift=0.0, seed=3))
    (claim,) = lift.report()["claims"]
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


def test_an_open_confirmation_is_invalidated_when_the_epoch_changes(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "e1.jsonl", LEVER, true_lift=0.0, seed=5, days=3))
    (first,) = lift.report()["claims"]
    assert first["status"] == "open"
    second = LiftConfig("ws", "e2", 0.20, lever="memo-v2")
    lift.ingest(
        write_log(workdir / "e2.jsonl", second, true_lift=0.0, seed=6, days=1, first_day=_day(26))
    )
    claims = {c["epoch"]: c for c in lift.report()["claims"]}
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
    (claim,) = lift.report()["claims"]
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
        sample_size=60,
        seed=3,
        launch="inline",
    )
    report = api.get_holdout_eval(small_case, started["evalId"])["report"]
    (comparison,) = report["comparisons"]
    level = comparison["levels"][str(report["targetDepth"][0])]
    lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2", case=small_case)
    lift.ingest(write_log(workdir / "week.jsonl", LEVER, true_lift=0.08, seed=4))
    (claim,) = lift.report()["claims"]
    offline = claim["offline"]
    assert offline["kind"] == "offline_screening" and offline["evalId"] == started["evalId"]
    assert offline["candidate"] == "memo-v2" and offline["baseline"] == "baseline"
    assert offline["difference"] == level["difference"] and offline["n"] == level["pairs"]
    assert claim["evidence"] == "live_confirmation"  # the two kinds side by side, never merged


def test_a_settled_claim_is_history_and_the_current_epoch_is_the_settings(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2")
    lift.ingest(write_log(workdir / "e1.jsonl", LEVER, true_lift=0.08, seed=4))
    (confirmed,) = lift.report()["claims"]
    assert confirmed["status"] == "confirmed"
    epoch = lift.set_settings("ws", holdout_fraction=0.20)["epoch"]
    assert epoch == "e2"
    # The new epoch's rows carry the same dates as the old ones: time alone cannot say which
    # epoch is current; the workspace's settings do.
    newer = LiftConfig("ws", epoch, 0.20, lever="memo-v2")
    lift.ingest(write_log(workdir / "e2.jsonl", newer, true_lift=0.0, seed=9, days=2))
    claims = {c["epoch"]: c for c in lift.report()["claims"]}
    assert claims["e1"] == {**confirmed, "updatedAt": claims["e1"]["updatedAt"]}
    assert claims["e1"]["updatedAt"] == confirmed["updatedAt"]  # settled: not re-read
    assert claims["e2"]["status"] == "open" and claims["e2"]["reason"] is None


def test_offline_screening_is_matched_on_the_workspace_case_and_lever(
    small_case: str, workdir: Path
) -> None:
    """A screening is attached to a claim only when it screened the claim's lever on the
    case the claim's workspace declared, and only when that identifies one candidate."""
    from eval_pipelines import api
    from eval_pipelines.api import lift
    from eval_pipelines.stages.lift import claim_line

    variants = [{"name": "baseline"}, {"name": "memo-v2", "config": {"candidates": 5}}]
    first = api.start_holdout_eval(small_case, variants, sample_size=60, seed=3, launch="inline")
    other = LiftConfig("other", "e1", 0.10, lever="memo-v2")  # same lever name, another app
    lift.ingest(write_log(workdir / "ws.jsonl", LEVER, true_lift=0.0, seed=3, days=2))
    lift.ingest(write_log(workdir / "other.jsonl", other, true_lift=0.0, seed=5, days=2))
    claims = {c["workspaceId"]: c for c in lift.report()["claims"]}
    # No workspace said which case its traffic is: a variant name alone identifies nothing.
    assert claims["ws"]["offline"] is None and claims["other"]["offline"] is None
    assert "lift settings --case" in claims["other"]["offlineNote"]

    settings = lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2", case=small_case)
    assert settings["caseId"] == small_case and settings["newEpoch"] is False
    claims = {c["workspaceId"]: c for c in lift.report()["claims"]}
    offline = claims["ws"]["offline"]
    assert offline["kind"] == "offline_screening" and offline["evalId"] == first["evalId"]
    assert offline["caseId"] == small_case and offline["candidate"] == "memo-v2"
    assert claims["other"]["offline"] is None  # the other workspace's claim stays bare
    assert small_case not in str(claims["other"]["offlineNote"])

    # A second screening of a different candidate under the same name: ambiguous, none shown.
    changed = [{"name": "baseline"}, {"name": "memo-v2", "config": {"candidates": 3}}]
    api.start_holdout_eval(small_case, changed, sample_size=60, seed=4, launch="inline")
    (ws,) = [c for c in lift.report()["claims"] if c["workspaceId"] == "ws"]
    assert ws["offline"] is None and "ambiguous" in ws["offlineNote"]
    assert "no offline screening" in claim_line(ws) and "ambiguous" in claim_line(ws)


def test_a_workspace_case_must_exist(workdir: Path) -> None:
    from eval_pipelines.api import lift

    with pytest.raises(InputError, match=r"case='nosuch'.*no such case"):
        lift.set_settings("ws", case="nosuch")


def test_logs_whose_keys_are_not_the_assigned_ones_park_the_claim(workdir: Path) -> None:
    """Cluster keys logged per request while the arms were assigned per trace: the A/A of the
    control arm passes, but the arms re-derived from the logged keys disagree with the
    stamped ones and every trace cluster is one request, so the claim is parked, not
    confirmed."""
    from eval_pipelines.api import lift

    lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2")
    log = write_log(workdir / "week.jsonl", LEVER, true_lift=0.08, seed=4)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    for row in rows:
        if row["key_source"] == "trace":
            row["cluster"] = row["request_id"]  # the bug: the request, not the trace
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lift.ingest(log)
    report = lift.report()
    (claim,) = report["claims"]
    assert claim["status"] == "parked" and claim["verdict"] == "parked"
    assert "assignment mismatch" in claim["reason"] and "single request" in claim["reason"]
    assert claim["checks"]["assignment"]["mismatchedRows"] > 0
    assert "FAILED: the instrument is parked" in report["markdown"]


def test_a_reading_without_the_split_is_not_confirmed(workdir: Path) -> None:
    from eval_pipelines.api import lift

    lift.ingest(write_log(workdir / "week.jsonl", LEVER, true_lift=0.08, seed=4))
    (claim,) = lift.report()["claims"]
    assert claim["verdict"] == "superior" and claim["status"] == "open"
    assert claim["reason"].startswith("unchecked") and "lift settings" in claim["reason"]
    assert claim["checks"]["complete"] is False


def test_a_daily_look_does_not_confirm_a_null_lift_it_would_have_by_chance(workdir: Path) -> None:
    """Optional stopping: a report after each day's logs. With the one-look bootstrap interval
    this null experiment (seed 43, no true lift) read superior after day 1 and was settled
    confirmed with day 1's n, although days 1-3 together read nothing. The ledger reads the
    always-valid interval: no look confirms it, and the claim keeps being re-read."""
    from eval_pipelines.api import lift

    lift.set_settings("ws", holdout_fraction=0.10, lever="memo-v2")
    week = write_log(workdir / "all.jsonl", LEVER, true_lift=0.0, seed=43, days=5)
    by_day: dict[str, list[str]] = {}
    for line in week.read_text().splitlines():
        by_day.setdefault(json.loads(line)["timestamp"][:10], []).append(line)
    days = sorted(by_day)
    first = workdir / "day1.jsonl"
    first.write_text("\n".join(by_day[days[0]]) + "\n")
    lift.ingest(first)
    (day1,) = lift.report()["claims"]
    assert day1["status"] == "open", day1  # the one-look interval read superior here
    assert day1["verdict"] == "not_established"
    later = workdir / "days2-3.jsonl"
    later.write_text("\n".join(by_day[days[1]] + by_day[days[2]]) + "\n")
    lift.ingest(later)
    (day3,) = lift.report()["claims"]
    assert day3["status"] == "open" and day3["nTreated"] > day1["nTreated"]  # re-read
    sequence = day3["interval"]
    assert sequence[0] < 0 < sequence[1]
    (row,) = lift.ledger()
    assert row["interval"] == sequence and row["intervalKind"] == "always_valid"
