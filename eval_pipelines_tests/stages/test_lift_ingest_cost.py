"""A log's cost and execution-envelope columns through ingest into a real DuckDB file: stored
as logged, part of a request's content (the same cost again is skipped, another cost refuses
the file), and null on rows that log none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines import settings
from eval_pipelines.core.errors import InputError
from eval_pipelines.stages.lift_ingest import ingest_file
from eval_pipelines.storage import lift as lift_store
from eval_pipelines.storage.warehouse import connect

ENVELOPE = {
    "model": "small-1",
    "provider": "acme",
    "tools": "sha256:ab12",
    "response_format": "json_schema",
    "generation_params": "temperature=0",
    "streaming": False,
    "provider_policy": "zero-retention",
}


def _row(request_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "timestamp": "2026-11-23T10:00:00Z",
        "request_id": request_id,
        "workspace_id": "ws",
        "cluster": f"trace-{request_id}",
        "exposure_arm": "treated",
        "exposure_epoch": "e2",
        "claim_type": "invoice_coding",
        "situation_class": "single_line",
        "source": "declared",
        "outcome": True,
        **extra,
    }


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cost_and_envelope_are_stored_and_read_back(workdir: Path) -> None:
    log = _write(
        workdir / "a.jsonl",
        [
            _row("r1", input_tokens=1200, output_tokens=80, **ENVELOPE),
            _row("r2", cost=0.0031, currency="EUR", **ENVELOPE),
            _row("r3"),  # no cost logged: every cost column null, never 0
        ],
    )
    with connect(settings.warehouse_location(), create=True) as conn:
        assert ingest_file(conn, log).stored == 3
        rows = {r["request_id"]: r for r in lift_store.events(conn).to_dicts()}
    assert rows["r1"]["input_tokens"] == 1200 and rows["r1"]["output_tokens"] == 80
    assert rows["r1"]["cost"] is None and rows["r1"]["streaming"] is False
    assert {k: rows["r1"][k] for k in ENVELOPE} == ENVELOPE
    assert rows["r2"]["cost"] == pytest.approx(0.0031) and rows["r2"]["currency"] == "EUR"
    cost_columns = lift_store.COST_EVENT_COLUMNS.split(", ")
    assert {c: rows["r3"][c] for c in cost_columns} == dict.fromkeys(cost_columns)


def test_a_request_logged_again_with_another_cost_is_refused_naming_the_column(
    workdir: Path,
) -> None:
    first = _write(workdir / "a.jsonl", [_row("r1", cost=0.002, currency="USD", **ENVELOPE)])
    same = _write(workdir / "b.jsonl", [_row("r1", cost=0.002, currency="USD", **ENVELOPE)])
    changed = _write(workdir / "c.jsonl", [_row("r1", cost=0.004, currency="USD", **ENVELOPE)])
    retooled = _write(
        workdir / "d.jsonl",
        [_row("r1", cost=0.002, currency="USD", **{**ENVELOPE, "tools": "none"})],
    )
    with connect(settings.warehouse_location(), create=True) as conn:
        ingest_file(conn, first)
        again = ingest_file(conn, same)
        assert again.stored == 0 and again.skipped == 1
        with pytest.raises(InputError, match=r"has cost=0\.004, line 1 of .*a\.jsonl \(stored\)"):
            ingest_file(conn, changed)
        with pytest.raises(InputError, match=r"has tools=none"):
            ingest_file(conn, retooled)
        (stored,) = lift_store.events(conn).to_dicts()
    assert stored["cost"] == pytest.approx(0.002) and stored["tools"] == "sha256:ab12"
