"""The CLI starts without importing the statistics: scipy.stats alone took 0.5 s of every
command's start-up (``eval-pipelines --help`` went from 0.75 s to 0.24 s without it). A run
loads the definitions, which import every stage: neither scipy.stats nor scipy.optimize comes
with them (0.2-0.4 s each of every evaluation's fixed cost), nor the openai SDK (about a second
of CPU, paid by every evaluation since the chat classifier came, chat variant or not)."""

import ast
import subprocess
import sys


def _imported_by(module: str, candidates: tuple[str, ...]) -> list[str]:
    """Which of ``candidates`` a fresh interpreter has loaded after importing ``module``."""
    code = f"import sys, {module}\nprint(sorted(m for m in {candidates!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return ast.literal_eval(out.stdout)


def test_importing_the_cli_imports_no_statistics() -> None:
    assert (
        _imported_by("eval_pipelines.cli.main", ("scipy.stats", "eval_pipelines.core.stats")) == []
    )


def test_loading_the_definitions_imports_neither_scipy_stats_nor_optimize() -> None:
    assert _imported_by("eval_pipelines.definitions", ("scipy.stats", "scipy.optimize")) == []


def test_neither_the_definitions_nor_the_api_import_the_openai_sdk() -> None:
    modules = "eval_pipelines.definitions, eval_pipelines.api"
    assert _imported_by(modules, ("openai", "httpx2")) == []


def test_the_api_imports_a_feature_when_it_is_first_used() -> None:
    """Every command imports the API: ``memo list`` loaded the golden sets' PDF reader, the
    statistics and the lift modules with it."""
    features = ("eval_pipelines.api.golden", "eval_pipelines.api.lift", "dagster")
    assert _imported_by("eval_pipelines.api", features) == []
    unused_by_memo = ("pdfplumber", "scipy.stats", "eval_pipelines.api.lift")
    assert _imported_by("eval_pipelines.api.memo", unused_by_memo) == []


def test_the_word_for_too_few_observations_is_the_same_everywhere() -> None:
    from eval_pipelines.core.stats import INSUFFICIENT as from_stats
    from eval_pipelines.core.verdicts import INSUFFICIENT

    assert from_stats is INSUFFICIENT == "insufficient_evidence"
