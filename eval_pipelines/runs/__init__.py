"""One run model for every kind of run: launch, wait, read the state, notice dead runs.

The layer above the definitions (:mod:`eval_pipelines.defs`): the run tags, the code
location's name and the private-Dagster names live below, in
:mod:`eval_pipelines.defs.run_tags` and :mod:`eval_pipelines.defs.dagster_private`.

- :mod:`~eval_pipelines.runs.launching`: :func:`launch` (every run of every kind starts there)
  and :func:`wait`;
- :mod:`~eval_pipelines.runs.kinds`: the kinds of run, their jobs and partitions;
- :mod:`~eval_pipelines.runs.states`: a run's state as the CLI and API report it;
- :mod:`~eval_pipelines.runs.failures`: why a run did not succeed;
- :mod:`~eval_pipelines.runs.locations`: the code location runs are created from;
- :mod:`~eval_pipelines.runs.creation`: creating a run of a kind's job, with its tags;
- :mod:`~eval_pipelines.runs.submission`: submitting a run to the instance;
- :mod:`~eval_pipelines.runs.in_process`: executing a run in the process that created it;
- :mod:`~eval_pipelines.runs.termination`: the UI's Terminate, for a run executing here;
- :mod:`~eval_pipelines.runs.queue`: the run queue, the daemon, the CLI's dispatcher;
- :mod:`~eval_pipelines.runs.dispatcher`: the dispatcher itself (``python -m``);
- :mod:`~eval_pipelines.runs.reaping`: failing runs whose process died;
- :mod:`~eval_pipelines.runs.pool_slots`: freeing the pool slots of finished runs;
- :mod:`~eval_pipelines.runs.processes`: whether a process is alive;
- :mod:`~eval_pipelines.runs.progress`: a run's progress lines, read from its event log;
- :mod:`~eval_pipelines.runs.instance`: the Dagster instance and its ``dagster.yaml``;
- :mod:`~eval_pipelines.runs.locks`: the lock files that order the processes starting runs;
- :mod:`~eval_pipelines.runs.coordinator`: the instance's run coordinator (the queue, and the
  kind tag on the runs the UI launches);
- :mod:`~eval_pipelines.runs.dask_cluster`: checking a Dask cluster before a run is sent to it.
"""

from eval_pipelines.defs.run_tags import (
    DEFINITIONS_ATTRIBUTE,
    DEFINITIONS_MODULE,
    EVAL_TAG,
    KIND_TAG,
    LAUNCHED_BY_TAG,
    LOCATION_NAME,
    PARTITION_TAG,
    SINGLE_REPOSITORY,
)
from eval_pipelines.runs.dask_cluster import check_dask_cluster
from eval_pipelines.runs.failures import ended_runs, failure_reason
from eval_pipelines.runs.in_process import RunInterrupted, create_inline_run, execute_run_here
from eval_pipelines.runs.kinds import (
    KINDS,
    EvaluationKind,
    kind_of,
    prune_partitions,
    register_partition,
)
from eval_pipelines.runs.launching import HOUSEKEEPING_SECONDS, launch, wait
from eval_pipelines.runs.locations import job_origin, workspace
from eval_pipelines.runs.pool_slots import free_finished_run_slots
from eval_pipelines.runs.queue import (
    DAEMON_SILENCE_SECONDS,
    DISPATCHER_LOG_BYTES,
    daemon_running,
    dispatch_if_needed,
    dispatcher_lock_path,
    ensure_dispatcher,
    queued_runs,
    run_slot_free,
    uses_run_queue,
)
from eval_pipelines.runs.reaping import reap_dead_runs, run_worker_pid
from eval_pipelines.runs.states import FINISHED_STATES, STATES, RunState, newest_run, run_state
from eval_pipelines.runs.submission import submit
from eval_pipelines.runs.termination import TERMINATION_POLL_SECONDS

__all__ = [
    "DAEMON_SILENCE_SECONDS",
    "DEFINITIONS_ATTRIBUTE",
    "DEFINITIONS_MODULE",
    "DISPATCHER_LOG_BYTES",
    "EVAL_TAG",
    "FINISHED_STATES",
    "HOUSEKEEPING_SECONDS",
    "KINDS",
    "KIND_TAG",
    "LAUNCHED_BY_TAG",
    "LOCATION_NAME",
    "PARTITION_TAG",
    "SINGLE_REPOSITORY",
    "STATES",
    "TERMINATION_POLL_SECONDS",
    "EvaluationKind",
    "RunInterrupted",
    "RunState",
    "check_dask_cluster",
    "create_inline_run",
    "daemon_running",
    "dispatch_if_needed",
    "dispatcher_lock_path",
    "ended_runs",
    "ensure_dispatcher",
    "execute_run_here",
    "failure_reason",
    "free_finished_run_slots",
    "job_origin",
    "kind_of",
    "launch",
    "newest_run",
    "prune_partitions",
    "queued_runs",
    "reap_dead_runs",
    "register_partition",
    "run_slot_free",
    "run_state",
    "run_worker_pid",
    "submit",
    "uses_run_queue",
    "wait",
    "workspace",
]
