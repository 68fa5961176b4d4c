"""The evaluate engine against independent oracles: scikit-learn's naive Bayes, k nearest
neighbours and linear regression, and refits on the training rows alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import sparse
from sklearn.datasets import load_diabetes
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LinearRegression
from sklearn.metrics import log_loss, mean_absolute_error
from sklearn.naive_bayes import MultinomialNB
from sklearn.neighbors import KNeighborsRegressor

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.queries import predict as predict_module
from eval_pipelines.core.queries.engine import run_folds, run_query
from eval_pipelines.core.queries.naive_bayes import NaiveBayes, class_counts, softmax
from eval_pipelines.core.queries.query import parse_query
from eval_pipelines.core.queries.source import Source

WORDS = {
    "fruit": ["apple", "banana", "pear", "plum"],
    "dairy": ["milk", "cheese", "yogurt", "butter"],
    "bakery": ["bread", "bun", "cake"],
    "drinks": ["juice", "water", "soda", "tea"],
}
GENERIC = ["fresh", "organic", "pack", "kg", "large", "small"]


def products(n: int = 400, seed: int = 0) -> pl.DataFrame:
    """Product names whose words say (noisily) the category; tags; two tenants; a price."""
    rng = np.random.default_rng(seed)
    categories = list(WORDS)
    weights = np.array([0.4, 0.3, 0.1, 0.2])
    rows = []
    for i in range(n):
        category = categories[rng.choice(4, p=weights)]
        own = rng.choice(WORDS[category], size=rng.integers(1, 3), replace=False).tolist()
        noise_category = categories[rng.integers(4)]
        noise = [str(rng.choice(WORDS[noise_category]))] if rng.random() < 0.3 else []
        generic = rng.choice(GENERIC, size=rng.integers(0, 3), replace=False).tolist()
        words = own + noise + generic
        rng.shuffle(words)
        rows.append(
            {
                "sku": f"p{i:04d}",
                "name": " ".join(words),
                "category": category,
                "tags": own if rng.random() > 0.1 else [],
                "tenant": "A" if i % 3 else "B",
                "price": float(np.round(rng.gamma(2.0, 3.0) + categories.index(category), 2)),
            }
        )
    return pl.DataFrame(rows)


def resolver(**tables: pl.DataFrame) -> Callable[[str], Source]:
    sources = {name: Source(name, "v1", "table", frame) for name, frame in tables.items()}

    def resolve(name: str) -> Source:
        return sources[name]

    return resolve


def query(**parts: Any) -> Any:
    document: dict[str, Any] = {
        "test": {"$index": {"$mod": [3, 0]}},
        "evaluate": {
            "from": "products",
            "where": {"name": {"$get": "name"}},
            "predict": "category",
        },
    }
    for key, value in parts.items():
        if key in ("predict", "where", "config", "from", "estimate"):
            document["evaluate"][key] = value
            if key == "estimate":
                document["evaluate"].pop("predict", None)
        elif value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return parse_query(document)


def test_fast_profile_equals_scikit_learn_multinomial_nb_on_the_training_rows() -> None:
    frame = products()
    outcome = run_query(
        query(config={"ai": "fast"}, select=["n", "logLoss", "accuracy", "cases"]),
        resolver(products=frame),
    )
    test = np.arange(frame.height) % 3 == 0
    train, held = frame.filter(~pl.Series(test)), frame.filter(pl.Series(test))
    vectorizer = CountVectorizer(token_pattern=r"\w+", lowercase=True)
    x_train = vectorizer.fit_transform(train["name"].to_list())
    classes = sorted(set(train["category"]))
    counts = np.array([(train["category"] == c).sum() for c in classes])
    prior = (counts + 1.0) / (counts.sum() + len(classes))
    oracle = MultinomialNB(alpha=1.0, class_prior=prior).fit(x_train, train["category"])
    expected = oracle.predict_proba(vectorizer.transform(held["name"].to_list()))
    truth = held["category"].to_list()
    cases = outcome.result["cases"]
    assert len(cases) == held.height == outcome.result["n"]
    for row, case in zip(expected, cases, strict=True):
        # expected from sklearn MultinomialNB.predict_proba; tolerance 1e-9 (same model,
        # float64 sums in a different order).
        assert case["top"]["$p"] == pytest.approx(row.max(), abs=1e-9)
        assert case["top"]["$value"] == classes[int(row.argmax())]
        assert case["correct"]["$p"] == pytest.approx(
            row[classes.index(case["correct"]["$value"])], abs=1e-9
        )
    # expected from sklearn.metrics.log_loss on the oracle's probabilities; tolerance 1e-9.
    assert outcome.result["logLoss"] == pytest.approx(
        log_loss(truth, expected, labels=classes), abs=1e-9
    )
    assert outcome.result["accuracy"] == pytest.approx(
        np.mean([classes[i] == t for i, t in zip(expected.argmax(1), truth, strict=True)])
    )


@pytest.mark.parametrize("profile", ["fast", "group", "high"])
def test_a_masked_holdout_equals_evaluating_on_a_table_without_the_test_rows(
    profile: str,
) -> None:
    """Hiding the test rows by subtracting their counts gives exactly the model fitted on
    the training rows: the same test rows scored against a table of only the training rows
    (testSource from another table trains on the whole evaluated table) agree."""
    frame = products()
    test = pl.Series(np.arange(frame.height) % 3 == 0)
    select = ["n", "accuracy", "meanRank", "logLoss", "brier", "ece", "baseAccuracy"]
    masked = run_query(query(config={"ai": profile}, select=select), resolver(products=frame))
    separate = run_query(
        query(
            config={"ai": profile},
            select=select,
            test=None,
            testSource={"from": "held"},
        ),
        resolver(products=frame.filter(~test), held=frame.filter(test)),
    )
    for name in select:
        assert masked.result[name] == pytest.approx(separate.result[name], abs=1e-12), name
    assert masked.metrics["trainSamples"] == separate.metrics["trainSamples"] == 266


def test_train_samples_say_which_experiment_ran() -> None:
    frame = products()
    holdout = run_query(query(), resolver(products=frame)).metrics
    assert holdout["testSamples"] == 134 and holdout["trainSamples"] == 400 - 134
    resub = run_query(
        query(test=None, testSource={"where": {"tenant": "B"}}), resolver(products=frame)
    ).metrics
    assert resub["testSamples"] == 134 and resub["trainSamples"] == 400


def test_a_five_fold_sweep_tests_every_row_exactly_once() -> None:
    # Row 2 has no category: fold 2 tests it, cannot score it, and says so.
    frame = products(403).with_columns(
        category=pl.when(pl.int_range(0, 403) == 2).then(None).otherwise(pl.col("category"))
    )
    outcome = run_folds(
        query(test={"$index": {"$mod": [5, 2]}}, select=["n", "accuracy"]),
        resolver(products=frame),
        folds=5,
    )
    folds = outcome.result["folds"]
    assert len(folds) == 5 and sum(f["n"] for f in folds) == 402
    assert outcome.result["coverage"] == {"rows": 403, "tested": 403, "everyRowOnce": True}
    assert outcome.result["accuracy"] == pytest.approx(np.mean([f["accuracy"] for f in folds]))
    # Each fold's message is kept at the top, named by its fold.
    assert "fold 2: 1 of 81 test rows have no value for 'category'" in outcome.result["message"]
    with pytest.raises(InputError, match="5-fold sweep"):
        run_folds(query(), resolver(products=frame), folds=5)


def test_leave_one_out_scores_equal_a_refit_without_the_row() -> None:
    rng = np.random.default_rng(1)
    counts = sparse.csr_matrix(rng.poisson(0.6, size=(40, 12)).astype(float))
    classes = rng.integers(0, 3, size=40)
    targets = sparse.csr_matrix((np.ones(40), (np.arange(40), classes)), shape=(40, 3))
    weighted = counts.copy()
    weighted.data = weighted.data / 2.0
    model = NaiveBayes(class_counts(targets, counts))
    loo = model.leave_one_out_scores(counts, weighted, classes)
    for i in range(40):
        keep = np.arange(40) != i
        refit = NaiveBayes(class_counts(targets[keep], counts[keep]))
        expected = softmax(refit.log_scores(weighted[i], counts[i]))[0]
        # Exact up to a constant per row, so the probabilities agree; tolerance 1e-10.
        np.testing.assert_allclose(softmax(loo[i : i + 1])[0], expected, atol=1e-10)


def test_calibration_is_fitted_on_training_rows_only() -> None:
    frame = products(600)
    calibrated = query(config={"calibrate": True}, select=["n", "logLoss", "tau"])
    tau = run_query(calibrated, resolver(products=frame)).result["tau"]
    assert tau is not None and 0.05 <= tau <= 20
    test = np.arange(frame.height) % 3 == 0
    scrambled = frame.with_columns(
        category=pl.when(pl.Series(test)).then(pl.lit("fruit")).otherwise(pl.col("category"))
    )
    # Whatever the test rows' labels are, the fit never sees them.
    assert run_query(calibrated, resolver(products=scrambled)).result["tau"] == tau


def test_calibration_says_why_it_was_not_applied() -> None:
    small = products(30)
    result = run_query(query(config={"calibrate": True}), resolver(products=small)).result
    assert "tau" not in result
    assert "calibrate was not applied" in result["message"] and "at least 30" in result["message"]
    feature = run_query(
        query(predict="tags.$feature", config={"calibrate": True}), resolver(products=products())
    ).result
    assert "no single true value per row" in feature["message"]


def test_set_valued_target() -> None:
    frame = pl.DataFrame(
        {
            "name": ["red apple", "green apple", "apple pie", "plain", "apple", "pie"],
            "tags": [["fruit", "red"], ["fruit"], ["bakery", "fruit"], [], ["fruit"], ["bakery"]],
        }
    )
    outcome = run_query(
        parse_query(
            {
                "test": {"$or": [{"$index": 3}, {"$index": 4}, {"$index": 5}]},
                "evaluate": {
                    "from": "t",
                    "where": {"name": {"$get": "name"}},
                    "predict": "tags.$feature",
                },
                "select": ["n", "accuracy", "baseAccuracy", "meanRank", "cases"],
            }
        ),
        resolver(t=frame),
    )
    result = outcome.result
    # Row 3 has no members: skipped, not a miss. Rows 4 (fruit) and 5 (bakery) are scored.
    assert result["n"] == 2 and "1 of 3 test rows have no members" in result["message"]
    # Baseline: training rows 0-2 all have a member; "fruit" is in 3 of 3 (share 1.0),
    # "bakery" 1 of 3, "red" 1 of 3: the base top is fruit: right for row 4, wrong for 5.
    assert result["baseAccuracy"] == 0.5
    row4, row5 = result["cases"]
    assert row4["testCase"] == {"name": "apple", "tags": ["fruit"]} and row4["accurate"]
    assert row5["correct"]["$value"] == "bakery"
    assert outcome.metrics["baseAccuracy"] == 0.5


@pytest.mark.parametrize("cases", ["cases", "errorCases", "correctCases"])
def test_set_valued_evidence_is_echoed_as_a_json_array(cases: str) -> None:
    frame = products()
    outcome = run_query(
        query(where={"tags": {"$get": "tags"}}, select=["n", cases]), resolver(products=frame)
    )
    listed = outcome.result[cases]
    assert listed
    json.dumps(outcome.result)  # what the stage stores
    for case in listed:
        expected = frame.get_column("tags")[case["offset"]].to_list()
        assert case["testCase"] == {"tags": expected, "category": frame["category"][case["offset"]]}


@pytest.mark.parametrize(
    ("parts", "rule"),
    [
        ({"predict": "category.$feature"}, "single-valued: predict it directly"),
        ({"predict": "tags"}, "holds sets: predict 'tags.$feature'"),
        ({"predict": "price"}, "numeric: use estimate"),
        ({"estimate": "category"}, "not numeric: predict it instead"),
        ({"where": {"name": {"$get": "nmae"}}}, "no column 'nmae'"),
        ({"where": {"name": {"$get": "sku.name"}}}, "'sku' of 'products' is not a link"),
        ({"test": {"categroy": "fruit"}}, "no column 'categroy'"),
    ],
)
def test_names_that_resolve_nowhere_are_refused_before_scoring(
    parts: dict[str, Any], rule: str
) -> None:
    with pytest.raises(InputError, match=re.escape(rule)):
        run_query(query(**parts), resolver(products=products()))


def test_get_through_one_link_reads_the_linked_value() -> None:
    catalogue = pl.DataFrame({"sku": ["s1", "s2", "s3"], "pet_type": ["cat", "dog", "cat"]})
    orders = pl.DataFrame(
        {
            "product": ["s1", "s2", "s3", "s1", "s2", "s3"] * 10,
            "channel": ["web", "shop", "web", "web", "shop", "web"] * 10,
        }
    )
    sources = {
        "orders": Source("orders", "v1", "table", orders, links={"product": "catalogue"}),
        "catalogue": Source("catalogue", "v1", "table", catalogue, key="sku"),
    }
    outcome = run_query(
        parse_query(
            {
                "test": {"$index": {"$mod": [4, 0]}},
                "evaluate": {
                    "from": "orders",
                    "where": {"product.pet_type": {"$get": "product.pet_type"}},
                    "predict": "channel",
                },
                "select": ["n", "accuracy", "cases"],
            }
        ),
        sources.__getitem__,
    )
    # cat -> web always; dog -> shop always: the linked evidence decides every row.
    assert outcome.result["accuracy"] == 1.0
    assert outcome.result["cases"][0]["testCase"] == {"product.pet_type": "cat", "channel": "web"}
    assert {s.name for s in outcome.sources} == {"orders", "catalogue"}


def test_a_base_accuracy_of_zero_is_explained() -> None:
    frame = products().sort("category")  # bakery (a rare category) first
    outcome = run_query(
        query(test=None, testSource={"limit": 20}, select=["accuracy", "baseAccuracy"]),
        resolver(products=frame),
    )
    assert outcome.result["baseAccuracy"] == 0.0
    assert "about the split, not the model" in outcome.result["message"]
    assert "$sample, $hash or $index $mod" in outcome.result["message"]


def test_max_time_returns_what_was_computed_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(predict_module, "CELLS_PER_CHUNK", 1)  # 16 rows per chunk
    ticks = iter(np.arange(0, 1000, 0.4))  # each clock read costs 0.4 s
    # 16 s: the reads of the preparation's deadline checks fit, the scoring's do not.
    outcome = run_query(
        query(maxTime=16, select=["accuracy"]),
        resolver(products=products()),
        clock=lambda: next(ticks),
    )
    result = outcome.result
    assert result["truncated"] is True and result["requested"] == 134
    assert "time limit after" in result["message"] and "of 134 test rows" in result["message"]
    assert 0 < outcome.metrics["n"] < 134 and outcome.truncated


def test_a_nested_from_evaluates_one_tenant_as_its_own_table() -> None:
    frame = products()
    select = ["n", "accuracy", "logLoss", "trainSamples", "testSamples"]
    nested = run_query(
        query(**{"from": {"from": "products", "where": {"tenant": "A"}}}, select=select),
        resolver(products=frame),
    )
    alone = run_query(query(select=select), resolver(products=frame.filter(tenant="A")))
    assert nested.result == pytest.approx(alone.result, abs=1e-12)
    assert (
        nested.result["trainSamples"] + nested.result["testSamples"]
        == frame.filter(tenant="A").height
    )


def _numeric(n: int = 300, seed: int = 2) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    weight = rng.uniform(1500, 5000, size=n)
    return pl.DataFrame(
        {
            "weight": weight,
            "origin": rng.choice(["usa", "europe", "japan"], size=n).tolist(),
            "mpg": 50 - weight / 150 + rng.normal(0, 2, size=n),
        }
    )


def test_knn_estimates_equal_scikit_learn_neighbours() -> None:
    frame = _numeric()
    outcome = run_query(
        query(
            estimate="mpg",
            where={"weight": {"$get": "weight"}},
            config={"k": 5},
            select=["n", "mae", "rmse", "r2"],
        ),
        resolver(products=frame),
    )
    test = np.arange(frame.height) % 3 == 0
    sd = frame["weight"].filter(pl.Series(~test)).std(ddof=0)
    x = (frame["weight"].to_numpy() / sd)[:, None]
    y = frame["mpg"].to_numpy()
    oracle = KNeighborsRegressor(n_neighbors=5, metric="manhattan").fit(x[~test], y[~test])
    # expected from sklearn KNeighborsRegressor (manhattan on the sd-scaled value) and
    # mean_absolute_error; tolerance 1e-9. Distances never reach the cap of 1 sd here for
    # the 5 nearest, so the capped distance orders rows the same way.
    assert outcome.result["mae"] == pytest.approx(
        mean_absolute_error(y[test], oracle.predict(x[test])), abs=1e-9
    )
    assert outcome.result["n"] == int(test.sum())


def _diabetes() -> pl.DataFrame:
    """scikit-learn's diabetes table, unscaled (bmi in kg/m², sd about 4.4), sex as text."""
    frame = pl.from_pandas(load_diabetes(as_frame=True, scaled=False).frame)
    return frame.with_columns(sex=pl.col("sex").cast(pl.Int64).cast(pl.String))


