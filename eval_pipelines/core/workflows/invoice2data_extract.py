"""What an ``invoice2data`` step runs, in a worker process (see
:mod:`eval_pipelines.core.workflows.step_worker`): match the templates against the text and
extract. Kept to invoice2data and the standard library, so a worker starts quickly.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from invoice2data.api import _by_priority, _match_template
from invoice2data.exceptions import RequiredFieldsMissingError
from invoice2data.extract.invoice_template import InvoiceTemplate
from invoice2data.extract.loader import prepare_template
from invoice2data.input import text as text_input

from eval_pipelines.core.workflows.nodes import NodeFailed

# invoice2data logs a warning for every regex that does not match and an error for every
# missing required field; the node reports failures through NodeFailed instead. Quieten it
# once (unless the application configured its level), not per run: saving and restoring a
# logger's level from concurrent runs would race.
_LOGGER = logging.getLogger("invoice2data")
if _LOGGER.level == logging.NOTSET:
    _LOGGER.setLevel(logging.CRITICAL)


def extract(templates: list[dict[str, Any]], text: str, file_name: str) -> dict[str, Any]:
    """The raw output of the first matching template, the way ``invoice2data.extract_data``
    picks it (highest ``priority`` first, first whose keywords all occur); raises
    :class:`NodeFailed` when none matches or extraction fails."""
    built = _by_priority([build_template(template) for template in templates])
    template = _match_template(text, built)
    if template is None:
        tried = ", ".join(t["template_name"] for t in built)
        raise NodeFailed(f"no template matched: tried {tried}")
    # As invoice2data's _run_template: the template's replacements, then extraction. The
    # file argument only serves area re-extraction and the camelot plugin; the text reader
    # supports neither, so the text we have is all that is used.
    try:
        optimized = template.prepare_input(text)
        output: dict[str, Any] = template.extract(optimized, file_name, text_input)
    except RequiredFieldsMissingError as error:
        raise NodeFailed(str(error)) from None
    except Exception as error:  # a template error surfaces on one document, not the run
        raise NodeFailed(
            f"template {template['template_name']} failed: {type(error).__name__}: {error}"
        ) from None
    return output


def build_template(template: dict[str, Any]) -> InvoiceTemplate:
    # invoice2data mutates templates while preparing and parsing them: work on a copy.
    prepared = prepare_template(copy.deepcopy(template))
    assert prepared is not None  # keywords were checked when the workflow was saved
    return InvoiceTemplate(prepared)
