"""Holdout evaluations: start, re-run, status, wait, per-record rows (000's SDK calls)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eval_pipelines.api._shared import (
    EvalFailed,
    EvalInterrupted,
    require_run_warehouse,
    resolve_warehouse,
    stored_by_a_succeeded_step,
)
from eval_pipelines.core.errors import ConflictError, InputError, NotFoundError
from eval_pipelines.core.holdout.classify import known_classifiers
from eval_pipelines.core.holdout.spec import (
    CHAT_CLASSIFIER,
    DEFAULT_SEED,
    SAMPLE_SIZE_DEFAULT,
    CaseContext,
    HoldoutSpec,
    parse_holdout_request,
)
from eval_pipelines.core.inputs import is_finite_number
from eval_pipelines.core.results import JsonResult, json_field
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import evaluations as evaluations_store
from eval_pipelines.storage import holdout as holdout_store
from eval_pipelines.storage import memo as memo_store
from eval_pipelines.storage.warehouse import (
    CLI_WAIT_SECONDS,
    WarehouseBusy,
    connect,
    transaction,
)

KIND = "holdout"


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


@dataclass(frozen=True)
class TokenEstimateVariant(JsonResult):
    """One variant's expected spend: ``records`` x ``tokens_per_record`` = ``tokens``; for a
    chat variant ``chat`` says how (:class:`~eval_pipelines.core.chat.variant.ChatEstimate`:
    real prompts of sampled rows, trials, the answer budget, the cost)."""

    name: str
    classifier: str
    records: int
    tokens_per_record: int
    tokens: int
    chat: dict[str, Any] | None = json_field(omit_none=True, default=None)


@dataclass(frozen=True)
class TokenEstimate(JsonResult):
    """The tokens an evaluation is expected to spend, per variant and in total."""

    variants: tuple[TokenEstimateVariant, ...]
    total_tokens: int


@dataclass(frozen=True)
class RunInfo(JsonResult):
    """A Dagster run of the evaluation: its id, state (``queued``, ``running``,
    ``succeeded``, ``failed``, ``canceled``), Dagster's own status and, when it did not
    succeed, the reason."""

    run_id: str
    state: str
    dagster_status: str
    reason: str | None

    @property
    def finished(self) -> bool:
        # runs.states.FINISHED_STATES, not imported here: that module imports dagster.
        return self.state in ("succeeded", "failed", "canceled")


# A variant's step when the newest run was launched without it (a partial run from the UI).
NOT_IN_RUN = "not in this run"
# The asset whose materialisation is the evaluation's report, and the one whose steps
# classify (one per variant).
_REPORT_ASSET = "eval_report"
_CLASSIFY_ASSET = "variant_predictions"


@dataclass(frozen=True)
class VariantStep(JsonResult):
    """A variant's classify step in the newest run: ``pending``, ``running``, ``retrying``,
    ``succeeded``, ``failed``, or ``not in this run`` when the run did not select it."""

    name: str
    step: str
    status: str


@dataclass(frozen=True)
class HoldoutStatus(JsonResult):
    """The status document of a holdout evaluation (:func:`get_holdout_eval`).

    ``status`` is ``registered``, ``queued``, ``running``, ``complete``, ``incomplete``,
    ``failed``, ``canceled`` or ``unverified`` (a report, but no run of the evaluation in this
    Dagster instance); ``run`` is the newest run (None before any); ``spec`` is the
    stored spec document; ``report`` is the 000 report document, present with
    ``report_markdown`` and ``report_run_id`` (the run that wrote it) once one is stored.
    ``run_assets`` (``runAssets``, left out otherwise) lists the assets the newest run
    selected when it was launched for only part of the chain, without ``eval_report``: the
    status is then that run's, never ``complete``."""

    eval_id: str
    case_id: str
    kind: str
    status: str
    run_id: str | None
    run: RunInfo | None
    variants: tuple[VariantStep, ...]
    sample_hash: str | None
    records_version: str
    tree_version: str
    memo_version: str
    spec: dict[str, Any]
    report: dict[str, Any] | None = None
    report_markdown: str | None = None
    report_run_id: str | None = None
    run_assets: tuple[str, ...] | None = json_field(omit_none=True, default=None)

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        if self.report is None:
            # Before a report exists the document has none of its three keys.
            for key in ("report", "reportMarkdown", "reportRunId"):
                del document[key]
        return document


