"""``first-line``: an extract node type whose output is the document's first non-empty line
(source ``title``) and its number of non-empty lines (source ``lines``).

Configuration (the node mapping besides ``id``, ``type``, ``cost``, ``schema``)::

    strip: true      # optional: strip surrounding whitespace from the title (default true)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows.nodes import Document, NodeFailed, reject_unknown_keys


class FirstLine:
    """Node type ``first-line`` (instantiated without arguments when resolved)."""

    def prepare(self, config: dict[str, Any], where: str, base_dir: Path) -> dict[str, Any]:
        reject_unknown_keys(config, ("strip",), where)
        strip = config.get("strip", True)
        if not isinstance(strip, bool):
            raise InputError(f"{where}.strip", strip, "must be true or false")
        return {"strip": strip}

    def run(
        self,
        config: dict[str, Any],
        document: Document,
        upstream: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        lines = [line for line in document.text.splitlines() if line.strip()]
        if not lines:
            raise NodeFailed("the document has no text")
        title = lines[0].strip() if config.get("strip", True) else lines[0]
        return {"title": title, "lines": len(lines)}
