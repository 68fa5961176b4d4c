"""Every kind of run's job carries the kind's tag, so a run a sensor, a schedule or the UI
launches of that job is found by the kind (the dispatcher fails a dead run only then)."""

from __future__ import annotations

from eval_pipelines.definitions import defs
from eval_pipelines.defs.run_tags import KIND_TAG
from eval_pipelines.runs.kinds import KINDS


def test_every_kind_s_job_carries_its_kind_tag() -> None:
    tagged = {
        kind.name: defs.resolve_job_def(kind.job_name).tags.get(KIND_TAG) for kind in KINDS.values()
    }
    assert tagged == {name: name for name in KINDS}
