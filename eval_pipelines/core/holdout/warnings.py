"""A warning a holdout report carries: a stable code and a sentence for people. A leaf module,
so every rule that warns (report, noise floor) builds them without importing the report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportWarning:
    code: str
    message: str