def test_a_value_beyond_every_training_row_is_estimated_from_its_nearest_rows() -> None:
    # Three rows with bmi = 100 (about 13 sd above every other row) are the test rows. Every
    # training row is more than 1 sd away, so under the capped distance they all tied and
    # each test row was estimated from the first 10 training rows by table position.
    far = [0, 5, 10]
    frame = _diabetes().with_columns(
        bmi=pl.when(pl.int_range(0, pl.len()).is_in(far)).then(100.0).otherwise("bmi")
    )
    outcome = run_query(
        query(
            **{"test": {"bmi": 100.0}},
            estimate="target",
            where={"bmi": {"$get": "bmi"}},
            select=["n", "mae", "testSamples"],
        ),
        resolver(products=frame),
    )
    test = np.isin(np.arange(frame.height), far)
    sd = frame["bmi"].filter(pl.Series(~test)).std(ddof=0)
    x = (frame["bmi"].to_numpy() / sd)[:, None]
    y = frame["target"].to_numpy()
    oracle = KNeighborsRegressor(n_neighbors=10, metric="manhattan").fit(x[~test], y[~test])
    highest = np.sort(frame["bmi"].filter(pl.Series(~test)).to_numpy())[::-1]
    assert highest[9] > highest[10]  # no tie at the 10th: the oracle's choice is unambiguous
    # expected from sklearn KNeighborsRegressor (manhattan on the sd-scaled value: the 10
    # training rows of highest bmi) and mean_absolute_error; tolerance 1e-9.
    assert outcome.result["n"] == 3
    assert outcome.result["mae"] == pytest.approx(
        mean_absolute_error(y[test], oracle.predict(x[test])), abs=1e-9
    )


