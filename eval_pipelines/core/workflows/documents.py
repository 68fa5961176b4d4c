"""Reading input documents: a PDF's text layer, or a UTF-8 text file.

A document is identified by the content hash of its bytes, so the same file under another
name (or path) is the same document. A PDF is recognised by its magic bytes, not its suffix.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pdfplumber

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import read_bytes
from eval_pipelines.core.workflows.nodes import Document

PDF_MAGIC = b"%PDF"
DOCUMENT_ID_LENGTH = 16

# The layout settings of invoice2data's own pdfplumber backend
# (invoice2data/input/pdfplumber.py): they emulate ``pdftotext -layout``, which the bundled
# templates were written against, so templates see the text they expect.
_LAPARAMS = {"detect_vertical": True}
_EXTRACT_TEXT = {
    "layout": True,
    "use_text_flow": True,
    "x_tolerance": 6,
    "y_tolerance": 4,
    "keep_blank_chars": True,
}


def document_id(data: bytes) -> str:
    """The first 16 hex digits of the SHA-256 of the document's bytes."""
    # core.hashing hashes JSON values and strings; a document is identified by its raw bytes.
    return hashlib.sha256(data).hexdigest()[:DOCUMENT_ID_LENGTH]


def read_document(path: Path | str, *, what: str = "document") -> tuple[bytes, Document]:
    """Read a PDF (its text layer) or a UTF-8 text file.

    Parameters
    ----------
    path
        The file. A PDF is recognised by its ``%PDF`` magic bytes; anything else must be
        UTF-8 text (a byte-order mark is dropped and line ends become ``\\n``, as
        invoice2data's own text reader does).
    what
        The field named by an :class:`InputError`.

    Returns
    -------
    tuple[bytes, Document]
        The file's bytes and the document (``media_type`` ``pdf`` or ``text``).

    Raises
    ------
    InputError
        Missing file, a directory, an unreadable PDF, a PDF without a text layer, or a
        non-PDF that is not UTF-8.
    """
    file = Path(path)
    data = read_bytes(file, what)
    if data.startswith(PDF_MAGIC):
        return data, Document(document_id(data), file.name, "pdf", pdf_text(data, file, what), file)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            what,
            str(file),
            f"is neither a PDF nor UTF-8 text (byte {error.start} cannot be decoded)",
        ) from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return data, Document(document_id(data), file.name, "text", text, file)


def pdf_text(data: bytes, file: Path, what: str = "document") -> str:
    """The text layer of a PDF, page after page, as invoice2data's pdfplumber backend
    extracts it."""
    try:
        with pdfplumber.open(io.BytesIO(data), laparams=_LAPARAMS) as pdf:
            if not pdf.pages:
                raise InputError(what, str(file), "is a PDF without pages")
            text = "".join(page.extract_text(**_EXTRACT_TEXT) or "" for page in pdf.pages)
    except InputError:
        raise
    except Exception as error:  # pdfminer raises many unrelated types for damaged files
        raise InputError(
            what, str(file), f"is not a readable PDF ({type(error).__name__}: {error})"
        ) from None
    if not text.strip():
        raise InputError(what, str(file), "has no text layer; OCR is not supported")
    return text


def document_from_text(name: str, text: str) -> Document:
    """A text document held in memory (e.g. pre-extracted text); its id is the hash of the
    UTF-8 bytes, so it equals the id of a file with exactly that content."""
    return Document(document_id(text.encode("utf-8")), name, "text", text)
