"""Run one evaluation's Dagster job in this process: ``python -m eval_pipelines.launch EVAL RUN``.

The CLI starts this in the background so ``eval holdout`` can print ``{evalId, runId, status}``
at once; the run, its steps and materialisations land in the Dagster instance like any other.
"""

from __future__ import annotations

import sys

from dagster import DagsterInstance, ExecuteInProcessResult

from eval_pipelines.defs.jobs import HOLDOUT_JOB

EVAL_TAG = "eval_pipelines/eval_id"


def run_evaluation(
    instance: DagsterInstance, eval_id: str, run_id: str | None = None
) -> ExecuteInProcessResult:
    """Materialise the holdout chain for ``eval_id`` (in-process executor)."""
    from eval_pipelines.definitions import defs

    job = defs.resolve_job_def(HOLDOUT_JOB)
    return job.execute_in_process(
        instance=instance,
        partition_key=eval_id,
        run_id=run_id,
        raise_on_error=False,
        tags={EVAL_TAG: eval_id},
    )


def main(argv: list[str] | None = None) -> int:
    from eval_pipelines.instance import dagster_instance

    eval_id, run_id = (argv if argv is not None else sys.argv[1:])[:2]
    result = run_evaluation(dagster_instance(), eval_id, run_id)
    return 0 if result.success else 1


if __name__ == "__main__":
    raise SystemExit(main())
