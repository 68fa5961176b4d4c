"""Reading documents: a real PDF's text layer (pdfplumber) or UTF-8 text, and every refusal."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.documents import document_from_text, read_document


def make_pdf(lines: list[str]) -> bytes:
    """A minimal valid PDF: one Letter page, one Helvetica text object with ``lines``.

    No PDF writer is installed (pdfplumber only reads), so the file is written by hand:
    five objects, then the cross-reference table with each object's byte offset.
    """

    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    operators = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
    operators += [f"({escape(line)}) Tj T*" for line in lines] + ["ET"]
    stream = "\n".join(operators).encode("latin-1") if lines else b""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    pdf = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(pdf)
    pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    pdf += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    pdf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(pdf)


def test_a_pdf_is_read_through_its_text_layer(tmp_path: Path) -> None:
    data = make_pdf(["ACME Supplies Ltd", "Invoice number: INV-7", "Total: 1,019.00 (EUR)"])
    path = tmp_path / "scan.bin"  # recognised by its magic bytes, not its suffix
    path.write_bytes(data)

    content, document = read_document(path)

    assert content == data
    assert document.media_type == "pdf"
    assert document.name == "scan.bin"
    assert document.path == path
    assert document.document_id == hashlib.sha256(data).hexdigest()[:16]
    # layout=True pads the page with blank lines and indents text by its x position.
    assert [line.strip() for line in document.text.splitlines() if line.strip()] == [
        "ACME Supplies Ltd",
        "Invoice number: INV-7",
        "Total: 1,019.00 (EUR)",
    ]


def test_a_text_file_is_utf8_with_newlines_normalised(tmp_path: Path) -> None:
    path = tmp_path / "invoice.txt"
    path.write_bytes("\ufeffFaktura nr: F/1\r\nNależność: 12,00\r\n".encode())

    content, document = read_document(path)

    assert document.media_type == "text"
    assert document.text == "Faktura nr: F/1\nNależność: 12,00\n"
    assert document.document_id == hashlib.sha256(content).hexdigest()[:16]


def test_the_same_bytes_are_the_same_document(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Total: 5\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("Total: 5\n", encoding="utf-8")

    _, first = read_document(tmp_path / "a.txt")
    _, second = read_document(tmp_path / "b.txt")

    assert first.document_id == second.document_id
    assert document_from_text("pasted", "Total: 5\n").document_id == first.document_id
    assert document_from_text("pasted", "Total: 5\n").path is None


@pytest.mark.parametrize(
    ("content", "rule"),
    [
        (make_pdf([]), "has no text layer; OCR is not supported"),
        (b"%PDF-1.4\nnot really a pdf", "is not a readable PDF"),
        (make_pdf(["cut short"])[:120], "is not a readable PDF"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff", "is neither a PDF nor UTF-8 text (byte 0 cannot"),
    ],
    ids=["pdf-without-text", "garbage-pdf", "truncated-pdf", "binary"],
)
def test_unreadable_documents_are_refused(tmp_path: Path, content: bytes, rule: str) -> None:
    path = tmp_path / "document"
    path.write_bytes(content)

    with pytest.raises(InputError) as raised:
        read_document(path, what="documents[3]")

    assert raised.value.field == "documents[3]"
    assert raised.value.value == str(path)
    assert raised.value.rule.startswith(rule)


def test_a_missing_file_or_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file does not exist"):
        read_document(tmp_path / "nope.pdf")
    with pytest.raises(InputError, match="is a directory; give a file"):
        read_document(tmp_path)
