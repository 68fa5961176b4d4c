"""The demos' chat helper (``eval_pipelines.demo.chat``): the demo files are pointed at the
endpoint it starts, and the endpoint is stopped whatever the commands did."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest

from eval_pipelines.demo import chat as demo_chat
from eval_pipelines_tests.helpers.paths import DEMO


def test_the_chat_variants_are_pointed_at_the_running_endpoint(tmp_path: Path) -> None:
    copy = demo_chat.rewritten(DEMO / "variants_chat.json", tmp_path, "http://127.0.0.1:5/v1", None)
    variants = json.loads(copy.read_text())
    original = json.loads((DEMO / "variants_chat.json").read_text())
    chat = [v for v in variants if v.get("config", {}).get("classifier") == "chat"]
    assert len(chat) == 1 and chat[0]["config"]["options"]["baseUrl"] == "http://127.0.0.1:5/v1"
    # Nothing else changes: the knn-vote baseline and the chat settings besides the URL.
    chat[0]["config"]["options"]["baseUrl"] = original[1]["config"]["options"]["baseUrl"]
    assert variants == original


def test_a_model_name_replaces_the_model_and_its_level(tmp_path: Path) -> None:
    copy = demo_chat.rewritten(DEMO / "variants_chat.json", tmp_path, "http://h:1/v1", "smol")
    config = json.loads(copy.read_text())[1]["config"]
    assert config["options"]["model"] == "smol" and "llmLevel" not in config


def test_a_file_without_a_chat_classifier_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no chat classifier or node"):
        demo_chat.rewritten(DEMO / "variants.json", tmp_path, "http://h:1/v1", None)


def test_commands_are_split_on_the_separator() -> None:
    assert demo_chat.split_commands(["a", "b", "---", "c"]) == [["a", "b"], ["c"]]
    with pytest.raises(SystemExit, match="empty command"):
        demo_chat.split_commands(["a", "---"])


def test_the_standin_is_stopped_after_a_failing_command(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command that exits 2 (an unknown case) is reported as such, and the stand-in the
    helper started no longer accepts connections."""
    code = demo_chat.main(
        [
            "--file",
            str(DEMO / "variants_chat.json"),
            "--",
            "eval",
            "holdout",
            "no-such-case",
            "--variants-file",
            str(DEMO / "variants_chat.json"),
            "--wait",
        ]
    )
    out = capsys.readouterr().out
    assert code == 2
    url = next(line for line in out.splitlines() if "chat stand-in" in line).split(" at ")[1]
    port = int(url.split(":")[2].split("/")[0])
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    assert "chat stand-in stopped after 0 requests" in out


def test_the_llama_server_path_reports_a_server_that_exits(tmp_path: Path) -> None:
    """A model server that exits before answering fails the helper with its log's tail, not a
    hang (``false`` stands for a python without llama_cpp)."""
    log = tmp_path / "server.log"
    with pytest.raises(SystemExit, match="model server exited with 1"):
        with demo_chat.llama_server("false", tmp_path / "m.gguf", port=1, log=log, extra=[]):
            urllib.request.urlopen("http://127.0.0.1:1/")  # pragma: no cover


def test_the_demo_chat_variant_runs_against_the_standin_the_helper_started(
    small_case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make demo``'s chat step on the four-chapter case: the chat variant's calls reach the
    stand-in the helper started (one request per sampled record), the evaluation completes
    with no failed row, and the stand-in is stopped afterwards."""
    from eval_pipelines import api

    code = demo_chat.main(
        [
            "--file",
            str(DEMO / "variants_chat.json"),
            "--",
            "eval",
            "holdout",
            small_case,
            "--variants-file",
            str(DEMO / "variants_chat.json"),
            "--sample-size",
            "20",
            "--seed",
            "7",
            "--wait",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "chat stand-in stopped after 20 requests" in out
    (listed,) = api.list_evals(small_case)
    report = api.get_holdout_eval(small_case, listed.eval_id).report
    chat = next(v for v in report["variants"] if v["name"] == "chat-standin")
    assert chat["config"]["classifier"] == "chat" and chat["failedRows"] == 0
    assert chat["score"]["n"] == 20
    # The stand-in the helper started answered every call (none cached: its port is new).
    assert chat["usage"]["chat"]["callsMade"] == 20 and chat["usage"]["chat"]["callsFromCache"] == 0


def test_the_llama_server_path_refuses_a_port_already_taken(tmp_path: Path) -> None:
    """Another server on the port would answer in the model's place: refused before starting."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit, match=f"port {port} on 127.0.0.1 is taken"):
            with demo_chat.llama_server(
                "false", tmp_path / "m.gguf", port=port, log=tmp_path / "l", extra=[]
            ):
                pass  # pragma: no cover


def test_the_demo_llm_files_run_against_the_standin(
    small_case: str, golden_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make demo-llm``'s inputs, pointed at the stand-in instead of llama.cpp's server: the
    chat variant (``json_object_schema``) and the workflow's chat node are valid, call the
    endpoint once per record or document, and finish."""
    golden = DEMO / "golden"
    workflow = DEMO / "workflow_chat_invoices.yaml"
    variants = DEMO / "variants_llm.json"
    code = demo_chat.main(
        ["--file", str(variants), "--file", str(workflow), "--model-name", "standin-x", "--"]
        + ["eval", "holdout", small_case, "--variants-file", str(variants)]
        + ["--sample-size", "10", "--seed", "7", "--wait", "---"]
        + ["workflow", "save", "invoices_chat", "--file", str(workflow), "---"]
        + ["golden", "create", "invoices-chat", "--workflow", "invoices_chat", "---"]
        + ["golden", "add-case", "invoices-chat", "--document", str(golden / "hlp-1001.txt")]
        + ["--labels", str(golden / "hlp-1001.labels.json"), "---"]
        + ["golden", "run", "invoices-chat"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "chat stand-in stopped after 11 requests" in out
    assert "model calls: 1 made, 0 from cache, 0 failed" in out
