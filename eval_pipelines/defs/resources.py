"""Resources: the DuckDB warehouse (and where its evidence indexes are cached)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb

from eval_pipelines import settings
from eval_pipelines.storage.warehouse import connect


class WarehouseResource(dg.ConfigurableResource):
    """The DuckDB file every stage reads and writes.

    Unset fields fall back, at run time, to ``$EVAL_PIPELINES_WAREHOUSE`` (default
    ``data/warehouse.duckdb``), ``$EVAL_PIPELINES_INDEX_DIR`` (default ``indexes/`` beside the
    warehouse) and ``$EVAL_PIPELINES_THREADS`` (default: all cores).
    """

    path: str | None = None
    index_dir: str | None = None
    threads: int | None = None

    def warehouse_path(self) -> Path:
        return Path(self.path).absolute() if self.path else settings.warehouse_path()

    def index_dir_path(self) -> Path:
        if self.index_dir:
            return Path(self.index_dir).absolute()
        return settings.index_dir(self.warehouse_path())

    def thread_count(self) -> int:
        return self.threads or settings.thread_count()

    @contextmanager
    def connect(self, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        with connect(self.warehouse_path(), read_only=read_only) as conn:
            yield conn
