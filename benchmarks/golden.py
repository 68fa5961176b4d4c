"""Benchmark a golden run: N invoices (generated from the demo invoices with other numbers,
customers and line items) run through the demo workflow and scored, first cold (every step
executed), then again on the same revision (every step served from cache), then after a
change to the one node (every step executed again).

Run from the repository root::

    .venv/bin/python benchmarks/golden.py [--documents 200]

Prints ``name: value`` lines. It calls the stage directly (no Dagster run), so the figures
are the golden run itself; ``golden run`` adds the run's start-up (~6-8 s through the queue).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from figures import line

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "data" / "workflows" / "supplier_invoices.yaml"
ITEMS = [
    ("PA-101", "A4 copy paper, 80 gsm, box"),
    ("PA-205", "A3 drawing paper, 120 gsm"),
    ("EN-310", "C5 envelopes, pack of 500"),
    ("CR-020", "Wax crayons, class set"),
    ("NB-550", "Notebook, dotted, A5"),
]
CUSTOMERS = ["Corrib Print Studio", "Salthill Primary School", "Eyre Square Books", "Quay Cafe"]


def invoice(number: int, rng: random.Random) -> tuple[str, dict]:
    lines = rng.sample(ITEMS, rng.randint(1, len(ITEMS)))
    rows = [(sku, text, rng.randint(1, 60), round(rng.uniform(1, 40), 2)) for sku, text in lines]
    subtotal = sum(q * p for _, _, q, p in rows)
    total = round(subtotal * 1.23, 2)
    customer = rng.choice(CUSTOMERS)
    body = [
        "Harbour Lane Paper Co.",
        "12 Quay Street, Galway, Ireland",
        "",
        "INVOICE",
        f"Invoice no. HLP-{number}",
        f"Invoice date: 2026-05-{1 + number % 28:02d}",
        f"Bill to: {customer}",
        "",
        "SKU     Description                     Qty   Unit price",
        *[f"{sku}  {text:<31} {q:>3} {p:>12.2f}" for sku, text, q, p in rows],
        f"Subtotal {subtotal:>45,.2f}",
        f"Total due: EUR {total:,.2f}",
    ]
    labels = {
        "invoice_number": f"HLP-{number}",
        "invoice_date": f"2026-05-{1 + number % 28:02d}",
        "total": total,
        "customer": customer,
        "line_items": [
            {"sku": sku, "description": text, "qty": q, "unit_price": p} for sku, text, q, p in rows
        ],
    }
    return "\n".join(body) + "\n", labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        os.environ["EVAL_PIPELINES_WAREHOUSE"] = str(work / "warehouse.duckdb")
        os.environ["EVAL_PIPELINES_WORKFLOWS_DIR"] = str(work / "workflows")
        from eval_pipelines.api import golden, workflows
        from eval_pipelines.stages.golden import run_golden_sets, score_run
        from eval_pipelines.storage.warehouse import connect

        revision = workflows.save_workflow("invoices", WORKFLOW).revision
        golden.create_set("bench", workflow="invoices", gate=True)
        rng = random.Random(7)
        started = time.perf_counter()
        for i in range(args.documents):
            text, labels = invoice(2000 + i, rng)
            path = work / f"inv-{i}.txt"
            path.write_text(text)
            golden.add_golden_case("bench", document=path, labels=labels)
        line("documents", args.documents)
        line("add_case_seconds_per_document", (time.perf_counter() - started) / args.documents)

        def open_warehouse(read_only: bool = False):  # noqa: ANN202
            return connect(work / "warehouse.duckdb", read_only=read_only)

        def run(label: str, rev: str) -> None:
            started = time.perf_counter()
            (outcome,) = run_golden_sets(open_warehouse, rev)
            seconds = time.perf_counter() - started
            with open_warehouse(read_only=True) as conn:
                score = score_run(conn, outcome.golden_run_id).score
            line(f"{label}_seconds", seconds)
            line(f"{label}_documents_per_second", args.documents / seconds)
            line(f"{label}_executed_steps", outcome.executed_steps)
            line(f"{label}_cached_steps", outcome.cached_steps)
            line(f"{label}_field_accuracy", score.field_accuracy or 0.0)

        run("cold", revision)
        run("cached", revision)
        changed = work / "changed.yaml"
        changed.write_text(WORKFLOW.read_text().replace(r"Bill to:\s+(.+)", r"Bill to:\s*(.+)"))
        run("changed_node", workflows.save_workflow("invoices", changed).revision)
        started = time.perf_counter()
        with open_warehouse(read_only=True) as conn:
            from eval_pipelines.stages.golden import gate_decision

            gate_decision(conn, revision)
        line("gate_decision_seconds", time.perf_counter() - started)


if __name__ == "__main__":
    main()
