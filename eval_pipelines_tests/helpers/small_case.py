"""The four-chapter case most run tests evaluate (the ``small_case`` fixture's)."""

from __future__ import annotations

from pathlib import Path

SMALL_CASE_ID = "small"


def create_small_case(case_files: dict[str, Path]) -> str:
    """Create the case from ``small_case_files`` in the configured warehouse (target depth 3,4);
    returns its id."""
    from eval_pipelines import api

    api.create_case(
        SMALL_CASE_ID,
        api.CaseSource(case_files["records"], tree_path=case_files["tree"], target_depth=[3, 4]),
    )
    return SMALL_CASE_ID
