"""The approximate index asset, partitioned by case: built once per embedding set, then
loaded; its recall against exact search is measured and shown."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from eval_pipelines.api.embeddings import embed_case
from eval_pipelines.defs.embeddings import embedding_ann_index
from eval_pipelines.defs.io_managers import TransientPickleIOManager
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines_tests.helpers.nn_descent_builds import BUILDS_NN_DESCENT

RESOURCES = {"warehouse": WarehouseResource(), "io_manager": TransientPickleIOManager()}


def _materialize(case: str) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [embedding_ann_index],
        instance=dg.DagsterInstance.get(),
        partition_key=case,
        resources=RESOURCES,
        raise_on_error=False,
    )


@BUILDS_NN_DESCENT
def test_index_is_built_once_then_loaded_with_its_recall(small_case: str, workdir: Path) -> None:
    embed_case(small_case, method="lsa", dim=16, seed=0)
    assert dg.DagsterInstance.get().has_dynamic_partition("cases", small_case)
    first = _materialize(small_case)
    assert first.success
    meta = first.asset_materializations_for_node("embedding_ann_index")[0].metadata
    assert meta["built"].value is True
    assert meta["records"].value == 3049 and meta["dim"].value == 16
    assert meta["recall_at_20"].value >= 0.95 and meta["probe_queries"].value == 200
    assert Path(str(meta["path"].value)).exists()
    again = _materialize(small_case)
    assert (
        again.asset_materializations_for_node("embedding_ann_index")[0].metadata["built"].value
        is False
    )


def test_a_case_without_embeddings_is_refused_in_one_sentence(small_case: str) -> None:
    dg.DagsterInstance.get().add_dynamic_partitions("cases", [small_case])
    result = _materialize(small_case)
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.error
    assert failure is not None and "case embed small" in failure.message
    with pytest.raises(AssertionError):
        assert result.success
