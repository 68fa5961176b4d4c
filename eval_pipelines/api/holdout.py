"""Holdout evaluations: start one, run it again, prune partition keys that name none (000's
SDK calls). Following one is :mod:`eval_pipelines.api.holdout_status`; its rows and the
case's list, :mod:`eval_pipelines.api.holdout_results`."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eval_pipelines.api._holdout_state import (
    KIND,
    HoldoutStatus,
    StoredEvaluation,
    own_evaluation,
    progress_events,
)
from eval_pipelines.api._shared import (
    EvalInterrupted,
    require_run_warehouse,
    resolve_warehouse,
)
from eval_pipelines.core.chat.settings import ChatSettings
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.chat_variants import (
    LABEL_ROWS,
    chat_estimates,
    chat_variants_checked,
    sampled_labels,
)
from eval_pipelines.core.holdout.classify import known_classifiers
from eval_pipelines.core.holdout.classify_config import CHAT_CLASSIFIER
from eval_pipelines.core.holdout.sampling import draw_sample
from eval_pipelines.core.holdout.spec import (
    CaseContext,
    HoldoutOptions,
    HoldoutSpec,
    parse_holdout_request,
)
from eval_pipelines.core.holdout.token_policy import check_token_budget, estimate_tokens
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage import holdout_evaluations as holdout_evaluations_store
from eval_pipelines.storage import memo as memo_store
from eval_pipelines.storage.warehouse import (
    CLI_WAIT_SECONDS,
    connect,
    transaction,
    writers_take_turns,
)


@dataclass(frozen=True)
class LaunchedEval(JsonResult):
    """A started (or re-run, or registered) evaluation: ``{evalId, runId, status}``, plus
    ``estimatedTokens`` for a new one. ``status`` is ``registered`` (no run), ``queued`` or
    ``running`` for a submitted run, ``complete``, ``failed`` or ``canceled`` for one waited
    for."""

    eval_id: str
    run_id: str | None
    status: str
    estimated_tokens: int | None = json_field(omit_none=True, default=None)


def _case_context(conn: Any, case_id: str) -> CaseContext:
    """What the spec parser needs; cheap, because it is read while holding the write lock."""
    info = cases_store.load_case(conn, case_id)
    return CaseContext(
        case_id=case_id,
        records_version=info.records_version,
        tree_version=info.tree_version,
        max_depth=cases_store.tree_depth(conn, case_id, info.tree_version),
        target_depth=info.target_depth,
        metadata_columns=info.metadata_columns,
        memo=memo_store.entry_contents(conn, case_id),
        # ``chat`` is built in for holdout variants (stages.chat_classify), not a registry entry.
        classifiers=(*known_classifiers(), CHAT_CLASSIFIER),
        n_records=info.n_records,
        embeddings_version=_current_embeddings(conn, case_id, info.records_version),
    )


def _current_embeddings(conn: Any, case_id: str, records_version: str) -> str | None:
    from eval_pipelines.storage import embeddings as embeddings_store

    current = embeddings_store.current_set(conn, case_id, records_version)
    return None if current is None else current.embeddings_version


def _check_flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise InputError(name, value, "must be true or false")


def _launch(
    eval_id: str,
    *,
    wait: bool,
    register_only: bool,
    run_id: str | None,
    stored: StoredEvaluation,
    progress: Callable[[HoldoutStatus], None] | None,
    timeout: float | None,
    run_config: dict[str, Any] | None = None,
) -> LaunchedEval:
    """Start run ``run_id`` of the evaluation's partition (:func:`eval_pipelines.runs.launch`)
    with ``run_config`` (the engine's, from :func:`_dask_run_config`). With ``wait``,
    ``progress`` is told about the run as it goes and the answer is the ended run's; Ctrl-C
    cancels the run and raises :class:`EvalInterrupted`."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    instance = dagster_instance()
    kind = runs.kind_of(KIND)
    runs.register_partition(instance, kind, eval_id)
    if register_only:
        return LaunchedEval(eval_id, None, "registered")
    on_event = progress_events(instance, stored, progress, run_id) if wait and progress else None
    try:
        state = runs.launch(
            kind,
            eval_id,
            wait=wait,
            run_id=run_id,
            on_event=on_event,
            timeout=timeout,
            instance=instance,
            run_config=run_config,
        )
    except runs.RunInterrupted as interrupted:
        ended = interrupted.state
        raise EvalInterrupted(
            f"run {ended.run_id} of evaluation {stored.row.eval_id} was {ended.state}; start "
            f"it again with 'eval-pipelines eval rerun {stored.row.case_id} {stored.row.eval_id}'"
        ) from interrupted
    return LaunchedEval(eval_id, state.run_id, _LAUNCH_STATUS.get(state.state, state.state))


def _dask_run_config(dask_scheduler: str | None) -> dict[str, Any] | None:
    """The run config of a run on the Dask cluster at ``dask_scheduler`` (None: the default
    engine), once the cluster is checked (:func:`eval_pipelines.runs.check_dask_cluster`):
    called before anything is written."""
    if dask_scheduler is None:
        return None
    from eval_pipelines import runs
    from eval_pipelines.defs.executors import executor_run_config

    runs.check_dask_cluster(dask_scheduler)
    return executor_run_config("dask", address=dask_scheduler)


# What a launch returns for a run that ended while it waited.
_LAUNCH_STATUS = {"succeeded": "complete"}


def _chat_estimates(
    conn: Any, spec: HoldoutSpec, settings: Mapping[str, ChatSettings]
) -> dict[str, Any]:
    """Each chat variant's estimate from the sample the run will draw (same keys, size and
    seed), read here: the texts and labels of its first rows and the titles of those labels
    (:func:`~eval_pipelines.core.holdout.chat_variants.chat_estimates`)."""
    keys = cases_store.record_keys(conn, spec.case_id, spec.records_version)
    sample = draw_sample(keys, spec.sample_size, seed=spec.seed)
    rows = cases_store.records_by_key(
        conn, spec.case_id, spec.records_version, list(sample.keys[:LABEL_ROWS])
    )
    labels = sampled_labels(sample.keys, rows)
    titles = cases_store.load_titles(conn, spec.case_id, spec.tree_version, labels)
    return chat_estimates(spec, settings, sample.keys, rows, titles)


def start_holdout_eval(
    case_id: str,
    variants: Sequence[Mapping[str, object]],
    options: HoldoutOptions | None = None,
    *,
    warehouse: Path | str | None = None,
    wait: bool = False,
    register_only: bool = False,
    timeout: float | None = None,
    progress: Callable[[HoldoutStatus], None] | None = None,
    dask_scheduler: str | None = None,
) -> LaunchedEval:
    """Register an evaluation (a dynamic partition keyed by its id) and launch its run.

    ``options`` (:class:`~eval_pipelines.core.holdout.spec.HoldoutOptions`, the defaults when
    None) says what is evaluated besides the variants: sample size, seed, grouping, the
    shared config, ``aa``, ``leakage_check``, ``trials``, ``confirm_tokens``.

    A ``chat`` variant's config is checked here against ``os.environ`` (the variable
    ``apiKeyEnv`` names must be set; the key itself is never stored): model (``options.model``,
    or ``models[llmLevel]``), base URL, prices, trials, concurrency, retries.
    ``options.trials`` (``--trials``) sets ``trials`` on every chat variant; it is refused on an
    evaluation without one (it would change nothing).

    ``options.aa`` adds the A/A arm (the baseline classified twice; the report gives the flip rate
    and the false-positive rate of 20 seeded half splits); ``leakage_check`` also scores the
    baseline ungrouped on the same sample and reports how much grouping moved each level.

    Before anything is written the tokens the variants' classifiers expect to spend are
    estimated (sample size x each classifier's declared tokens per record); above
    :data:`~eval_pipelines.core.holdout.token_policy.TOKEN_CONFIRMATION_LIMIT` the evaluation
    is refused with :class:`~eval_pipelines.core.holdout.token_policy.TokenConfirmationNeeded`
    unless ``options.confirm_tokens``.

    The run is launched as every run is (:func:`eval_pipelines.runs.launch`): without
    ``wait`` it is submitted to the instance's run queue and this returns at once; with
    ``wait`` it is executed in this process when the queue would start it now (no Dagster
    daemon, a run slot free), else submitted and waited for (up to ``timeout`` seconds), and
    this returns once it has ended, as ``eval holdout --wait`` does. ``register_only``
    registers the evaluation without a run (materialise it from the UI or with ``dagster
    asset materialize``). While waiting, ``progress`` is called with the status document (see
    :func:`~eval_pipelines.api.holdout_status.get_holdout_eval`) at the run's first event and
    whenever its state or a variant step's changes; Ctrl-C cancels a run executing here and raises
    :class:`EvalInterrupted`. ``dask_scheduler`` (``tcp://host:port``) runs the steps as tasks
    on that existing Dask cluster (the engine's ``dask: {address: ...}`` run config); a
    malformed address, a scheduler that does not answer or has no worker, and a worker on
    another machine that cannot reach the instance, the warehouse or the step payloads are
    refused before anything is written (:mod:`eval_pipelines.runs.dask_cluster`). Returns a
    :class:`LaunchedEval` (``eval_id``, ``run_id``, ``status``, ``estimated_tokens``);
    ``status`` is ``queued`` (or ``running``) for a submitted run and ``complete``, ``failed``
    or ``canceled`` for one waited for.
    """
    options = options if options is not None else HoldoutOptions()
    _check_flag("wait", wait)
    _check_flag("register_only", register_only)
    if wait and register_only:
        raise InputError("wait", wait, "cannot wait for an evaluation registered without a run")
    if register_only and dask_scheduler is not None:
        raise InputError(
            "dask_scheduler", dask_scheduler, "an evaluation registered without a run has no run"
        )
    if not register_only:
        # The run reads $EVAL_PIPELINES_WAREHOUSE: its report would land there, not here.
        require_run_warehouse(warehouse)
    run_config = _dask_run_config(dask_scheduler)
    # The run id is written before the run exists: a warehouse that cannot take the write
    # refuses the evaluation before anything runs.
    run_id = str(uuid.uuid4()) if not register_only else None
    with connect(resolve_warehouse(warehouse)) as conn:
        # Any validation error below rolls the transaction back: no sequence number is used
        # and nothing is written. Machines sharing a warehouse number a case's evaluations
        # one at a time: one evaluation id, one answer.
        with writers_take_turns(conn, f"evaluations:{case_id}"), transaction(conn):
            context = _case_context(conn, case_id)
            sequence = cases_store.next_eval_sequence(conn, case_id)
            spec = parse_holdout_request(variants, options, case=context, sequence=sequence)
            spec, chat_settings = chat_variants_checked(spec, options.trials, os.environ)
            if chat_settings:
                spec = replace(spec, token_estimate=_chat_estimates(conn, spec, chat_settings))
            estimate = estimate_tokens(spec)
            check_token_budget(estimate, confirmed=options.confirm_tokens)
            holdout_evaluations_store.insert_evaluation(
                conn,
                eval_id=spec.eval_id,
                kind=KIND,
                case_id=case_id,
                sequence=sequence,
                seed=spec.seed,
                spec=spec.to_json(),
                run_id=run_id,
            )
            # Read back as every later status read sees it, on the connection already open.
            stored = StoredEvaluation(
                holdout_evaluations_store.evaluation_row(conn, spec.eval_id), None, None
            )
    launched = _launch(
        spec.eval_id,
        wait=wait,
        register_only=register_only,
        run_id=run_id,
        stored=stored,
        progress=progress,
        timeout=timeout,
        run_config=run_config,
    )
    return replace(launched, estimated_tokens=estimate.total_tokens)


def rerun_holdout_eval(
    case_id: str,
    eval_id: str,
    *,
    warehouse: Path | str | None = None,
    wait: bool = False,
    timeout: float | None = None,
    progress: Callable[[HoldoutStatus], None] | None = None,
    dask_scheduler: str | None = None,
) -> LaunchedEval:
    """Run an existing evaluation again from its stored spec (same sample, same pinned
    versions and memo): the report it writes is identical unless a classifier changed.
    ``wait``, ``timeout``, ``progress`` and ``dask_scheduler`` as for
    :func:`start_holdout_eval`."""
    _check_flag("wait", wait)
    run_id = str(uuid.uuid4())
    require_run_warehouse(warehouse)
    run_config = _dask_run_config(dask_scheduler)
    with connect(resolve_warehouse(warehouse)) as conn, transaction(conn):
        row = own_evaluation(conn, case_id, eval_id)
        holdout_evaluations_store.set_run_id(conn, eval_id, run_id)
        stored = StoredEvaluation(
            replace(row, run_id=run_id),
            holdout_evaluations_store.load_report(conn, eval_id),
            holdout_store.sample_hash(conn, eval_id),
        )
    return _launch(
        eval_id,
        wait=wait,
        register_only=False,
        run_id=run_id,
        stored=stored,
        progress=progress,
        timeout=timeout,
        run_config=run_config,
    )


def prune_partitions(*, warehouse: Path | str | None = None) -> list[str]:
    """Delete partition keys of ``holdout_evaluations`` that name no registered evaluation (a
    key added in the UI's Materialize dialog has no spec, and its failed runs turn the asset
    graph red until the key is gone). Returns the keys deleted."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        registered = set(holdout_evaluations_store.all_evaluation_ids(conn, KIND))
    return runs.prune_partitions(dagster_instance(), runs.kind_of(KIND), registered)