def _tie_sharing_knn(
    train: list[tuple[tuple[float, ...], float]], row: tuple[float, ...], k: int
) -> float:
    """Brute force, row by row: the mean target of the k nearest training rows, the rows tied
    with the k-th sharing its remaining places equally (the mean over every tie break)."""
    scored = sorted((sum(abs(a - b) for a, b in zip(x, row, strict=True)), t) for x, t in train)
    kth = scored[k - 1][0]
    closer = [t for d, t in scored if d < kth]
    tied = [t for d, t in scored if d == kth]
    return (sum(closer) + (k - len(closer)) * sum(tied) / len(tied)) / k


def test_knn_estimates_do_not_depend_on_the_order_of_the_rows() -> None:
    # Sex (text) and age (whole years) tie many training rows at the 10th place: which of
    # them count must not depend on where they sit in the table. The test rows are chosen by
    # a field, so the same rows are tested in either order.
    frame = _diabetes().with_columns(fold=pl.int_range(0, pl.len()) % 5)
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=3)
    answers = [
        run_query(
            query(
                **{"test": {"fold": 0}},
                estimate="target",
                where={"sex": {"$get": "sex"}, "age": {"$get": "age"}},
                select=["n", "mae"],
            ),
            resolver(products=table),
        ).result
        for table in (frame, shuffled)
    ]
    test = (frame["fold"] == 0).to_numpy()
    assert answers[0]["n"] == answers[1]["n"] == int(test.sum())
    assert answers[1]["mae"] == pytest.approx(answers[0]["mae"], abs=1e-9)
    # The oracle: a sex that differs counts 1, age in training sds (no age is 1 sd from its
    # nearest rows' ages here, so the cap never applies), the rows tied at the 10th place
    # sharing it; tolerance 1e-9.
    age = frame["age"].to_numpy() / frame["age"].filter(pl.Series(~test)).std(ddof=0)
    sex = (frame["sex"] == "2").to_numpy().astype(float)
    target = frame["target"].to_numpy()
    rows = list(zip(zip(sex, age, strict=True), target, strict=True))
    train = [rows[i] for i in np.flatnonzero(~test)]
    expected = [_tie_sharing_knn(train, rows[i][0], 10) for i in np.flatnonzero(test)]
    assert answers[0]["mae"] == pytest.approx(mean_absolute_error(target[test], expected), abs=1e-9)


