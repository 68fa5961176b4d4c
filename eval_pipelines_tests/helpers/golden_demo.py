"""The demo invoice workflow and its golden set, as the golden tests use them: the committed
workflow file, variants of it that change one thing, and a seeded set of the three demo
invoices (33 labelled values; counted by hand in :mod:`eval_pipelines_tests.api.test_golden`),
alone or with a fourth case whose document makes a variant's regex backtrack without end.
"""

from __future__ import annotations

from pathlib import Path

from eval_pipelines_tests.helpers.paths import REPO

WORKFLOW_FILE = REPO / "data" / "workflows" / "supplier_invoices.yaml"
GOLDEN = REPO / "data" / "demo" / "golden"
DOCS = ("hlp-1001", "hlp-1002", "hlp-1003")
WORKFLOW = "supplier_invoices"

CUSTOMER_RULE = r"customer: Bill to:\s+(.+)"
CUSTOMER_FIELD = "{id: customer, name: Customer, source: customer}"

# (key, scored, correct) of the per-field breakdown on the full demo set, in schema order;
# ``line_items`` is the table's invented-rows row (none here, so nothing scored).
ALL_FIELDS_PASS = [
    ("invoice_number", 3, 3),
    ("invoice_date", 3, 3),
    ("total", 3, 3),
    ("customer", 3, 3),
    ("line_items.sku", 6, 6),
    ("line_items.description", 3, 3),
    ("line_items.qty", 6, 6),
    ("line_items.unit_price", 6, 6),
    ("line_items", 0, 0),
]


def workflow_variant(folder: Path, name: str, old: str, new: str) -> Path:
    """A copy of the demo workflow file with exactly one occurrence of ``old`` replaced."""
    text = WORKFLOW_FILE.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path = folder / f"{name}.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def broken_variant(folder: Path) -> Path:
    """The ``customer`` regex captures only the first word ("Corrib", "Salthill", "Eyre")."""
    return workflow_variant(folder, "broken", CUSTOMER_RULE, r"customer: Bill to:\s+(\S+)")


def renamed_variant(folder: Path) -> Path:
    """Field ``customer`` gets a new display name; same id, same source."""
    return workflow_variant(
        folder, "renamed", CUSTOMER_FIELD, "{id: customer, name: Client, source: customer}"
    )


def without_customer_variant(folder: Path) -> Path:
    """The schema no longer has field ``customer`` (the template still extracts it)."""
    return workflow_variant(folder, "no_customer", f"        - {CUSTOMER_FIELD}\n", "")


def seed(set_name: str = "inv", *, gate: bool = True, file: Path = WORKFLOW_FILE) -> str:
    """Save the workflow, create a set over it and add the three demo cases; returns the
    revision."""
    from eval_pipelines.api import golden, workflows

    saved = workflows.save_workflow(WORKFLOW, file, saved_by="tests")
    golden.create_set(set_name, workflow=WORKFLOW, gate=gate)
    for doc in DOCS:
        golden.add_golden_case(
            set_name, document=GOLDEN / f"{doc}.txt", labels=GOLDEN / f"{doc}.labels.json"
        )
    return str(saved.revision)


HANGS = "a" * 40 + "!\n"


def regex_variant(folder: Path, *, time_limit: float) -> Path:
    """The demo workflow with the pathological field and a time limit per step."""
    text = WORKFLOW_FILE.read_text(encoding="utf-8")
    assert text.count("    cost: 1\n") == 1 and text.count(CUSTOMER_RULE) == 1
    text = text.replace("    cost: 1\n", f"    cost: 1\n    time_limit: {time_limit:g}\n")
    text = text.replace(CUSTOMER_RULE, f"{CUSTOMER_RULE}\n          reference: '(a+)+$'")
    path = folder / "regex.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def seed_with_hanging_case(folder: Path, *, time_limit: float) -> str:
    """The demo set (3 cases) plus case-0004, whose document makes the regex backtrack;
    returns the variant's revision."""
    from eval_pipelines.api import golden, workflows

    seed("inv")
    document = folder / "hlp-1003-ref.txt"
    document.write_text((GOLDEN / "hlp-1003.txt").read_text(encoding="utf-8") + HANGS)
    golden.add_golden_case("inv", document=document, labels=GOLDEN / "hlp-1003.labels.json")
    return str(
        workflows.save_workflow(WORKFLOW, regex_variant(folder, time_limit=time_limit)).revision
    )
