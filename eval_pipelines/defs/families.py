"""What every asset of one evaluation kind shares: its partitions, group, owners, tags and
kinds, and the sentence saying how its partitions are made (each asset's description ends
with it, so the UI says where a partition comes from)."""

from dataclasses import dataclass
from typing import Any

import dagster as dg

from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.storage.warehouse import WarehouseUnavailable

OWNERS = ["team:eval-pipelines"]
KINDS = frozenset({"duckdb", "python"})
# Jobs the CLI runs in its own process (`evaluate`, `lift ingest`, `lift report`) answer on the
# terminal: the run's console lines (every event, a stack trace for a refusal) would bury that
# answer. The event log the UI shows is written to the instance whatever this level says.
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass(frozen=True)
class AssetFamily:
    partitions_def: dg.PartitionsDefinition
    group_name: str
    evaluation_kind: str
    how_to_create: str

    def options(
        self, description: str, kinds: set[str] | None = None, *, partitioned: bool = True
    ) -> dict[str, Any]:
        """Keyword arguments of ``dg.asset`` for an asset of this family (not ``partitioned``:
        one asset over every partition, as lift's report reads every day)."""
        return {
            "partitions_def": self.partitions_def if partitioned else None,
            "group_name": self.group_name,
            "kinds": set(kinds if kinds is not None else KINDS),
            "owners": OWNERS,
            "tags": {"evaluation_kind": self.evaluation_kind},
            "description": f"{description}\n\n{self.how_to_create}",
        }


# What a stage refuses rather than fails on: bad or missing input, including a warehouse that
# does not exist yet (a partition added in the UI before any case was loaded).
REFUSALS = (InputError, ConflictError, NotFoundError, WarehouseUnavailable)


def refusal(error: Exception, metadata: dict[str, Any] | None = None) -> dg.Failure:
    """A refusal reads as one clear sentence in the UI and is not retried (Dagster still lists
    its own step frames under it, as for every step failure; no error chain follows)."""
    return dg.Failure(description=str(error), allow_retries=False, metadata=metadata)


# Metadata shows a figure to four decimals (0.3875, not 0.38749999999999996): what the UI
# prints and plots. The exact values stay in the report JSON.
METADATA_DECIMALS = 4


def shown(value: Any) -> Any:
    """``value`` with every plain float rounded to :data:`METADATA_DECIMALS`, through dicts,
    lists and tuples; anything else (a ``MetadataValue``, an int, text) as it is."""
    if isinstance(value, float):
        return round(value, METADATA_DECIMALS)
    if isinstance(value, dict):
        return {k: shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(shown(v) for v in value)
    return value
