"""What every part of the API shares: where the warehouse is, and the failure type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_pipelines import settings


class EvalFailed(RuntimeError):
    """The evaluation's run failed or was canceled; ``status`` is its status document."""

    def __init__(self, message: str, status: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status


def resolve_warehouse(warehouse: Path | str | None) -> Path:
    """An explicit warehouse path, else ``$EVAL_PIPELINES_WAREHOUSE`` or the default."""
    return Path(warehouse).absolute() if warehouse else settings.warehouse_path()