@dataclass(frozen=True)
class EvalRow(JsonResult):
    """One sampled record as one variant classified it (:func:`eval_rows`): correctness per
    level (``correct``: depth -> right), the record's cluster, the route, the candidates and
    the memo entries applied."""

    record_key: str
    cluster: int
    variant: str
    label: str
    prediction: str | None
    confidence: float
    route: str
    correct: Mapping[str, bool]
    candidates: tuple[dict[str, Any], ...]
    effective_candidates: int
    memo_applied: tuple[str, ...]
    error: str | None


@dataclass(frozen=True)
class EvalSummary(JsonResult):
    """One evaluation of a case (:func:`list_evals`)."""

    eval_id: str
    kind: str
    created_at: str
    seed: int
    sample_size: int
    grouping: dict[str, Any]
    variants: tuple[str, ...]
    records_version: str
    memo_version: str
    complete: bool


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
    stored: _Stored,
    progress: Callable[[HoldoutStatus], None] | None,
    timeout: float | None,
) -> LaunchedEval:
    """Start run ``run_id`` of the evaluation's partition (:func:`eval_pipelines.runs.launch`).
    With ``wait``, ``progress`` is told about the run as it goes and the answer is the ended
    run's; Ctrl-C cancels the run and raises :class:`EvalInterrupted`."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    instance = dagster_instance()
    kind = runs.kind_of(KIND)
    runs.register_partition(instance, kind, eval_id)
    if register_only:
        return LaunchedEval(eval_id, None, "registered")
    on_event = _progress_events(instance, stored, progress, run_id) if wait and progress else None
    try:
        state = runs.launch(
            kind,
            eval_id,
            wait=wait,
            run_id=run_id,
            on_event=on_event,
            timeout=timeout,
            instance=instance,
        )
    except runs.RunInterrupted as interrupted:
        ended = interrupted.state
        raise EvalInterrupted(
            f"run {ended.run_id} of evaluation {stored.row.eval_id} was {ended.state}; start "
            f"it again with 'eval-pipelines eval rerun {stored.row.case_id} {stored.row.eval_id}'"
        ) from interrupted
    return LaunchedEval(eval_id, state.run_id, _LAUNCH_STATUS.get(state.state, state.state))


# What a launch returns for a run that ended while it waited.
_LAUNCH_STATUS = {"succeeded": "complete"}
# The events that change what a progress line says: the run's start and end, the classify
# steps' starts, ends and retries.
_PROGRESS_EVENTS = (
    "RUN_START",
    "RUN_SUCCESS",
    "RUN_FAILURE",
    "RUN_CANCELED",
    "STEP_START",
    "STEP_SUCCESS",
    "STEP_FAILURE",
    "STEP_UP_FOR_RETRY",
)


def _progress_events(
    instance: Any,
    stored: _Stored,
    progress: Callable[[HoldoutStatus], None],
    run_id: str | None,
) -> Callable[[Any], None]:
    """An ``on_event`` that calls ``progress`` with the status document at the run's first
    event and whenever the run's state or a variant step's changes (the lines a waiting
    client prints)."""

    told: list[tuple[Any, ...]] = []

    def tell() -> None:
        current = instance.get_run_by_id(run_id)
        status = _status(instance, stored, current)
        summary = (status.status, tuple(v.status for v in status.variants))
        if not told or summary != told[-1]:
            told.append(summary)
            progress(status)

    def on_event(event: Any) -> None:
        if not told or (
            event.event_type.value in _PROGRESS_EVENTS
            and (event.step_key is None or "classify_variant[" in event.step_key)
        ):
            tell()

    return on_event


# Above this many estimated tokens an evaluation needs an explicit yes (spec 000).
TOKEN_CONFIRMATION_LIMIT = 400_000


class TokenConfirmationNeeded(ConflictError):
    """The evaluation would spend more tokens than the limit; nothing has been written."""

    def __init__(self, estimate: TokenEstimate) -> None:
        self.estimate = estimate
        super().__init__(
            f"tokens={estimate.total_tokens:,}: the estimate is above the limit of "
            f"{TOKEN_CONFIRMATION_LIMIT:,} tokens ({_per_variant(estimate)}); confirm with "
            "`confirm_tokens`"
        )


def _per_variant(estimate: TokenEstimate) -> str:
    return ", ".join(f"{v.name}: {v.records} x {v.tokens_per_record:,}" for v in estimate.variants)


def _estimate_tokens(spec: HoldoutSpec) -> TokenEstimate:
    """Tokens the evaluation is expected to spend: per variant, the sample size times its
    classifier's declared tokens per record (the built-in knn-vote declares 0); a chat
    variant's is the estimate from real prompts stored in the spec (:func:`_chat_checked`)."""
    from eval_pipelines.core.holdout.classify import tokens_per_record

    variants = []
    for v in spec.variants:
        chat = (spec.token_estimate or {}).get(v.name)
        if chat is not None:
            variants.append(
                TokenEstimateVariant(
                    v.name,
                    v.config.classifier,
                    chat["records"],
                    chat["tokens"] // chat["records"],
                    chat["tokens"],
                    chat,
                )
            )
            continue
        per_record = tokens_per_record(v.config.classifier, v.config)
        variants.append(
            TokenEstimateVariant(
                v.name,
                v.config.classifier,
                spec.sample_size,
                per_record,
                spec.sample_size * per_record,
            )
        )
    return TokenEstimate(tuple(variants), sum(v.tokens for v in variants))


