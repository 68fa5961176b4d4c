"""invoice2data's own bundled templates over the real documents of its test suite.

The documents live next to the repository (``../shared/data/invoice2data``, never copied in);
without them this module is skipped. Each ``.json`` next to a document is invoice2data's
expected output: a list with one mapping, dates as ``YYYY-MM-DD``.

What the node gets right depends on the text it sees. PDFs are read through pdfplumber
with invoice2data's own layout settings (invoice2data's test suite reads them with poppler's
pdftotext): Flipkart and Orlen come out complete, Netpresse partly, and the AWS and OYO
templates only fit the pdftotext text kept in ``golden.jsonl``. The assertions pin exactly
which expected fields are reproduced, so a change in either direction shows up.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.core.workflows.definition import parse_workflow
from eval_pipelines.core.workflows.documents import document_from_text, read_document
from eval_pipelines.core.workflows.nodes import NODE_TYPES, Document, NodeFailed
from eval_pipelines.core.workflows.output import normalise_value

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared" / "data" / "invoice2data"
COMPARE = SHARED / "compare"

pytestmark = pytest.mark.skipif(
    not COMPARE.is_dir(), reason=f"invoice2data test documents not found at {SHARED}"
)

BUILTIN = [
    "com.flipkart.WSRetail.json",
    "pl.orlen.yml",
    "fr.publicationannoncelegale.yml",
    "com/com.amazon.aws.yml",  # fr/com.amazon.aws.yml has the same file name
    "com.oyo.invoice.yml",
]


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    workflow = parse_workflow(
        {
            "nodes": [
                {
                    "id": "invoice",
                    "type": "invoice2data",
                    "builtin_templates": BUILTIN,
                    "schema": {
                        "fields": [
                            {"id": "amount", "name": "amount", "type": "number", "source": "amount"}
                        ]
                    },
                }
            ]
        },
        name="invoice2data-builtin",
        base_dir=REPO,
    )
    return workflow.nodes[0].config


def expected(stem: str) -> dict[str, Any]:
    [fields] = json.loads((COMPARE / f"{stem}.json").read_text(encoding="utf-8"))
    for name in ("date", "date_check_in", "date_check_out"):
        if name in fields:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", fields[name])
    return fields


def golden_text(doc_id: str) -> Document:
    """The pdftotext text invoice2data's test suite extracted, kept in golden.jsonl."""
    for line in (SHARED / "golden.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["doc_id"] == doc_id:
            return document_from_text(record["source_file"], record["text"])
    raise AssertionError(f"{doc_id} is not in golden.jsonl")


def run(config: dict[str, Any], document: Document) -> dict[str, Any]:
    return NODE_TYPES["invoice2data"].run(config, document, {})


def reproduced(output: dict[str, Any], wanted: dict[str, Any]) -> set[str]:
    return {name for name, value in wanted.items() if output.get(name) == value}


def test_flipkart_pdf_all_seven_fields(config: dict[str, Any]) -> None:
    _, document = read_document(COMPARE / "FlipkartInvoice.pdf")
    wanted = expected("FlipkartInvoice")

    output = run(config, document)

    assert len(wanted) == 7
    assert {name: output[name] for name in wanted} == wanted
    assert output["template_name"] == "com.flipkart.WSRetail.json"


def test_orlen_text_all_eight_fields_with_its_lines(config: dict[str, Any]) -> None:
    _, document = read_document(COMPARE / "Orlen.txt")
    wanted = expected("Orlen")

    output = run(config, document)

    assert len(wanted) == 8
    assert {name: output[name] for name in wanted} == wanted
    assert output["sums"] == [{"net": 257.59, "rate": 23, "vat": 59.24, "gross": 316.83}]


def test_netpresse_pdf_five_of_eight_fields(config: dict[str, Any]) -> None:
    _, document = read_document(COMPARE / "NetpresseInvoice.pdf")
    wanted = expected("NetpresseInvoice")

    output = run(config, document)

    assert output["template_name"] == "fr.publicationannoncelegale.yml"
    assert reproduced(output, wanted) == {"issuer", "invoice_number", "siren", "currency", "desc"}
    # pdfplumber puts the "Total HT :" / "Total TTC :" labels above their figures: the
    # total's regex (its \s+ spans lines) takes the first figure below, 45,93, and the
    # untaxed one finds none. The date is read from a page area with poppler, which a node
    # does not do, so the whole-text regex finds both dates of the page.
    assert (wanted["amount"], output["amount"]) == (56.02, 45.93)
    assert "amount_untaxed" not in output
    assert output["date"] == ["2022-11-28", "2022-12-06"]


@pytest.mark.parametrize(
    ("stem", "missing"),
    [("AmazonWebServices", "amount, date, invoice_number"), ("oyo", "amount, invoice_number")],
)
def test_aws_and_oyo_pdfs_miss_required_fields_in_pdfplumber_text(
    config: dict[str, Any], stem: str, missing: str
) -> None:
    _, document = read_document(COMPARE / f"{stem}.pdf")

    with pytest.raises(NodeFailed) as raised:
        run(config, document)

    assert str(raised.value).startswith(f"Unable to parse required field(s): {missing} ")


def test_aws_pdftotext_text_nine_of_ten_fields(config: dict[str, Any]) -> None:
    wanted = expected("AmazonWebServices")

    output = run(config, golden_text("AmazonWebServices"))

    assert output["template_name"] == "com/com.amazon.aws.yml"
    assert reproduced(output, wanted) == set(wanted) - {"lines"}
    # The line rule expects the first line of an item indented by four spaces (poppler's
    # -layout output); the stored text has none, so no item is found.
    assert (len(wanted["lines"]), output["lines"]) == (4, [])


def test_oyo_pdftotext_text_all_fields_once_normalised(config: dict[str, Any]) -> None:
    wanted = expected("oyo")

    output = run(config, golden_text("oyo"))

    assert len(wanted) == 14
    assert reproduced(output, wanted) == set(wanted) - {"hotel_details"}
    # invoice2data's expected file keeps a leading space the match here does not have; the
    # string normalisation that scoring applies makes them equal.
    assert (wanted["hotel_details"], output["hotel_details"]) == (
        " OYO 4189 Resort Nanganallur",
        "OYO 4189 Resort Nanganallur",
    )
    assert normalise_value(wanted["hotel_details"], "string") == output["hotel_details"]