def test_regression_estimates_equal_least_squares() -> None:
    frame = _numeric()
    outcome = run_query(
        query(
            estimate="mpg",
            where={"weight": {"$get": "weight"}},
            config={"model": "regression"},
            select=["n", "mae", "baselineMae", "maeGain"],
        ),
        resolver(products=frame),
    )
    test = np.arange(frame.height) % 3 == 0
    x = frame["weight"].to_numpy()[:, None]
    y = frame["mpg"].to_numpy()
    oracle = LinearRegression().fit(x[~test], y[~test])
    # expected from sklearn LinearRegression; tolerance 1e-4 (our ridge of 1e-6 * n on
    # standardised inputs moves the estimates by far less).
    assert outcome.result["mae"] == pytest.approx(
        mean_absolute_error(y[test], oracle.predict(x[test])), abs=1e-4
    )
    baseline = mean_absolute_error(y[test], np.full(test.sum(), y[~test].mean()))
    assert outcome.result["baselineMae"] == pytest.approx(baseline, abs=1e-12)
    assert outcome.result["maeGain"] == pytest.approx(baseline - outcome.result["mae"])


def test_rows_without_an_estimate_are_left_out_and_counted() -> None:
    frame = _numeric(30).with_columns(
        origin=pl.when(pl.int_range(0, 30) == 0).then(pl.lit("mars")).otherwise("origin")
    )
    outcome = run_query(
        query(estimate="mpg", where={"origin": {"$get": "origin"}}, select=["n", "mae"]),
        resolver(products=frame),
    )
    # Row 0 (a test row of fold [3, 0]) is the only "mars": no training row shares it.
    assert outcome.result["n"] == 9
    assert "1 test rows had no estimate" in outcome.result["message"]