def _chat_checked(conn: Any, spec: HoldoutSpec, trials: Any) -> HoldoutSpec:
    """The spec with ``trials`` set on every chat variant, each chat variant's settings
    checked against ``os.environ`` and its token estimate made from real prompts.

    Raises
    ------
    InputError
        Naming the field, for a bad chat setting, ``trials`` outside 1..20 or given without a
        chat variant, and for ``aa`` or ``leakageCheck`` with a chat baseline.
    """
    import os

    from eval_pipelines.core.chat.settings import TRIALS_MAX
    from eval_pipelines.core.chat.variant import variant_settings

    chat = [i for i, v in enumerate(spec.variants) if v.config.classifier == CHAT_CLASSIFIER]
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= TRIALS_MAX:
            raise InputError("trials", trials, f"must be a whole number from 1 to {TRIALS_MAX}")
        if not chat:
            raise InputError(
                "trials",
                trials,
                "asks each record several times of a chat variant; this evaluation has no "
                "chat variant (knn-vote and plug-ins answer the same every time)",
            )
        spec = replace(
            spec,
            variants=tuple(
                replace(v, config=replace(v.config, trials=trials)) if i in chat else v
                for i, v in enumerate(spec.variants)
            ),
        )
    if not chat:
        return spec
    if 0 in chat and spec.aa:
        raise InputError(
            "aa",
            True,
            "the A/A twin of a chat baseline would be answered from the call cache (the same "
            "requests): it measures nothing; use trials for the model's own non-determinism",
        )
    if 0 in chat and spec.leakage_check:
        raise InputError(
            "leakageCheck",
            True,
            "is not supported with a chat baseline (it would classify the sample a second "
            "time with the model); put a knn-vote variant first",
        )
    settings = {
        spec.variants[i].name: variant_settings(
            spec.variants[i].config, os.environ, where=f"variants[{i}].config"
        )
        for i in chat
    }
    return replace(spec, token_estimate=_chat_estimates(conn, spec, settings))


