"""The states the checks before reading share, and the two arms they contrast.

A leaf, so that each check (:mod:`~eval_pipelines.core.lift.sample_ratio_check`,
:mod:`~eval_pipelines.core.lift.assignment_check`,
:mod:`~eval_pipelines.core.lift.cluster_size_check`,
:mod:`~eval_pipelines.core.lift.audit_check`) and the module that runs them all
(:mod:`~eval_pipelines.core.lift.checks`) read one spelling of each.
"""

from __future__ import annotations

__all__ = [
    "CONTROL",
    "FAILED",
    "INSUFFICIENT_AUDIT",
    "NOT_RUN",
    "PASSED",
    "TREATED",
    "UNAUDITED",
]

#: The outcome audit's states.
UNAUDITED, INSUFFICIENT_AUDIT, PASSED, FAILED = "unaudited", "insufficient", "passed", "failed"
#: The cluster-size check's state when the logs cannot tell a key logged per request from
#: single-request units.
NOT_RUN = "not_run"
#: The two arms the checks contrast: treated against lever holdout.
TREATED, CONTROL = "treated", "lever_holdout"
