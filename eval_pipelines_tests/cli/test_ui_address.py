"""The report's footer points at the Dagster UI on the port ``make dev`` serves (it said
http://127.0.0.1:3000 whatever ``make dev PORT=`` was), and names no address when no server
of this instance runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _complete_status() -> object:
    from eval_pipelines.api._holdout_state import HoldoutStatus, RunInfo, VariantStep

    return HoldoutStatus(
        eval_id="small-e0001-s7",
        case_id="small",
        kind="holdout",
        status="complete",
        run_id="r1",
        run=RunInfo("r1", "succeeded", "SUCCESS", None),
        variants=(VariantStep("baseline", "classify_variant[v0]", "succeeded"),),
        sample_hash="h",
        records_version="rv",
        tree_version="tv",
        memo_version="mv",
        spec={},
        report={},
        report_markdown="## report",
        report_run_id="r1",
    )


def _footer() -> str:
    from eval_pipelines.cli.output import status_markdown

    return status_markdown(_complete_status()).splitlines()[-1]  # type: ignore[arg-type]


def test_the_footer_names_the_port_make_dev_serves_while_it_runs(workdir: Path) -> None:
    from eval_pipelines.ui.devserver import record_ui_address

    assert _footer().startswith("In the Dagster UI (make dev): asset eval_report")
    # What `make dev PORT=3011` passes to the devserver, recorded for a live process.
    record_ui_address(["-h", "127.0.0.1", "-p", "3011", "-w", "workspace.yaml"], os.getpid())
    footer = _footer()
    # Before: "In the Dagster UI (make dev, http://127.0.0.1:3000): ..." whatever the port.
    assert footer.startswith("In the Dagster UI (http://127.0.0.1:3011): asset eval_report")
    assert "3000" not in footer

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    record_ui_address(["-p", "3012"], ended.pid)  # a server that has stopped
    assert _footer().startswith("In the Dagster UI (make dev): asset eval_report")