def _chat_estimates(conn: Any, spec: HoldoutSpec, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Each chat variant's estimate from the real prompts of the first sampled rows: the
    sample the run will draw (same keys, size and seed), their texts, the variant's memo
    instructions and candidate lines with real titles (the labels of the sampled rows, as many
    as the variant's ``candidates``: the most it can be offered)."""
    from eval_pipelines.core.chat.classify import chat_messages
    from eval_pipelines.core.chat.variant import ESTIMATE_ROWS, estimate_variant
    from eval_pipelines.core.holdout.sampling import draw_sample

    keys = cases_store.record_keys(conn, spec.case_id, spec.records_version)
    sample = draw_sample(keys, spec.sample_size, seed=spec.seed)
    rows = cases_store.records_by_key(
        conn, spec.case_id, spec.records_version, list(sample.keys[: max(ESTIMATE_ROWS, 200)])
    )
    labels = list(dict.fromkeys(rows[k][1] for k in sample.keys if k in rows))
    titles = cases_store.load_titles(conn, spec.case_id, spec.tree_version, labels)
    estimates = {}
    for variant in spec.variants:
        if variant.name not in settings:
            continue
        chat = settings[variant.name]
        ids = spec.memo_ids_of(variant) or ()
        instructions = [
            _InstructionOnly((spec.memo_entries or {}).get(i, {}).get("instruction", ""))
            for i in ids
        ]
        offered = [(code, 1.0) for code in labels[: variant.config.candidates]]
        prompts = [
            chat_messages(chat, rows[key][0], offered, instructions, titles)  # type: ignore[arg-type]
            for key in sample.keys[:ESTIMATE_ROWS]
        ]
        estimates[variant.name] = estimate_variant(chat, prompts, sample.size).to_json()
    return estimates


@dataclass(frozen=True)
class _InstructionOnly:
    """What :func:`~eval_pipelines.core.chat.classify.chat_messages` reads of a memo entry."""

    instruction: str


def start_holdout_eval(
    case_id: str,
    variants: Sequence[Mapping[str, object]],
    *,
    sample_size: int = SAMPLE_SIZE_DEFAULT,
    seed: int = DEFAULT_SEED,
    grouping: Mapping[str, object] | None = None,
    group_field: str | None = None,
    config: Mapping[str, object] | None = None,
    warehouse: Path | str | None = None,
    wait: bool = False,
    register_only: bool = False,
    timeout: float | None = None,
    confirm_tokens: bool = False,
    aa: bool = False,
    leakage_check: bool = False,
    progress: Callable[[HoldoutStatus], None] | None = None,
    trials: int | None = None,
) -> LaunchedEval:
    """Register an evaluation (a dynamic partition keyed by its id) and launch its run.

    A ``chat`` variant's config is checked here against ``os.environ`` (the variable
    ``apiKeyEnv`` names must be set; the key itself is never stored): model (``options.model``,
    or ``models[llmLevel]``), base URL, prices, trials, concurrency, retries.
    ``trials`` (``--trials``) sets ``trials`` on every chat variant; it is refused on an
    evaluation without one (it would change nothing).

    ``aa`` adds the A/A arm (the baseline classified twice; the report gives the flip rate
    and the false-positive rate of 20 seeded half splits); ``leakage_check`` also scores the
    baseline ungrouped on the same sample and reports how much grouping moved each level.

    Before anything is written the tokens the variants' classifiers expect to spend are
    estimated (sample size x each classifier's declared tokens per record); above
    :data:`TOKEN_CONFIRMATION_LIMIT` the evaluation is refused with
    :class:`TokenConfirmationNeeded` unless ``confirm_tokens``.

    The run is launched as every run is (:func:`eval_pipelines.runs.launch`): without
    ``wait`` it is submitted to the instance's run queue and this returns at once; with
    ``wait`` it is executed in this process when the queue would start it now (no Dagster
    daemon, a run slot free), else submitted and waited for (up to ``timeout`` seconds), and
    this returns once it has ended, as ``eval holdout --wait`` does. ``register_only``
    registers the evaluation without a run (materialise it from the UI or with ``dagster
    asset materialize``). While waiting, ``progress`` is called with the status document
    (see :func:`get_holdout_eval`) at the run's first event and whenever its state or a
    variant step's changes; Ctrl-C cancels a run executing here and raises
    :class:`EvalInterrupted`. Returns a :class:`LaunchedEval` (``eval_id``, ``run_id``,
    ``status``, ``estimated_tokens``); ``status`` is ``queued`` (or ``running``) for a
    submitted run and ``complete``, ``failed`` or ``canceled`` for one waited for.
    """
    _check_flag("wait", wait)
    _check_flag("register_only", register_only)
    if wait and register_only:
        raise InputError("wait", wait, "cannot wait for an evaluation registered without a run")
    if not register_only:
        # The run reads $EVAL_PIPELINES_WAREHOUSE: its report would land there, not here.
        require_run_warehouse(warehouse)
    # The run id is written before the run exists: a warehouse that cannot take the write
    # refuses the evaluation before anything runs.
    run_id = str(uuid.uuid4()) if not register_only else None
    with connect(resolve_warehouse(warehouse)) as conn:
        # Any validation error below rolls the transaction back: no sequence number is used
        # and nothing is written.
        with transaction(conn):
            context = _case_context(conn, case_id)
            sequence = cases_store.next_eval_sequence(conn, case_id)
            spec = parse_holdout_request(
                variants,
                case=context,
                sequence=sequence,
                sample_size=sample_size,
                seed=seed,
                grouping=grouping,
                group_field=group_field,
                config=config,
                aa=aa,
                leakage_check=leakage_check,
            )
            spec = _chat_checked(conn, spec, trials)
            estimate = _estimate_tokens(spec)
            if estimate.total_tokens > TOKEN_CONFIRMATION_LIMIT and not confirm_tokens:
                raise TokenConfirmationNeeded(estimate)
            evaluations_store.insert_evaluation(
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
            stored = _Stored(evaluations_store.evaluation_row(conn, spec.eval_id), None, None)
    launched = _launch(
        spec.eval_id,
        wait=wait,
        register_only=register_only,
        run_id=run_id,
        stored=stored,
        progress=progress,
        timeout=timeout,
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
) -> LaunchedEval:
    """Run an existing evaluation again from its stored spec (same sample, same pinned
    versions and memo): the report it writes is identical unless a classifier changed.
    ``wait``, ``timeout`` and ``progress`` as for :func:`start_holdout_eval`."""
    _check_flag("wait", wait)
    run_id = str(uuid.uuid4())
    require_run_warehouse(warehouse)
    with connect(resolve_warehouse(warehouse)) as conn, transaction(conn):
        row = _own_evaluation(conn, case_id, eval_id)
        evaluations_store.set_run_id(conn, eval_id, run_id)
        stored = _Stored(
            replace(row, run_id=run_id),
            evaluations_store.load_report(conn, eval_id),
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
    )


def _own_evaluation(conn: Any, case_id: str, eval_id: str) -> evaluations_store.EvaluationRow:
    row = evaluations_store.evaluation_row(conn, eval_id)
    if row.case_id != case_id:
        raise NotFoundError(f"evalId={eval_id!r}: belongs to case {row.case_id!r}")
    if row.kind != KIND:
        raise ConflictError(f"evalId={eval_id!r}: is a {row.kind} evaluation, not {KIND}")
    return row


@dataclass(frozen=True)
class _Selection:
    """What a run was launched to materialise: ``assets`` (asset names) and ``step_keys``,
    each None when the run selected the whole job (as every run the CLI starts does)."""

    assets: frozenset[str] | None
    step_keys: tuple[str, ...] | None

    @classmethod
    def of(cls, run: Any) -> _Selection:
        assets = run.asset_selection
        steps = run.step_keys_to_execute
        return cls(
            None if assets is None else frozenset(key.to_user_string() for key in assets),
            None if steps is None else tuple(steps),
        )

    def selects(self, asset: str) -> bool:
        return (self.assets is None or asset in self.assets) and (
            self.step_keys is None
            or any(key == asset or key.startswith(f"{asset}.") for key in self.step_keys)
        )

    def selects_variant(self, step_key: str) -> bool:
        if not self.selects(_CLASSIFY_ASSET):
            return False
        # Classify steps are mapped at run time: a run that names none of them runs them all.
        named = [key for key in self.step_keys or () if "classify_variant[" in key]
        return not named or any(
            key.endswith((f"classify_variant[{step_key}]", "classify_variant[?]")) for key in named
        )

    def names(self) -> tuple[str, ...]:
        """The assets selected, sorted (from the step keys when the run named only steps)."""
        if self.assets is not None:
            return tuple(sorted(self.assets))
        return tuple(sorted({key.split(".")[0] for key in self.step_keys or ()}))


def _step_statuses(
    instance: Any, run_id: str, step_keys: list[str], selection: _Selection
) -> dict[str, str]:
    from dagster import DagsterEventType

    statuses = {
        key: "pending" if selection.selects_variant(key) else NOT_IN_RUN for key in step_keys
    }
    events = {
        DagsterEventType.STEP_START: "running",
        DagsterEventType.STEP_SUCCESS: "succeeded",
        DagsterEventType.STEP_FAILURE: "failed",
        DagsterEventType.STEP_UP_FOR_RETRY: "retrying",
    }
    for record in instance.all_logs(run_id, of_type=set(events)):
        event = record.dagster_event
        if event is None or event.step_key is None:
            continue
        for key in step_keys:
            if event.step_key.endswith(f"classify_variant[{key}]"):
                statuses[key] = events[event.event_type]
    return statuses


def _evaluation_status(
    report_run_id: str | None, has_report: bool, run: RunInfo | None, *, writes_report: bool
) -> str:
    """The evaluation's status from its stored report and the newest run's state.

    ``has_report`` is true only for a report whose ``eval_report`` step succeeded
    (:func:`stored_by_a_succeeded_step`), or that its run, still running, has just written.
    ``complete`` once a report exists that matches the newest run: the run wrote it and has
    finished, or the run was launched for the whole chain (``writes_report``: a re-run in
    progress or failed leaves the earlier report complete; the run says what it is doing).
    Otherwise the newest run's state (``incomplete`` when it succeeded without writing the
    report: it materialised only part of the chain, e.g. a partial run from the UI, which
    may have replaced rows the earlier report was computed from), or ``registered`` when none
    was launched. A report with no run of the evaluation in this Dagster instance is
    ``unverified``, never ``complete``: it was written from another instance (another
    ``DAGSTER_HOME``), or its runs were deleted, so nothing here says no newer run replaced
    part of what it was computed from.
    """
    if run is None:
        return "unverified" if has_report else "registered"
    if has_report and (run.run_id == report_run_id or writes_report):
        closing = not run.finished and run.run_id == report_run_id
        return "running" if closing else "complete"
    # A run that succeeded without writing the report materialised only part of the chain.
    return {"succeeded": "incomplete"}.get(run.state, run.state)


@dataclass(frozen=True)
class _Stored:
    """What the warehouse says about an evaluation."""

    row: evaluations_store.EvaluationRow
    report: evaluations_store.StoredReport | None
    sample_hash: str | None


def _read_stored(case_id: str, eval_id: str, warehouse: Path | str | None) -> _Stored:
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        row = _own_evaluation(conn, case_id, eval_id)
        return _Stored(
            row,
            evaluations_store.load_report(conn, eval_id),
            holdout_store.sample_hash(conn, eval_id),
        )


def _run_info(instance: Any, run: Any) -> RunInfo:
    from eval_pipelines import runs

    state = runs.run_state(instance, run)
    return RunInfo(state.run_id, state.state, state.dagster_status, state.reason)


def _status(instance: Any, stored: _Stored, dagster_run: Any) -> HoldoutStatus:
    """The status document from the stored evaluation and its newest Dagster run."""
    spec, report = stored.row.spec, stored.report
    run = _run_info(instance, dagster_run) if dagster_run is not None else None
    selection = _Selection.of(dagster_run) if dagster_run is not None else _Selection(None, None)
    steps = (
        _step_statuses(instance, run.run_id, [v["stepKey"] for v in spec["variants"]], selection)
        if run is not None
        else {}
    )
    writes_report = selection.selects(_REPORT_ASSET)
    if report is not None and not (
        run is not None and not run.finished and run.run_id == report.run_id
    ):
        if not stored_by_a_succeeded_step(instance, report.run_id, _REPORT_ASSET):
            report = None  # written by a step that did not succeed: it does not count
    return HoldoutStatus(
        eval_id=stored.row.eval_id,
        case_id=stored.row.case_id,
        kind=KIND,
        status=_evaluation_status(
            report.run_id if report else None,
            report is not None,
            run,
            writes_report=writes_report,
        ),
        run_id=run.run_id if run else stored.row.run_id,
        run=run,
        variants=tuple(
            VariantStep(
                v["name"],
                f"classify_variant[{v['stepKey']}]",
                steps.get(v["stepKey"], "pending"),
            )
            for v in spec["variants"]
        ),
        sample_hash=stored.sample_hash,
        records_version=spec["recordsVersion"],
        tree_version=spec["treeVersion"],
        memo_version=spec["memoVersion"],
        spec=spec,
        report=report.report if report is not None else None,
        report_markdown=report.markdown if report is not None else None,
        report_run_id=report.run_id if report is not None else None,
        run_assets=None if run is None or writes_report else selection.names(),
    )


def get_holdout_eval(
    case_id: str, eval_id: str, *, warehouse: Path | str | None = None
) -> HoldoutStatus:
    """Status, the newest run and its state (with the reason when it failed), each variant's
    step, the versions and, once complete, the report. Raises :class:`WarehouseBusy` when
    another process holds the warehouse for over 15 s."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    stored = _read_stored(case_id, eval_id, warehouse)
    instance = dagster_instance()
    runs.reap_dead_runs(instance)
    newest = runs.newest_run(instance, eval_id)
    if newest is not None and runs.run_state(instance, newest).state == "queued":
        runs.dispatch_if_needed(instance)  # e.g. the daemon stopped after the run was queued
    return _status(instance, stored, newest)


# While waiting, the run's state and new events are read from the Dagster instance every
# second (cheap; :func:`eval_pipelines.runs.wait`), the warehouse once the run has ended, so
# many waiting clients do not take CPU or the DuckDB lock from the runs they wait for.
POLL_SECONDS = 1.0


def wait_for_eval(
    case_id: str,
    eval_id: str,
    *,
    timeout: float = 3600,
    poll_seconds: float = POLL_SECONDS,
    warehouse: Path | str | None = None,
    progress: Callable[[HoldoutStatus], None] | None = None,
    run_id: str | None = None,
) -> HoldoutStatus:
    """Block until the newest run (or ``run_id``) has finished and return the status.

    The run is waited for as every run is (:func:`eval_pipelines.runs.wait`: dead runs are
    failed and a queue nobody dequeues gets a dispatcher meanwhile); ``progress`` is called
    with the status document whenever the run's state or a variant step's changes, and once
    with the final one. Raises :class:`EvalFailed` with the reason when there is no report
    once it has finished (the run failed, was canceled, materialised only part of the chain,
    or none was launched), and when the run waited for (``run_id``) failed even though an
    earlier report stands; ``TimeoutError`` after ``timeout`` seconds. A run that has already
    finished costs one read of the warehouse.
    """
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    if not is_finite_number(timeout) or timeout <= 0:
        # A NaN deadline never passes (``now > nan`` is false): the wait would never end.
        raise InputError("timeout", timeout, "must be a finite, positive number of seconds")
    deadline = time.monotonic() + timeout
    instance = dagster_instance()
    newest = runs.newest_run(instance, eval_id)
    waited = run_id or (newest.run_id if newest is not None else None)
    # Read when first needed: for a progress line, or, read after the run had finished,
    # as the answer itself.
    stored: _Stored | None = None
    if waited is not None:
        current = instance.get_run_by_id(waited)
        if current is None:
            raise InputError("run_id", waited, f"no such Dagster run of evaluation {eval_id}")
        if not current.is_finished:
            stored = _read_stored(case_id, eval_id, warehouse)
            on_event = _progress_events(instance, stored, progress, waited) if progress else None
            try:
                runs.wait(
                    waited,
                    deadline - time.monotonic(),
                    on_event=on_event,
                    poll_seconds=poll_seconds,
                    instance=instance,
                )
            except TimeoutError:
                raise TimeoutError(
                    f"evaluation {eval_id} still running after {timeout:g} s"
                ) from None
    while True:
        try:
            stored = _read_stored(case_id, eval_id, warehouse)
            break
        except WarehouseBusy:
            if stored is None or time.monotonic() > deadline:
                raise  # the evaluation itself is unknown until read
            time.sleep(poll_seconds)  # ask again
    ended = instance.get_run_by_id(waited) if waited is not None else None
    status = _status(instance, stored, ended)
    if progress is not None:
        progress(status)
    return _finished(case_id, status, waited_for_run=run_id is not None)


def no_run_message(status: HoldoutStatus) -> str:
    """What to say about an evaluation the Dagster instance holds no run of: which instance
    was read (``$DAGSTER_HOME``) and how to reach the one that ran it, or how to run it."""
    from eval_pipelines.runs.instance import dagster_home

    rerun = f"'eval-pipelines eval rerun {status.case_id} {status.eval_id}'"
    where = f"the Dagster instance in {dagster_home()} (DAGSTER_HOME)"
    if status.report_run_id is not None:
        return (
            f"evaluation {status.eval_id}: its report was written by run "
            f"{status.report_run_id}, but {where} holds no run of it: set DAGSTER_HOME to the "
            f"instance that ran it (the repository's .dagster_home for make dev and the CLI "
            f"started there), or run it again here with {rerun}"
        )
    return (
        f"evaluation {status.eval_id} has no run in {where}: start one with {rerun} (if it ran "
        "from another instance, set DAGSTER_HOME to that instance's folder)"
    )


def _finished(case_id: str, status: HoldoutStatus, *, waited_for_run: bool) -> HoldoutStatus:
    """The status of a finished wait, or :class:`EvalFailed` saying why there is no report
    (or, when the caller waited for one run, why that run did not write it)."""
    eval_id, run = status.eval_id, status.run
    failed = run is not None and run.state in ("failed", "canceled")
    if status.status == "complete" and not (waited_for_run and failed):
        return status
    if run is not None and failed:
        stands = (
            f"; the report of run {status.report_run_id} still stands"
            if status.status == "complete"
            else ""
        )
        raise EvalFailed(
            f"evaluation {eval_id}: run {run.run_id} {run.state}: "
            f"{run.reason or 'see the run in the Dagster UI'}{stands}",
            status,
        )
    if run is None:
        raise EvalFailed(no_run_message(status), status)
    earlier = (
        f" (the report of run {status.report_run_id} is from before it)"
        if status.report is not None
        else ""
    )
    raise EvalFailed(
        f"evaluation {eval_id}: run {run.run_id} finished without writing the report (it "
        f"materialised only some assets){earlier}; run the whole evaluation with "
        f"'eval-pipelines eval rerun {case_id} {eval_id}'",
        status,
    )


def eval_rows(
    case_id: str,
    eval_id: str,
    *,
    variant: str | None = None,
    errors_only: bool = False,
    warehouse: Path | str | None = None,
) -> list[EvalRow]:
    """One row per sampled record and variant, with correctness per level and the record's
    cluster (records held out together share one; the paired intervals resample clusters),
    so every figure of the report can be recomputed from the rows.

    ``errors_only`` keeps the rows that are not right at every target depth (wrong, declined
    or failed).
    """
    from eval_pipelines.stages.holdout import evaluation_clusters, variant_outcomes

    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        _own_evaluation(conn, case_id, eval_id)
        if not evaluations_store.has_report(conn, eval_id):
            raise ConflictError(
                f"evalId={eval_id!r}: not complete yet; rows exist once the report does "
                f"(eval-pipelines eval status {case_id} {eval_id} --wait)"
            )
        spec, tree, outcomes = variant_outcomes(conn, eval_id)
        clusters = evaluation_clusters(conn, eval_id)
    names = [v.name for v in spec.variants]
    if variant is not None and variant not in names:
        raise InputError("variant", variant, f"is not a variant of {eval_id}: {names}")
    rows = []
    for name in names:
        if variant is not None and name != variant:
            continue
        for record in outcomes[name].iter_rows(named=True):
            correct = {
                str(level.depth): record[f"right_{level.depth}"]
                for level in tree.levels
                if record[f"right_{level.depth}"] is not None
            }
            if errors_only and all(correct.get(str(d), True) for d in spec.target_depth):
                continue
            rows.append(
                EvalRow(
                    record_key=record["record_key"],
                    cluster=clusters[record["record_key"]],
                    variant=name,
                    label=record["label"],
                    prediction=record["code"],
                    confidence=record["confidence"],
                    route=record["route"],
                    correct=correct,
                    candidates=tuple(json.loads(record["candidates"])),
                    effective_candidates=record["effective_candidates"],
                    memo_applied=tuple(json.loads(record["memo_applied"])),
                    error=record["error"],
                )
            )
    return rows


def prune_partitions(*, warehouse: Path | str | None = None) -> list[str]:
    """Delete partition keys of ``holdout_evaluations`` that name no registered evaluation (a
    key added in the UI's Materialize dialog has no spec, and its failed runs turn the asset
    graph red until the key is gone). Returns the keys deleted."""
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        registered = set(evaluations_store.all_evaluation_ids(conn, KIND))
    return runs.prune_partitions(dagster_instance(), runs.kind_of(KIND), registered)


def list_evals(case_id: str, *, warehouse: Path | str | None = None) -> list[EvalSummary]:
    """The case's evaluations, oldest first: id, kind, seed, sample size, grouping, versions,
    whether a report exists."""
    with connect(
        resolve_warehouse(warehouse), read_only=True, wait_seconds=CLI_WAIT_SECONDS
    ) as conn:
        cases_store.load_case(conn, case_id)
        frame = evaluations_store.list_evaluations(conn, case_id)
    instance = None
    if frame["has_report"].any():
        from eval_pipelines.runs.instance import dagster_instance

        instance = dagster_instance()
    listed = []
    for row in frame.iter_rows(named=True):
        spec = json.loads(row["spec_json"])
        listed.append(
            EvalSummary(
                eval_id=row["eval_id"],
                kind=row["kind"] or KIND,
                created_at=str(row["created_at"]),
                seed=row["seed"],
                sample_size=spec["sampleSize"],
                grouping=spec["grouping"],
                variants=tuple(v["name"] for v in spec["variants"]),
                records_version=spec["recordsVersion"],
                memo_version=spec["memoVersion"],
                complete=bool(row["has_report"])
                and stored_by_a_succeeded_step(instance, row["report_run_id"], _REPORT_ASSET),
            )
        )
    return listed
