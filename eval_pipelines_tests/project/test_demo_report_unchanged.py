"""The demo's holdout report, field by field, equals the one stored in
``fixtures/demo_holdout_report.json`` (written by the code before the report was assembled in
the core): a redesign keeps every figure, verdict and warning. Only what measures the machine
(seconds, timestamps, run ids) is left out of the comparison.

To write the fixture again after an intended change of the report, redirect the output of
``python -m eval_pipelines_tests.project.test_demo_report_unchanged`` into that file, and say in the
commit why the figures changed."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from eval_pipelines import api
from eval_pipelines_tests.helpers.paths import FIXTURES, REPO

ROOT = REPO
FIXTURE = FIXTURES / "demo_holdout_report.json"
# Keys whose values measure the machine or the moment, not the evaluation.
VOLATILE = frozenset({"seconds", "elapsedSeconds", "createdAt", "runId", "buildSeconds"})


def normalised(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def demo_report(root: Path) -> dict[str, Any]:
    """The report of ``make demo``'s first holdout evaluation (same files, same options), in
    the warehouse ``EVAL_PIPELINES_WAREHOUSE`` names (the run reads it there)."""
    demo = root / "data" / "demo"
    api.create_case(
        "icd10cm",
        api.CaseSource(
            demo / "icd10cm_records.parquet",
            tree_path=demo / "icd10cm_tree.parquet",
            target_depth=[3, 4],
        ),
    )
    api.add_memo_entry("icd10cm", demo / "memo_pregnancy.yaml")
    started = api.start_holdout_eval(
        "icd10cm",
        json.loads((demo / "variants.json").read_text()),
        api.HoldoutOptions(
            config=json.loads((demo / "config.json").read_text()),
            sample_size=200,
            seed=7,
            group_field="group_key",
            aa=True,
            leakage_check=True,
        ),
        wait=True,
    )
    status = api.get_holdout_eval("icd10cm", started.eval_id)
    return normalised({"report": status.report, "markdown": status.report_markdown})


def test_the_demo_report_is_unchanged_field_by_field(workdir: Path) -> None:
    expected = json.loads(FIXTURE.read_text())
    seen = demo_report(ROOT)
    differences = list(_differences(expected, seen, "report"))
    assert not differences, "\n".join(differences[:20])


def test_the_docs_quote_the_demo_report_as_it_is() -> None:
    """Every table row and check line docs/holdout.md quotes under "What `make demo` prints"
    is a line of the demo report's markdown (the fixture the test above holds to the real
    run): the excerpt showed an A/A false positive at L3 the demo no longer printed."""
    markdown = json.loads(FIXTURE.read_text())["markdown"].splitlines()
    page = (ROOT / "docs" / "holdout.md").read_text()
    excerpt = page.split("## What `make demo` prints", 1)[1].split("```", 2)[1]
    # Table rows are quoted whole; the check's line up to its first sentence.
    quoted = [line for line in excerpt.splitlines() if line.startswith(("|", "A/A check"))]
    assert len(quoted) >= 8
    assert [q for q in quoted if not any(line.startswith(q) for line in markdown)] == []


def _differences(expected: Any, seen: Any, at: str):
    if isinstance(expected, dict) and isinstance(seen, dict):
        for key in sorted(set(expected) | set(seen)):
            if key not in seen:
                yield f"{at}.{key}: missing"
            elif key not in expected:
                yield f"{at}.{key}: new"
            else:
                yield from _differences(expected[key], seen[key], f"{at}.{key}")
    elif isinstance(expected, list) and isinstance(seen, list) and len(expected) == len(seen):
        for i, (e, s) in enumerate(zip(expected, seen, strict=True)):
            yield from _differences(e, s, f"{at}[{i}]")
    elif isinstance(expected, float) and isinstance(seen, float):
        # Seeded bootstraps give the same floats on one machine; a last-digit difference
        # from another BLAS or CPU is not a changed figure.
        if not math.isclose(expected, seen, rel_tol=1e-9, abs_tol=1e-12):
            yield f"{at}: expected {expected!r}, seen {seen!r}"
    elif expected != seen:
        yield f"{at}: expected {expected!r}, seen {seen!r}"


if __name__ == "__main__":
    import os
    import tempfile

    home = Path(tempfile.mkdtemp())
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["EVAL_PIPELINES_WAREHOUSE"] = str(home / "warehouse.duckdb")
    os.environ["EVAL_PIPELINES_INDEX_DIR"] = str(home / "indexes")
    os.chdir(home)
    print(json.dumps(demo_report(ROOT), indent=1, sort_keys=True))
    sys.exit(0)