@pytest.mark.parametrize("model", ["knn", "regression"])
def test_rows_with_null_numeric_evidence_have_no_estimate(model: str) -> None:
    frame = _numeric()
    blind = np.arange(frame.height) % 6 == 0  # half the test rows of fold [3, 0]
    frame = frame.with_columns(weight=pl.when(pl.Series(blind)).then(None).otherwise("weight"))
    outcome = run_query(
        query(
            estimate="mpg",
            where={"weight": {"$get": "weight"}},
            config={"model": model, **({"k": 5} if model == "knn" else {})},
            select=["n", "mae", "testSamples"],
        ),
        resolver(products=frame),
    )
    test = np.arange(frame.height) % 3 == 0
    scored = test & ~blind
    x = frame["weight"].to_numpy()[:, None]
    y = frame["mpg"].to_numpy()
    if model == "knn":
        x = x / frame["weight"].filter(pl.Series(~test)).std(ddof=0)
        oracle: Any = KNeighborsRegressor(n_neighbors=5, metric="manhattan")
    else:
        oracle = LinearRegression()
    oracle.fit(x[~test], y[~test])
    # The 50 test rows with a null weight have no evidence: no estimate, out of n, counted.
    assert outcome.result["testSamples"] == 100 and outcome.result["n"] == 50
    assert "50 test rows had no estimate" in outcome.result["message"]
    # expected from sklearn (as in the two tests above) on the 50 rows with a weight;
    # tolerance 1e-4 (the ridge of the regression).
    assert outcome.result["mae"] == pytest.approx(
        mean_absolute_error(y[scored], oracle.predict(x[scored])), abs=1e-4
    )


