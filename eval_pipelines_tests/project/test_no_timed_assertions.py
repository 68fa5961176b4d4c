"""No test asserts on a duration measured with the wall clock (issue 19, item 26): such a test
goes red on a busy machine. Timings belong in ``benchmarks/`` (``benchmarks/suite_timings.py``
prints the ones moved out of here); a test checks something deterministic instead (a count of
work, an order of events, which engine runs).

A deadline that only ends a wait for something that never happens (``while time.monotonic() <
deadline``) is a guard against a hang, not a timed assertion, and is allowed."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "time",
    "time_ns",
    "process_time",
}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in CLOCKS and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in {"perf_counter", "monotonic"}


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(
        _is_clock_call(child) or (isinstance(child, ast.Name) and child.id in names)
        for child in ast.walk(node)
    )


def _durations(node: ast.AST, clock_names: set[str]) -> bool:
    """Whether ``node`` holds a difference of clock readings (a measured duration)."""
    return any(
        isinstance(child, ast.BinOp)
        and isinstance(child.op, ast.Sub)
        and (_mentions(child.left, clock_names) or _mentions(child.right, clock_names))
        for child in ast.walk(node)
    )


def _assigned(tree: ast.AST) -> list[tuple[set[str], ast.AST]]:
    """``(names, value)`` of every assignment in ``tree``."""
    pairs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs.append(({t.id for t in node.targets if isinstance(t, ast.Name)}, node.value))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name):
                pairs.append(({node.target.id}, node.value))
    return pairs


def timed_assertions(source: str) -> list[int]:
    """Line numbers of ``assert`` statements on a duration measured with a clock."""
    tree = ast.parse(source)
    assigned = _assigned(tree)
    # Assigned a clock reading (start = time.perf_counter()), then a duration
    # (elapsed = time.perf_counter() - start).
    clock_names = {name for names, value in assigned if _mentions(value, set()) for name in names}
    duration_names = {
        name for names, value in assigned if _durations(value, clock_names) for name in names
    }
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert)
        and (_durations(node.test, clock_names) or _mentions_name(node.test, duration_names))
    ]


def _mentions_name(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(child, ast.Name) and child.id in names for child in ast.walk(node))


def test_the_rule_finds_the_shapes_of_a_timed_assertion() -> None:
    found = timed_assertions(
        "import time\n"
        "def a():\n"
        "    start = time.perf_counter()\n"
        "    assert time.perf_counter() - start < 0.5\n"
        "def b():\n"
        "    start = time.monotonic()\n"
        "    elapsed = time.monotonic() - start\n"
        "    assert elapsed < 1.0\n"
        "def guard():\n"
        "    deadline = time.monotonic() + 120\n"
        "    while time.monotonic() < deadline:\n"
        "        pass\n"
        "    assert time.monotonic() < deadline, 'timed out'\n"
    )
    assert found == [4, 8]


def test_no_test_asserts_on_a_wall_time() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in timed_assertions(path.read_text())
    ]
    assert offenders == [], "timed assertions (move the timing to benchmarks/): " + ", ".join(
        offenders
    )
