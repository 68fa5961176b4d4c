"""Where the tests find the repository's files, whatever folder a test module sits in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "data" / "demo"
FIXTURES = REPO / "eval_pipelines_tests" / "fixtures"
