"""The chat cache in a real DuckDB file."""

from __future__ import annotations

from pathlib import Path

from eval_pipelines.storage.chat_cache import CachedCall, cached_calls, count_calls, store_calls
from eval_pipelines.storage.warehouse import connect


def test_calls_are_stored_once_and_found_by_key(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    first = CachedCall("k1", "http://h/v1", "m", 1, '{"code": "A"}', 10, 3)
    with connect(path, create=True) as conn:
        assert cached_calls(conn, ["k1"]) == {}
        store_calls(conn, [first, CachedCall("k2", "http://h/v1", "m", 2, None, 5, 0)])
        # the same key again keeps the first answer
        store_calls(conn, [CachedCall("k1", "http://h/v1", "m", 1, "other", 1, 1)])
    with connect(path, read_only=True) as conn:
        found = cached_calls(conn, ["k1", "k3", "k2"])
        assert found["k1"] == first and set(found) == {"k1", "k2"}
        assert found["k2"].response_text is None
        assert count_calls(conn) == 2
        assert cached_calls(conn, []) == {}
