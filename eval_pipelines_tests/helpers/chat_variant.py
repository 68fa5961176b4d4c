"""A ``chat`` holdout variant's configuration against a stand-in server, and the price it
declares: shared by the chat holdout tests, in process and on Dask."""

from __future__ import annotations

from typing import Any

PRICE = {"input": 0.15, "output": 0.6}  # per 1M tokens


def chat_config(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "classifier": "chat",
        "candidates": 10,
        "options": {"model": "m-small", "baseUrl": base_url, "maxTokens": 64, **extra},
        "prices": {"m-small": PRICE},
    }
