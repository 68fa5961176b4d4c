"""How a run's steps execute, chosen by run config rather than code.

``execution: {config: ENGINE}`` selects one of three engines (in process when omitted)::

    in_process: {}                                      # one process (the default)
    multiprocess: {max_concurrent: 2}                   # a process per step
    dask: {address: "tcp://scheduler:8786"}             # tasks on an existing Dask cluster
    dask: {local: {n_workers: 2, threads_per_worker: 1}}  # a Dask cluster started for the run

The first two are Dagster's own executors, built by the same functions that build
``in_process_executor`` and ``multiprocess_executor``. For Dask, ``dagster_dask.dask_executor``
is not usable as it stands with this job (dagster-dask 0.29.27, distributed 2026.8, tried
here): it plans every step up front, so steps behind a dynamic fan-out (the per-variant
classify steps) never run and the run still succeeds (dagster-io/dagster#9785); it passes the
``DagsterRun`` itself as a task argument, which Dask walks as a tuple, failing on the run's
op-concurrency record in any job with pools ("Iteration is not allowed on `@record`
RunOpConcurrency"); and it neither claims pool slots nor retries steps. So the Dask engine is
Dagster's ``StepDelegatingExecutor`` (the orchestrator behind the Kubernetes and Docker
executors: dynamic outputs, pools, retries, the event log as the channel back) with a
:class:`DaskStepHandler` that runs each step as one Dask task, the way
``dagster api execute_step`` runs it in a pod.

DuckDB writers stay single on every engine: steps in the ``duckdb`` pool claim the instance's
pool slot before they are launched (limit 1), and each connection also waits for DuckDB's
file lock. On Dask, a step of pool ``P`` further asks for one unit of the Dask worker resource
``P`` when some worker declares it (``dask worker ... --resources duckdb=1`` on the node that
holds the warehouse), so writers run only there while the classify steps run anywhere.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import dagster as dg

from eval_pipelines.defs.dagster_private import (
    IN_PROC_CONFIG,
    MULTI_PROC_CONFIG,
    CheckStepHealthResult,
    DagsterEvent,
    EngineEventData,
    ExecuteStepArgs,
    ExecutionPlan,
    Executor,
    ExecutorRequirement,
    InitExecutorContext,
    PlanOrchestrationContext,
    RetryMode,
    StepDelegatingExecutor,
    StepHandler,
    StepHandlerContext,
    _core_in_process_executor_creation,
    _core_multiprocess_executor_creation,
    deserialize_value,
    execute_step_command_body,
    multiple_process_executor_requirements,
    serialize_value,
)

ENGINES = ("in_process", "multiprocess", "dask")
DEFAULT_ENGINE = "in_process"
DEFAULT_WORKERS = 2
# Dagster-dask's tag for Dask worker resources a step needs, honoured here too.
DASK_RESOURCES_TAG = "dagster-dask/resource_requirements"
# How often the orchestrator reads the run's new events. Dagster's default of 1 s adds up to a
# second per step of a chain that is mostly sequential; one small read every 0.2 s is cheap
# next to the steps.
POLL_SECONDS = 0.2

DASK_CONFIG = dg.Field(
    dg.Selector(
        {
            "address": dg.Field(
                dg.StringSource,
                description="Address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786.",
            ),
            "local": dg.Field(
                dg.Permissive(
                    {
                        "n_workers": dg.Field(int, default_value=DEFAULT_WORKERS),
                        # Dagster-dask pins one thread per worker too: two steps in threads of
                        # one process would share Dagster's process-wide state.
                        "threads_per_worker": dg.Field(int, default_value=1),
                    }
                ),
                description="Start a distributed.LocalCluster for the run (worker processes on "
                "this machine, on loopback); other keys are passed to LocalCluster.",
            ),
        }
    ),
    description="Run each step as a task on a Dask cluster.",
)

EXECUTOR_CONFIG = dg.Field(
    dg.Selector(
        {"in_process": IN_PROC_CONFIG, "multiprocess": MULTI_PROC_CONFIG, "dask": DASK_CONFIG}
    ),
    default_value={DEFAULT_ENGINE: {}},
)


def executor_run_config(
    engine: str, *, address: str | None = None, workers: int = DEFAULT_WORKERS
) -> dict[str, Any]:
    """The run-config fragment that selects an engine, to merge into a run's config.

    Parameters
    ----------
    engine : str
        ``"in_process"``, ``"multiprocess"`` or ``"dask"``.
    address : str, optional
        Dask scheduler address (``"tcp://host:8786"``); only with ``engine="dask"``. Without
        it, ``dask`` starts a local cluster for the run.
    workers : int, default 2
        Processes at once for ``multiprocess``, worker processes of the local Dask cluster;
        ignored in process and with an address (the cluster has its own workers).

    Returns
    -------
    dict
        ``{"execution": {"config": {engine: ...}}}``.

    Raises
    ------
    ValueError
        For an unknown engine, an address without ``dask``, an address without a scheme
        (``tcp://``, ``tls://``...) or fewer than one worker.

    Examples
    --------
    >>> executor_run_config("dask", address="tcp://127.0.0.1:8786")
    {'execution': {'config': {'dask': {'address': 'tcp://127.0.0.1:8786'}}}}
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    if address is not None and engine != "dask":
        raise ValueError(f"an address names a Dask scheduler: use engine 'dask', not {engine!r}")
    if address is not None and "://" not in address:
        raise ValueError(f"Dask scheduler address {address!r} needs a scheme, e.g. tcp://host:8786")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, not {workers!r}")
    config: dict[str, Any]
    if engine == "in_process":
        config = {}
    elif engine == "multiprocess":
        # Forkserver: each step's process forks from one that has imported the definitions,
        # instead of importing them again (docs/benchmarks.md, "Figures behind code choices").
        config = {"max_concurrent": workers, "start_method": {"forkserver": {}}}
    elif address is not None:
        config = {"address": address}
    else:
        config = {"local": {"n_workers": workers, "threads_per_worker": 1}}
    return {"execution": {"config": {engine: config}}}


def execute_step_on_worker(serialized_args: str) -> None:
    """Run one step inside a Dask worker, as ``dagster api execute_step`` runs it in a pod.

    The arguments travel serialized (a string, which Dask does not walk); the step reports
    through the instance's event log, which the orchestrator reads, so nothing is returned.
    """
    args = deserialize_value(serialized_args, ExecuteStepArgs)
    if args.instance_ref is None:
        raise RuntimeError("a step sent to Dask needs a persistent instance to report to")
    with dg.DagsterInstance.from_ref(args.instance_ref) as instance:
        run = instance.get_run_by_id(args.run_id)
        if run is None:
            raise RuntimeError(f"run {args.run_id} is not in the instance the step was given")
        for _ in execute_step_command_body(args, instance, run):
            pass


class DaskStepHandler(StepHandler):
    """Launches each step as a Dask task on a cluster held open for the run.

    Parameters
    ----------
    address : str, optional
        Scheduler of an existing cluster.
    local : mapping, optional
        ``distributed.LocalCluster`` keywords, for a cluster started (and closed) with the run.
    """

    def __init__(
        self, *, address: str | None = None, local: Mapping[str, Any] | None = None
    ) -> None:
        if (address is None) == (local is None):
            raise ValueError("give a Dask scheduler address or a local cluster, exactly one")
        self._address = address
        self._local = dict(local) if local is not None else None
        self._client: Any = None
        self._futures: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return "DaskStepHandler"

    @contextmanager
    def connected(self) -> Iterator[None]:
        """Connect to the cluster (starting the local one) for as long as the run executes."""
        from dask.distributed import Client, LocalCluster

        cluster: Any = self._address
        if self._local is not None:
            # Loopback and no dashboard unless asked: a run's cluster serves only this run.
            options = {
                "processes": True,
                "host": "127.0.0.1",
                "dashboard_address": None,
                **self._local,
            }
            cluster = LocalCluster(**options)
        try:
            with Client(cluster) as client:
                self._client = client
                yield
        finally:
            self._client = None
            self._futures.clear()
            if self._local is not None:
                cluster.close()

    def _worker_resources(self, step_tags: Mapping[str, str], pool: str | None) -> dict[str, Any]:
        """The Dask worker resources a step needs: those its dagster-dask tag names, plus one
        unit of resource ``pool`` when some worker declares it (pins the pool's steps to the
        workers that hold what the pool guards, e.g. the DuckDB file)."""
        resources: dict[str, Any] = dict(json.loads(step_tags.get(DASK_RESOURCES_TAG, "{}")))
        if pool and pool not in resources:
            workers = self._client.scheduler_info(n_workers=-1)["workers"].values()
            if any(pool in (worker.get("resources") or {}) for worker in workers):
                resources[pool] = 1
        return resources

    def launch_step(self, step_handler_context: StepHandlerContext) -> Iterator[DagsterEvent]:
        (step_key,) = step_handler_context.execute_step_args.step_keys_to_execute or ()
        step_context = step_handler_context.get_step_context(step_key)
        resources = self._worker_resources(
            step_handler_context.step_tags[step_key], step_context.step.pool
        )
        # A fresh key per launch: a retried step must not be mistaken for its earlier attempt.
        task_key = f"{step_handler_context.dagster_run.run_id}.{step_key}.{uuid.uuid4().hex[:8]}"
        self._futures[step_key] = self._client.submit(
            execute_step_on_worker,
            serialize_value(step_handler_context.execute_step_args),
            key=task_key,
            resources=resources or None,
            pure=False,
        )
        yield DagsterEvent.step_worker_starting(
            step_context,
            message=f"Submitted step {step_key} to Dask at {self._client.scheduler.address}.",
            metadata={"dask_task": task_key, "dask_resources": str(resources or "any worker")},
        )

    def check_step_health(self, step_handler_context: StepHandlerContext) -> CheckStepHealthResult:
        (step_key,) = step_handler_context.execute_step_args.step_keys_to_execute or ()
        future = self._futures.get(step_key)
        if future is None:
            return CheckStepHealthResult.unhealthy(f"no Dask task for step {step_key} in this run")
        if future.status in ("error", "cancelled", "lost"):
            reason = f": {future.exception()!r}" if future.status == "error" else ""
            return CheckStepHealthResult.unhealthy(
                f"Dask task {future.key} {future.status}{reason}"
            )
        return CheckStepHealthResult.healthy()

    def terminate_step(self, step_handler_context: StepHandlerContext) -> Iterator[DagsterEvent]:
        (step_key,) = step_handler_context.execute_step_args.step_keys_to_execute or ()
        future = self._futures.pop(step_key, None)
        if future is not None:
            future.cancel()
        # Dask cancels a task that has not started; one already running finishes its step.
        yield DagsterEvent.engine_event(
            step_handler_context.get_step_context(step_key),
            f"Cancelled Dask task of step {step_key} (a step already running finishes).",
            EngineEventData(),
        )


class DaskExecutor(StepDelegatingExecutor):
    """Dagster's step-delegating orchestration with steps as Dask tasks; the cluster
    connection lives exactly as long as the run's execution."""

    def __init__(self, step_handler: DaskStepHandler) -> None:
        super().__init__(step_handler, retries=RetryMode.ENABLED, sleep_seconds=POLL_SECONDS)
        self._dask = step_handler

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[DagsterEvent]:
        with self._dask.connected():
            yield from super().execute(plan_context, execution_plan)


def _requirements(config: Mapping[str, object]) -> Sequence[ExecutorRequirement]:
    """In process needs nothing; the other engines reload the job elsewhere and hand step
    outputs over through the IO manager's storage."""
    return [] if DEFAULT_ENGINE in config else multiple_process_executor_requirements()


@dg.executor(name="engine", config_schema=EXECUTOR_CONFIG, requirements=_requirements)
def engine_executor(init_context: InitExecutorContext) -> Executor:
    """In process (default), a process per step, or steps as tasks on a Dask cluster,
    selected by ``execution: {config: ...}`` in the run config."""
    ((engine, config),) = init_context.executor_config.items()
    assert isinstance(config, Mapping)  # the schema above guarantees a mapping per engine
    if engine == "in_process":
        return _core_in_process_executor_creation(config)
    if engine == "multiprocess":
        return _core_multiprocess_executor_creation(config)
    ((cluster, options),) = config.items()
    if cluster == "address":
        return DaskExecutor(DaskStepHandler(address=options))
    return DaskExecutor(DaskStepHandler(local=options))
