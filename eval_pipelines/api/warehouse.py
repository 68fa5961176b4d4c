"""The warehouse itself: moving a DuckDB file into a PostgreSQL warehouse."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from eval_pipelines import settings
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.results import JsonResult
from eval_pipelines.storage.warehouse_copy import copy_to_postgres


@dataclass(frozen=True)
class WarehouseCopy(JsonResult):
    """A DuckDB warehouse file copied into PostgreSQL: the target's URL (no password) and the
    rows copied per table (``copiedRows`` in JSON)."""

    target: str
    copied_rows: Mapping[str, int]


def copy_warehouse(source: Path | str, *, to: str) -> WarehouseCopy:
    """Copy every table of the DuckDB warehouse file ``source`` into the empty PostgreSQL
    warehouse ``to`` (a ``postgresql://user@host:port/db`` URL, its password in
    ``$EVAL_PIPELINES_WAREHOUSE_PASSWORD``); returns the rows copied per table. Nothing is
    kept unless every table's rows compare equal."""
    target = settings.parse_warehouse(to, "to")
    if not isinstance(target, settings.PostgresWarehouse):
        raise InputError("to", to, "must be a postgresql://user@host:port/db URL")
    copied = copy_to_postgres(Path(source).absolute(), target)
    return WarehouseCopy(target=target.url, copied_rows=MappingProxyType(dict(copied)))
