"""The activation gate's whole rule (core.golden.gate.decide_gate) on hand-made evidence: no
warehouse, no run; the stage tests check that the evidence is read right."""

from eval_pipelines.core.golden.gate import GatingEvidence, decide_gate
from eval_pipelines.core.golden.scoring import score_case, summarise_run
from eval_pipelines.core.workflows.schema import parse_schema

SCHEMA = parse_schema(
    {
        "fields": [
            {"id": "invoice_no", "name": "Invoice number"},
            {"id": "customer", "name": "Customer"},
        ]
    },
    "schema",
)


def run_score(*outputs):
    cases = [
        score_case(SCHEMA, {"invoice_no": "INV-1", "customer": "ACME"}, output, key_columns={})
        for output in outputs
    ]
    return summarise_run(cases, schema=SCHEMA)


RIGHT = {"invoice_no": "INV-1", "customer": "ACME"}
WRONG_CUSTOMER = {"invoice_no": "INV-1", "customer": "Initech"}


def evidence(**changes):
    fields = {
        "set_name": "invoices",
        "threshold": 1.0,
        "golden_run_id": "gr-1",
        "enabled": ("case-0001", "case-0002"),
        "covered": frozenset({"case-0001", "case-0002"}),
        "score": run_score(RIGHT, RIGHT),
    }
    return GatingEvidence(**(fields | changes))


def test_a_workflow_no_set_gates_may_be_activated():
    gate = decide_gate("wf", "rev1", [])
    assert (gate.passed, gate.reason, gate.sets) == (
        True,
        "no golden set gates this workflow",
        (),
    )


def test_a_set_that_covers_every_enabled_case_and_reaches_its_threshold_passes():
    gate = decide_gate("wf", "rev1", [evidence()])
    assert gate.passed
    assert gate.reason == "set invoices: scored 4/4 at or above threshold 1.0"
    assert gate.sets[0].field_accuracy == 1.0
    assert gate.to_json()["sets"][0]["goldenRunId"] == "gr-1"


def test_a_set_never_run_against_the_revision_blocks_and_names_its_newest_run():
    gate = decide_gate(
        "wf",
        "rev1",
        [evidence(golden_run_id=None, score=None, unfinished="failed, worker killed")],
    )
    assert not gate.passed
    assert gate.reason == (
        "set invoices has not been run against revision rev1 "
        "(its newest run there is failed, worker killed)"
    )
    assert gate.sets[0].field_accuracy is None


def test_a_case_enabled_after_the_run_blocks_however_good_the_score():
    gate = decide_gate("wf", "rev1", [evidence(enabled=("case-0001", "case-0002", "case-0003"))])
    assert not gate.passed
    assert "does not cover 1 of its 3 enabled case(s) (case-0003: added or enabled" in (gate.reason)
    assert "golden run invoices --revision rev1" in gate.reason


def test_mixed_revisions_and_cases_without_output_block_in_that_order():
    mixed = decide_gate(
        "wf",
        "rev1",
        [evidence(mixed_revisions=("case-0002",), without_output=(("case-0001", "x"),))],
    )
    assert "mixed revisions (cases case-0002 scored another revision)" in mixed.reason
    silent = decide_gate(
        "wf", "rev1", [evidence(without_output=(("case-0001", "step failed: boom"),))]
    )
    assert not silent.passed
    assert silent.reason == (
        "set invoices: 1 case(s) produced no output (case-0001: step failed: boom)"
    )


def test_a_score_below_the_threshold_blocks_and_names_the_missed_fields():
    gate = decide_gate("wf", "rev1", [evidence(score=run_score(RIGHT, WRONG_CUSTOMER))])
    assert not gate.passed
    assert gate.reason == (
        "set invoices: scored 3/4 below threshold 1.0 (misses: customer 1 of 2 wrong)"
    )


def test_a_case_disabled_since_the_run_is_left_out_and_said():
    gate = decide_gate("wf", "rev1", [evidence(enabled=("case-0001",))])
    assert gate.passed
    assert gate.reason.endswith("(case-0002 disabled since the run, left out)")


def test_the_reason_lists_only_the_failing_sets_when_one_fails():
    passing = evidence(set_name="a")
    failing = evidence(set_name="b", score=run_score(WRONG_CUSTOMER, WRONG_CUSTOMER))
    gate = decide_gate("wf", "rev1", [passing, failing])
    assert not gate.passed
    assert gate.reason.startswith("set b: scored 2/4 below threshold 1.0")
    assert "set a" not in gate.reason
    assert [s.passed for s in gate.sets] == [True, False]


def test_a_small_set_is_gated_on_its_counts_and_prints_no_share_as_an_estimate():
    # 4 values: the gate still decides (4/4 reaches 1.0, 3/4 does not), but a share of fewer
    # than 20 observations is written insufficient_evidence beside its counts, never 0.750.
    assert decide_gate("wf", "rev1", [evidence()]).passed
    score = run_score(RIGHT, WRONG_CUSTOMER)
    document = score.to_json()
    assert document["fieldAccuracy"] == {
        "correct": 3,
        "n": 4,
        "value": "insufficient_evidence",
    }
    assert (document["passRate"]["passed"], document["passRate"]["n"]) == (1, 2)
    assert document["passRate"]["value"] == "insufficient_evidence"
    customer = next(f for f in document["fields"] if f["key"] == "customer")
    assert (customer["correct"], customer["scored"], customer["accuracy"]) == (
        1,
        2,
        "insufficient_evidence",
    )
    # The exact shares come back from the counts.
    again = type(score).from_json(document)
    assert (again.field_accuracy, again.pass_rate, again.field("customer").accuracy) == (
        0.75,
        0.5,
        0.5,
    )
    # From 20 values on, the share is printed: 19 of 20 right is 0.95.
    large = run_score(*([RIGHT] * 9), WRONG_CUSTOMER)
    assert large.to_json()["fieldAccuracy"]["value"] == 0.95
    gate = decide_gate("wf", "rev1", [evidence(score=large)])
    assert gate.reason.startswith("set invoices: scored 0.950 (19/20) below threshold 1.0")
