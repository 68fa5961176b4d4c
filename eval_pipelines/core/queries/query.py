"""The evaluate query of spec 003, validated once: every refusal names the field path, the value
and the rule, and nothing runs on a query that is not understood.

Shape::

    {"test": SELECTOR} | {"testSource": {"from", "where", "limit", "offset"}},
    "evaluate": {"from": NAME | {"from": ..., "where": ...}, "where": {...},
                 "predict": COLUMN[.$feature] | "estimate": COLUMN, "config": {...}},
    "select": [...], "maxTime": SECONDS
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import InputError

DEFAULT_MAX_TIME = 300.0
MAX_TIME_CAP = 3600.0
FEATURE_SUFFIX = ".$feature"
PROFILES = ("fast", "group", "high")
ESTIMATORS = ("knn", "regression")
COMPARISONS = ("$lt", "$lte", "$gt", "$gte", "$ne", "$in")

PREDICT_METRICS = (
    "n",
    "testSamples",
    "trainSamples",
    "accuracy",
    "baseAccuracy",
    "accuracyGain",
    "meanRank",
    "baseMeanRank",
    "rankGain",
    "logLoss",
    "baseLogLoss",
    "geomMeanLikelihood",
    "baseGeomMeanLikelihood",
    "brier",
    "baseBrier",
    "ece",
    "geomMeanP",
    "baseGmp",
    "geomMeanLift",
    "mxe",
    "h",
    "informationGain",
    "tau",
)
ESTIMATE_METRICS = (
    "n",
    "testSamples",
    "trainSamples",
    "mae",
    "mse",
    "rmse",
    "r2",
    "mape",
    "mapeRows",
    "medianAbsoluteError",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
    "baselineMae",
    "baselineRmse",
    "maeGain",
    "rmseGain",
    "maeImprovement",
    "rmseImprovement",
)
CASE_LISTS = ("cases", "errorCases", "correctCases")
ALWAYS_ON_TRUNCATION = ("truncated", "requested", "message")


@dataclass(frozen=True)
class Binding:
    """One ``where`` entry of the evaluated query: evidence named ``key`` whose value for a test
    row is read from ``source`` (a ``$get`` path) or is the ``literal``."""

    key: str
    source: str | None
    literal: Any = None


@dataclass(frozen=True)
class Scope:
    """``evaluate.from``: a table name, optionally narrowed by nested ``from``/``where``
    (a tenant); positions count within the narrowed rows."""

    table: str
    filters: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class TestSource:
    """``testSource``: resubstitution over rows of ``table`` (default the evaluated scope)."""

    table: str | None
    where: Mapping[str, Any] | None
    limit: int | None
    offset: int


@dataclass(frozen=True)
class Query:
    document: dict[str, Any]
    scope: Scope
    kind: str  # "predict" | "estimate"
    target: str  # the column (without .$feature)
    feature_target: bool
    bindings: tuple[Binding, ...]
    conditions: tuple[tuple[str, Mapping[str, Any]], ...]  # operator conditions (predict only)
    test: Any  # the test selector, or None with test_source
    test_source: TestSource | None
    select: tuple[str, ...]
    max_time: float
    profile: str = "group"
    calibrate: bool = False
    estimator: str = "knn"
    k: int = 10

    def table_names(self) -> tuple[str, ...]:
        """The base tables the query reads (link targets come from those tables' links)."""
        names = [self.scope.table]
        if self.test_source is not None and self.test_source.table is not None:
            names.append(self.test_source.table)
        return tuple(dict.fromkeys(names))

    def link_columns(self) -> tuple[str, ...]:
        """The link columns the query follows (``link`` of every ``link.column`` path it names
        in where, a ``$get``, a nested from, ``test`` or ``testSource.where``), sorted: the
        tables they link to are read too, so their versions are pinned with the base tables'."""
        paths = [p for b in self.bindings for p in (b.key, b.source) if p is not None]
        paths += [key for key, _ in self.conditions]
        for condition in (
            *self.scope.filters,
            self.test,
            self.test_source and self.test_source.where,
        ):
            paths += _condition_paths(condition)
        return tuple(sorted({p.partition(".")[0] for p in paths if "." in p}))

    @property
    def holdout(self) -> bool:
        """``test`` hides the test rows from training; ``testSource`` does not."""
        return self.test_source is None


def _condition_paths(condition: Any) -> list[str]:
    """The column paths a (validated) condition or selector names."""
    if not isinstance(condition, Mapping):
        return []
    paths: list[str] = []
    for key, value in condition.items():
        if key in ("$and", "$or"):
            for part in value:
                paths += _condition_paths(part)
        elif key == "$hash":
            if isinstance(value, Mapping) and isinstance(value.get("field"), str):
                paths.append(value["field"])
        elif not key.startswith("$"):
            paths.append(key)
    return paths


def _require_mapping(path: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(path, value, "must be a JSON object")
    return value


def _reject_unknown(path: str, value: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise InputError(
            f"{path}.{unknown[0]}" if path else unknown[0],
            value[unknown[0]],
            f"unknown key; allowed: {', '.join(allowed)}",
        )


def _column_path(path: str, value: Any, *, what: str) -> str:
    """A column name or one link hop (``link.column``)."""
    if not isinstance(value, str) or not value:
        raise InputError(path, value, f"{what} must be a non-empty string")
    parts = value.split(".")
    if any(not part for part in parts):
        raise InputError(path, value, f"{what} has an empty path segment")
    if len(parts) > 2:
        raise InputError(
            path,
            value,
            f"{what} goes {len(parts) - 1} link hops ({' -> '.join(parts)}); "
            "one hop (link.column) is supported",
        )
    return value


def _is_operator_condition(value: Any) -> bool:
    return isinstance(value, Mapping) and any(str(k).startswith("$") for k in value)


def _scope(path: str, value: Any) -> Scope:
    if isinstance(value, str):
        if not value:
            raise InputError(path, value, "must name a table or a case")
        return Scope(value)
    mapping = _require_mapping(path, value)
    _reject_unknown(path, mapping, ("from", "where"))
    if "from" not in mapping:
        raise InputError(f"{path}.from", None, "a nested from needs its own from")
    inner = _scope(f"{path}.from", mapping["from"])
    where = mapping.get("where")
    filters = inner.filters
    if where is not None:
        check_condition(f"{path}.where", where)
        filters = (*filters, where)
    return Scope(inner.table, filters)


def _literal(path: str, value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(path, value, "must be a finite number")
        return value
    raise InputError(path, value, "must be a string, number, boolean or null")


def check_condition(path: str, condition: Any) -> None:
    """A field-condition / selector object: validated structurally (columns are checked
    against the table when the query runs)."""
    mapping = _require_mapping(path, condition)
    for key, value in mapping.items():
        where = f"{path}.{key}"
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise InputError(where, value, f"{key} takes a non-empty list of conditions")
            for i, part in enumerate(value):
                check_condition(f"{where}[{i}]", part)
        elif key == "$index":
            _index_selector(where, value)
        elif key == "$sample":
            sample_spec(where, value)
        elif key == "$hash":
            hash_spec(where, value)
        elif key.startswith("$"):
            raise InputError(
                where,
                value,
                "unknown selector; use $index, $sample, $hash, $and, $or or a column condition",
            )
        else:
            _column_path(where, key, what="a condition's column")
            _field_condition(where, value)


def _field_condition(path: str, value: Any) -> None:
    if not _is_operator_condition(value):
        _literal(path, value)
        return
    for op, operand in value.items():
        if op not in COMPARISONS:
            raise InputError(
                f"{path}.{op}", operand, f"unknown operator; use {', '.join(COMPARISONS)}"
            )
        if op == "$in":
            if not isinstance(operand, list) or not operand:
                raise InputError(f"{path}.$in", operand, "$in takes a non-empty list of values")
            for i, item in enumerate(operand):
                _literal(f"{path}.$in[{i}]", item)
        else:
            if operand is None and op != "$ne":
                raise InputError(f"{path}.{op}", operand, f"{op} needs a value to compare with")
            _literal(f"{path}.{op}", operand)


def mod_pair(path: str, value: Any) -> tuple[int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise InputError(path, value, "$mod takes [k, r], two integers")
    k, r = value
    if k < 1 or not 0 <= r < k:
        raise InputError(path, value, "$mod [k, r] needs k >= 1 and 0 <= r < k")
    return k, r


def _index_selector(path: str, value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise InputError(path, value, "$index is a row position, 0 or more")
        return
    mapping = _require_mapping(path, value)
    _reject_unknown(path, mapping, ("$mod",))
    if "$mod" not in mapping:
        raise InputError(path, value, "$index takes a position or {$mod: [k, r]}")
    mod_pair(f"{path}.$mod", mapping["$mod"])


def sample_spec(path: str, value: Any) -> tuple[int, int | None, int]:
    """``$sample``: ``N`` or ``{n, seed}`` (N rows) or ``{n, of, seed}`` (n in every ``of``
    rows). Returns ``(n, of, seed)``."""
    n: Any
    of: Any
    seed: Any
    if isinstance(value, int) and not isinstance(value, bool):
        n, of, seed = value, None, 0
    else:
        mapping = _require_mapping(path, value)
        _reject_unknown(path, mapping, ("n", "of", "seed"))
        n, of, seed = mapping.get("n"), mapping.get("of"), mapping.get("seed", 0)
    for name, item in (("n", n), ("seed", seed)):
        if not isinstance(item, int) or isinstance(item, bool) or item < 0:
            raise InputError(f"{path}.{name}", item, f"$sample {name} must be an integer >= 0")
    if of is not None and (not isinstance(of, int) or isinstance(of, bool) or of < 1 or n > of):
        raise InputError(f"{path}.of", of, "$sample of must be an integer >= n (n in every of)")
    return n, of, seed


def hash_spec(path: str, value: Any) -> tuple[int, int, str | None]:
    """``$hash``: ``{$mod: [k, r]}`` over the row key (or the whole row), optionally
    ``field`` to keep rows sharing that column's value together. Returns ``(k, r, field)``."""
    mapping = _require_mapping(path, value)
    _reject_unknown(path, mapping, ("$mod", "field"))
    if "$mod" not in mapping:
        raise InputError(path, value, "$hash takes {$mod: [k, r]} (and optionally field)")
    k, r = mod_pair(f"{path}.$mod", mapping["$mod"])
    column = mapping.get("field")
    if column is not None:
        _column_path(f"{path}.field", column, what="$hash field")
    return k, r, column


def _bindings(
    path: str, where: Mapping[str, Any], *, kind: str
) -> tuple[tuple[Binding, ...], tuple[tuple[str, Mapping[str, Any]], ...]]:
    bindings: list[Binding] = []
    conditions: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in where.items():
        at = f"{path}.{key}"
        if key.startswith("$"):
            raise InputError(
                at, value, "evaluate.where takes column bindings; put $and/$or in test"
            )
        _column_path(at, key, what="a where column")
        if isinstance(value, Mapping) and "$get" in value:
            _reject_unknown(at, value, ("$get",))
            source = _column_path(f"{at}.$get", value["$get"], what="$get")
            bindings.append(Binding(key, source))
        elif _is_operator_condition(value):
            if kind == "estimate":
                raise InputError(
                    at,
                    value,
                    "estimate evidence is by equality: a $get binding or a literal; "
                    "an operator in where is not supported",
                )
            _field_condition(at, value)
            conditions.append((key, value))
        elif isinstance(value, Mapping):
            raise InputError(at, value, "a where value is {$get: column}, an operator or a literal")
        else:
            bindings.append(Binding(key, None, _literal(at, value)))
    return tuple(bindings), tuple(conditions)


def _config(path: str, value: Any, *, kind: str) -> dict[str, Any]:
    mapping = _require_mapping(path, value)
    if kind == "predict":
        _reject_unknown(path, mapping, ("ai", "calibrate"))
        profile = mapping.get("ai", "group")
        if profile not in PROFILES:
            raise InputError(f"{path}.ai", profile, f"must be one of {', '.join(PROFILES)}")
        calibrate = mapping.get("calibrate", False)
        if not isinstance(calibrate, bool):
            raise InputError(f"{path}.calibrate", calibrate, "must be true or false")
        return {"profile": profile, "calibrate": calibrate}
    _reject_unknown(path, mapping, ("model", "k"))
    estimator = mapping.get("model", "knn")
    if estimator not in ESTIMATORS:
        raise InputError(f"{path}.model", estimator, f"must be one of {', '.join(ESTIMATORS)}")
    k = mapping.get("k", 10)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
        raise InputError(f"{path}.k", k, "must be an integer from 1 to 1000")
    return {"estimator": estimator, "k": k}


def _select(value: Any, *, kind: str) -> tuple[str, ...]:
    metrics = PREDICT_METRICS if kind == "predict" else ESTIMATE_METRICS
    if value is None:
        return tuple(m for m in metrics if m != "tau")
    if not isinstance(value, list) or not value:
        raise InputError("select", value, "must be a non-empty list of metric names")
    allowed = (*metrics, *ALWAYS_ON_TRUNCATION, *(CASE_LISTS if kind == "predict" else ()))
    for i, name in enumerate(value):
        if name not in allowed:
            raise InputError(
                f"select[{i}]", name, f"unknown for {kind}; one of {', '.join(allowed)}"
            )
    return tuple(dict.fromkeys(value))


def _test_source(value: Any) -> TestSource:
    mapping = _require_mapping("testSource", value)
    _reject_unknown("testSource", mapping, ("from", "where", "limit", "offset"))
    table = mapping.get("from")
    if table is not None and (not isinstance(table, str) or not table):
        raise InputError("testSource.from", table, "must name a table")
    where = mapping.get("where")
    if where is not None:
        check_condition("testSource.where", where)
    limit, offset = mapping.get("limit"), mapping.get("offset", 0)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise InputError("testSource.limit", limit, "must be an integer >= 1")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InputError("testSource.offset", offset, "must be an integer >= 0")
    return TestSource(table, where, limit, offset)


# Keys of the query bodies 003 evaluates only on a classic table, and the kind they name.
OTHER_KINDS = {
    "recommend": "recommend",
    "goal": "recommend",
    "relate": "relate",
    "match": "match",
    "select": "generic query",
    "orderBy": "generic query",
}
KINDS_SECTION = "docs/queries.md, 'Which evaluations run where'"


def _refuse_other_kinds(evaluate: Mapping[str, Any]) -> None:
    """A recommend, relate, match or generic query body is refused as such (not as an unknown
    key): this project evaluates predict and estimate queries, 003's collection kinds."""
    if "predict" in evaluate or "estimate" in evaluate:
        return
    for key, kind in OTHER_KINDS.items():
        if key in evaluate:
            raise InputError(
                f"evaluate.{key}",
                evaluate[key],
                f"a {kind} evaluation is not supported: only predict and estimate queries "
                f"are evaluated here (003's collection kinds); see {KINDS_SECTION}",
            )


def parse_query(document: Mapping[str, Any]) -> Query:
    """Validate an evaluate query (spec 003) and return it parsed.

    Raises
    ------
    InputError
        Naming the field path, the value and the rule, for anything the query cannot mean
        exactly one thing by: neither ``test`` nor ``testSource`` (there is no implicit test
        set), both, an unknown key, operator or metric, a ``$get`` path deeper than one link
        hop, an operator in an estimate's ``where``, a where binding the target itself.
    """
    top = _require_mapping("query", document)
    _reject_unknown("", top, ("test", "testSource", "evaluate", "select", "maxTime"))
    if "test" in top and "testSource" in top:
        raise InputError("test", top["test"], "give test (hold-out) or testSource, not both")
    if "test" not in top and "testSource" not in top:
        raise InputError(
            "test",
            None,
            "no test set: give test (hold-out, e.g. {$index: {$mod: [5, 0]}}) or testSource "
            "(resubstitution); there is no implicit default",
        )
    evaluate = _require_mapping("evaluate", top.get("evaluate"))
    _refuse_other_kinds(evaluate)
    _reject_unknown("evaluate", evaluate, ("from", "where", "predict", "estimate", "config"))
    if "from" not in evaluate:
        raise InputError("evaluate.from", None, "must name the table or case to evaluate on")
    scope = _scope("evaluate.from", evaluate["from"])
    if ("predict" in evaluate) == ("estimate" in evaluate):
        raise InputError(
            "evaluate", sorted(evaluate), "give exactly one of predict (a class) or estimate"
        )
    kind = "predict" if "predict" in evaluate else "estimate"
    target = evaluate[kind]
    if not isinstance(target, str) or not target:
        raise InputError(f"evaluate.{kind}", target, "must name a column")
    feature_target = kind == "predict" and target.endswith(FEATURE_SUFFIX)
    column = target.removesuffix(FEATURE_SUFFIX) if feature_target else target
    if not column or "." in column or column.startswith("$"):
        raise InputError(
            f"evaluate.{kind}", target, "must be a column of the table (or column.$feature)"
        )
    where = _require_mapping("evaluate.where", evaluate.get("where", {}))
    bindings, conditions = _bindings("evaluate.where", where, kind=kind)
    for binding in bindings:
        if binding.key == column or binding.source == column:
            raise InputError(
                f"evaluate.where.{binding.key}",
                where[binding.key],
                f"binds the target column {column!r}: the model would be shown the answer",
            )
    config = _config("evaluate.config", evaluate.get("config", {}), kind=kind)
    test_source = _test_source(top["testSource"]) if "testSource" in top else None
    test = top.get("test")
    if test_source is None:
        check_condition("test", test)
    max_time = top.get("maxTime", DEFAULT_MAX_TIME)
    if (
        not isinstance(max_time, int | float)
        or isinstance(max_time, bool)
        or not 0 < max_time <= MAX_TIME_CAP
    ):
        raise InputError("maxTime", max_time, f"must be seconds in (0, {MAX_TIME_CAP:g}]")
    return Query(
        document=dict(top),
        scope=scope,
        kind=kind,
        target=column,
        feature_target=feature_target,
        bindings=bindings,
        conditions=conditions,
        test=test,
        test_source=test_source,
        select=_select(top.get("select"), kind=kind),
        max_time=float(max_time),
        **config,
    )
