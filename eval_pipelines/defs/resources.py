"""Resources: the DuckDB warehouse (and where its text indexes are cached)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb

from eval_pipelines import settings
from eval_pipelines.stages import shared_files
from eval_pipelines.storage.warehouse import connect

# A run waits this long for another process's lock before its step fails (and is retried):
# long enough that no slow reader ever fails an evaluation, short enough that a stuck one is
# reported within the hour.
RUN_LOCK_WAIT_SECONDS = 1800.0


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse every stage reads and writes (a DuckDB file or a PostgreSQL database).

    Unset fields fall back, at run time, to ``$EVAL_PIPELINES_WAREHOUSE`` (default
    ``data/warehouse.duckdb``), ``$EVAL_PIPELINES_SHARED_DIR`` (default: none),
    ``$EVAL_PIPELINES_INDEX_DIR`` (default ``indexes/`` beside the warehouse) and
    ``$EVAL_PIPELINES_THREADS`` (default: all cores). Index files live in ``index_dir`` when it
    is configured here, else under the shared location when there is one (see
    :func:`eval_pipelines.stages.shared_files.index_dir`), else in the index folder.
    """

    path: str | None = None
    index_dir: str | None = None
    shared_dir: str | None = None
    threads: int | None = None

    def warehouse_location(self) -> settings.WarehouseLocation:
        """``path`` (a DuckDB file's path or a ``postgresql://user@host:port/db`` URL), else
        the setting."""
        if self.path:
            return settings.parse_warehouse(self.path, "WarehouseResource.path")
        return settings.warehouse_location()

    def index_dir_path(self) -> Path:
        if self.index_dir:
            return Path(self.index_dir).absolute()
        return shared_files.run_index_dir(self.warehouse_location(), self.shared_dir)

    def thread_count(self) -> int:
        return self.threads or settings.thread_count()

    @contextmanager
    def connect(
        self, *, read_only: bool = False, create: bool = False
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open the warehouse, waiting (and saying so every 30 s) while another process holds
        it, for up to :data:`RUN_LOCK_WAIT_SECONDS`; ``create`` makes it (and its schema)
        when it does not exist yet."""
        log = dg.get_dagster_logger()
        path = self.warehouse_location()

        def waiting(seconds: float) -> None:
            log.info(f"waiting {seconds:.0f} s for the warehouse lock on {path}")

        with connect(
            path,
            read_only=read_only,
            create=create,
            wait_seconds=RUN_LOCK_WAIT_SECONDS,
            on_wait=waiting,
        ) as conn:
            yield conn