def test_a_query_without_evidence_estimates_nothing_blind() -> None:
    outcome = run_query(
        query(estimate="mpg", where={}, select=["n", "testSamples"]),
        resolver(products=_numeric()),
    )
    assert outcome.result["testSamples"] == 100 and outcome.result["n"] == 0
    assert "100 test rows had no estimate" in outcome.result["message"]


class SteppingClock:
    """A clock that moves ``step`` seconds each time it is read (no wall-clock time)."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.mark.parametrize(
    "parts",
    [
        {"select": ["n", "accuracy"]},
        {"estimate": "price", "where": {"category": {"$get": "category"}}, "select": ["n", "mae"]},
    ],
    ids=["predict", "estimate"],
)
def test_max_time_bounds_a_run_of_one_chunk(parts: dict[str, Any]) -> None:
    # 134 test rows: one chunk of either kind. The budget runs out before the first row.
    outcome = run_query(
        query(maxTime=1e-6, **parts), resolver(products=products()), clock=SteppingClock(1.0)
    )
    assert outcome.truncated and outcome.result["truncated"] is True
    assert outcome.result["requested"] == 134 and outcome.result["n"] == 0
    # (a predict's budget runs out while its evidence is prepared, before any scoring)
    assert "after 0 of 134 test rows had been scored" in outcome.result["message"]


def test_max_time_stops_within_a_chunk_at_row_granularity() -> None:
    # Scoring costs 1 s a row (the clock reads the rows scored so far) and the budget is
    # 20.5 s: the run stops within a row of its budget, not after the whole chunk of 134.
    clock = SteppingClock(0.0)

    def progress(done: int, total: int) -> None:
        clock.now = float(done)

    outcome = run_query(
        query(maxTime=20.5, select=["n", "accuracy"]),
        resolver(products=products()),
        clock=clock,
        progress=progress,
    )
    assert outcome.truncated and 20 <= outcome.result["n"] <= 21
    assert f"after {outcome.result['n']} of 134 test rows" in outcome.result["message"]


def test_max_time_is_checked_between_folds() -> None:
    frame = products()
    clock = SteppingClock(0.0)

    def progress(done: int, total: int) -> None:
        if done == total:  # a fold finished: from now on the budget is spent
            clock.now = 1e9

    outcome = run_folds(
        query(maxTime=10, select=["n", "accuracy"]),
        resolver(products=frame),
        folds=3,
        clock=clock,
        progress=progress,
    )
    result = outcome.result
    assert result["truncated"] is True and outcome.truncated
    assert len(result["folds"]) == 1  # fold 1 was not started
    assert result["coverage"] == {"rows": 400, "tested": 134, "everyRowOnce": False}
    assert "before fold 1 of 3" in result["message"]


def test_max_time_bounds_the_calibration_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    # The leave-one-out scoring of the temperature fit (266 training rows here, up to 2,000)
    # ran whole before the first deadline check. Each training row it scores now costs 1 s on
    # the clock (the real scores, then the clock moves on), and the budget is 20.5 s.
    clock = SteppingClock(0.0)
    real = NaiveBayes.leave_one_out_scores

    def costly(self: NaiveBayes, counts: Any, weighted: Any, classes: Any) -> np.ndarray:
        scores = real(self, counts, weighted, classes)
        clock.now += counts.shape[0]
        return scores

    monkeypatch.setattr(NaiveBayes, "leave_one_out_scores", costly)
    calibrated = query(maxTime=20.5, config={"calibrate": True}, select=["n", "tau"])
    outcome = run_query(calibrated, resolver(products=products()), clock=clock)
    result = outcome.result
    assert outcome.truncated and result["truncated"] is True and result["requested"] == 134
    assert result["n"] == 0 and result["tau"] is None  # no test row scored, no tau fitted
    assert clock.now <= 21.0  # stopped within a row of its budget, not after all 266
    fitted = re.search(r"scored (\d+) of 266 training rows", result["message"])
    assert fitted is not None and 20 <= int(fitted.group(1)) <= 21, result["message"]
    assert "time limit during calibration" in result["message"]
    assert "after 0 of 134 test rows" in result["message"]

    # A budget that lasts: the fit is scored in chunks and gives the tau of one whole fit.
    clock.now = 0.0
    roomy = run_query(
        query(maxTime=3600, config={"calibrate": True}, select=["n", "tau"]),
        resolver(products=products()),
        clock=clock,
    ).result
    monkeypatch.undo()
    whole = run_query(
        query(config={"calibrate": True}, select=["n", "tau"]), resolver(products=products())
    ).result
    assert "truncated" not in roomy and roomy["n"] == whole["n"] == 134
    # The same leave-one-out scores row by row, so the same fit; tolerance 1e-12.
    assert roomy["tau"] == pytest.approx(whole["tau"], abs=1e-12)


def test_a_truncated_estimate_counts_rows_without_an_estimate_apart() -> None:
    # 50 of the 100 test rows have no weight (no evidence, so no estimate); the budget runs
    # out before the first of the other 50. The message said "after 50 of 100 test rows"
    # with n = 0.
    frame = _numeric()
    blind = (np.arange(frame.height) % 3 == 0) & (np.arange(frame.height) % 2 == 0)
    frame = frame.with_columns(
        weight=pl.when(pl.Series(blind)).then(None).otherwise(pl.col("weight"))
    )
    outcome = run_query(
        query(
            maxTime=1e-6,
            estimate="mpg",
            where={"weight": {"$get": "weight"}},
            select=["n", "testSamples"],
        ),
        resolver(products=frame),
        clock=SteppingClock(1.0),
    )
    result = outcome.result
    assert outcome.truncated and result["n"] == 0 and result["testSamples"] == 100
    assert "time limit after 0 of 100 test rows had been scored" in result["message"]
    assert "(50 others had no estimate)" in result["message"], result["message"]


class CountedFeatures:
    """The real ``feature_frame``, counting the rows whose features it built; with a clock,
    each row built costs one second on it."""

    def __init__(self, clock: SteppingClock | None = None) -> None:
        self.real, self.rows, self.clock = predict_module.feature_frame, 0, clock

    def __call__(self, modes: Any, values: list[pl.Series], *, conjunctions: bool) -> Any:
        frame = self.real(modes, values, conjunctions=conjunctions)
        built = len(values[0]) if values else 0
        self.rows += built
        if self.clock is not None:
            self.clock.now += built
        return frame


def test_max_time_bounds_the_preparation_of_the_features(monkeypatch: pytest.MonkeyPatch) -> None:
    # The features of all 400 rows in scope were built whole before the first deadline check:
    # a 1 us budget still paid for the preparation. Now none is built once the budget is gone.
    counted = CountedFeatures()
    monkeypatch.setattr(predict_module, "feature_frame", counted)
    outcome = run_query(
        query(maxTime=1e-6, select=["n", "accuracy"]),
        resolver(products=products()),
        clock=SteppingClock(1.0),
    )
    result = outcome.result
    assert counted.rows == 0
    assert outcome.truncated and result["truncated"] is True
    assert result["requested"] == 134 and result["n"] == 0
    assert (
        "time limit while the evidence was prepared (the features of 0 of 400 rows had been "
        "built), after 0 of 134 test rows had been scored" in result["message"]
    ), result["message"]

    # A sweep prepares once, for fold 0: cut there, the sweep says so like any truncation.
    sweep = run_folds(
        query(maxTime=1e-6, select=["n", "accuracy"]),
        resolver(products=products()),
        folds=3,
        clock=SteppingClock(1.0),
    )
    assert counted.rows == 0 and sweep.truncated and sweep.result["truncated"] is True
    assert sweep.result["n"] == 0 and sweep.result["requested"] == 400
    assert "in fold 0 of 3" in sweep.result["message"]
    assert "the features of 0 of 400 rows had been built" in sweep.result["message"]


def test_max_time_stops_the_preparation_at_row_granularity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Building a row's features costs 1 s on the clock and the budget is 100.5 s: the
    # preparation stops within a chunk of its budget, not after all 400 rows.
    clock = SteppingClock(0.0)
    counted = CountedFeatures(clock)
    monkeypatch.setattr(predict_module, "feature_frame", counted)
    outcome = run_query(
        query(maxTime=100.5, select=["n", "accuracy"]), resolver(products=products()), clock=clock
    )
    built = re.search(
        r"the features of (\d+) of 400 rows had been built", outcome.result["message"]
    )
    assert built is not None, outcome.result["message"]
    assert int(built.group(1)) == counted.rows and 90 <= counted.rows <= 101
    assert outcome.truncated and outcome.result["n"] == 0


def test_a_test_source_s_features_are_built_under_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Evidence read from another table is built for the test rows after the scope's: its
    # rows cost 1 s each here, with the scope's 266 rows paid for within the 300.5 s budget.
    frame = products()
    test = pl.Series(np.arange(frame.height) % 3 == 0)
    clock = SteppingClock(0.0)
    counted = CountedFeatures(clock)
    monkeypatch.setattr(predict_module, "feature_frame", counted)
    outcome = run_query(
        query(maxTime=300.5, test=None, testSource={"from": "held"}, select=["n"]),
        resolver(products=frame.filter(~test), held=frame.filter(test)),
        clock=clock,
    )
    result = outcome.result
    assert outcome.truncated and result["n"] == 0 and result["requested"] == 134
    built = re.search(r"the test rows' features of (\d+) of 134 rows", result["message"])
    assert built is not None and int(built.group(1)) < 134, result["message"]


@pytest.mark.parametrize("profile", ["fast", "group", "high"])
def test_features_built_in_row_chunks_equal_one_build(
    monkeypatch: pytest.MonkeyPatch, profile: str
) -> None:
    # Chunks of 7 rows (the first of 1) against one chunk of all 400: the same response to
    # 1e-12 (a row's features and group weights depend on that row alone).
    select = ["n", "accuracy", "meanRank", "logLoss", "brier", "ece", "baseAccuracy"]
    whole = run_query(query(config={"ai": profile}, select=select), resolver(products=products()))
    counted = CountedFeatures()
    monkeypatch.setattr(predict_module, "feature_frame", counted)
    monkeypatch.setattr(predict_module, "PREPARE_CHUNK_ROWS", 7)
    chunked = run_query(query(config={"ai": profile}, select=select), resolver(products=products()))
    assert counted.rows == 400
    for name in select:
        assert chunked.result[name] == pytest.approx(whole.result[name], abs=1e-12), name
