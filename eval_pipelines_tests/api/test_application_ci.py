"""``api.lift.record_ci`` and the ledger from Python: typed results, and every refusal before
anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines import settings
from eval_pipelines.api import lift
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.evidence import ApplicationCI, confirmed_improvement
from eval_pipelines.storage.warehouse import exists


def test_record_ci_returns_the_typed_result_and_the_ledger_lists_it(workdir: Path) -> None:
    recorded = lift.record_ci(
        "acme", candidate="tier-small", commit="9f1c2ab", suite="e2e", passed=12, failed=0
    )
    assert isinstance(recorded, lift.RecordedCI) and recorded.new
    assert isinstance(recorded.result, ApplicationCI) and recorded.result.passed
    assert not confirmed_improvement(recorded.result)
    assert recorded.to_json()["new"] is True and recorded.to_json()["kind"] == "application_ci"
    (entry,) = lift.ledger()
    assert isinstance(entry, lift.LedgerApplicationCI)
    assert (entry.candidate, entry.status) == ("tier-small", "no live claim")
    assert entry.application_ci == (recorded.result.to_json(),)


@pytest.mark.parametrize(
    ("options", "field", "rule"),
    [
        (
            {"workflow": "wf", "revision": "abcdef12", "binds": "model_calls"},
            "binds",
            "a raw model-call comparison cannot claim application coverage",
        ),
        ({"workflow": "wf"}, "revision", "needs `workflow` and `revision`"),
        ({"workflow": "wf", "revision": "abcdef12"}, "workflow", "there is no warehouse yet"),
        ({"workflow": "wf", "revision": "abcdef12", "skipped": 2}, "skipped", "not both"),
        ({"commit": "9f1c2ab", "suite": "e2e", "passed": 1}, "failed", "needs `commit`"),
        ({}, "commit", "a harness result needs"),
    ],
)
def test_refusals_name_the_parameter_and_write_nothing(
    workdir: Path, options: dict[str, object], field: str, rule: str
) -> None:
    with pytest.raises(InputError) as refused:
        lift.record_ci("acme", candidate="tier-small", **options)  # type: ignore[arg-type]
    assert refused.value.field == field and rule in str(refused.value)
    assert not exists(settings.warehouse_location())
