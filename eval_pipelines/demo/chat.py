"""Run CLI commands against a chat endpoint this process starts and always stops (the demos).

``python -m eval_pipelines.demo.chat [--llama PYTHON --model GGUF] [--file F ...] -- ARGS...
[--- ARGS...]``: starts the endpoint, runs each group of ``eval-pipelines`` arguments (groups
are separated by ``---``) in this process, then stops the endpoint whatever happened (an
error, a failed command, Ctrl-C). The endpoint is

- by default the stand-in (:mod:`eval_pipelines.chat_standin`, deterministic answers, no model)
  on a free port of 127.0.0.1, served from a thread of this process;
- with ``--llama``, a real model: ``PYTHON -m llama_cpp.server --model GGUF`` (llama-cpp-python's
  OpenAI-compatible server, installed in its own venv by ``make demo-llm``) as a child process,
  waited for until ``/v1/models`` answers.

Each ``--file`` (a variants JSON or a workflow YAML) is copied with every ``options.baseUrl``
of a ``chat`` classifier or node set to the running endpoint's URL (and, with ``--model-name``,
its model), and each argument naming that file is given the copy instead: the files in
``data/demo/`` hold a placeholder URL, since the port is only known once the server runs.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from eval_pipelines.core.ports import free_port

SEPARATOR = "---"
READY_TIMEOUT_S = 180.0


def split_commands(args: Sequence[str]) -> list[list[str]]:
    """The argument groups between ``---`` separators; an empty group is refused."""
    groups: list[list[str]] = [[]]
    for arg in args:
        if arg == SEPARATOR:
            groups.append([])
        else:
            groups[-1].append(arg)
    if any(not group for group in groups):
        raise SystemExit(f"demo_chat: an empty command between {SEPARATOR!r} separators")
    return groups


def point_at(document: Any, base_url: str, model: str | None) -> int:
    """Set ``options.baseUrl`` (and ``options.model``, dropping ``llmLevel``, when ``model``
    is given) of every mapping in ``document`` whose ``classifier`` or ``type`` is ``chat``,
    in place; returns how many were set."""
    count = 0
    if isinstance(document, dict):
        if document.get("classifier") == "chat" or document.get("type") == "chat":
            options = document.setdefault("options", {})
            options["baseUrl"] = base_url
            if model is not None:
                options["model"] = model
                document.pop("llmLevel", None)
            count += 1
        for value in document.values():
            count += point_at(value, base_url, model)
    elif isinstance(document, list):
        for value in document:
            count += point_at(value, base_url, model)
    return count


def rewritten(path: Path, out_dir: Path, base_url: str, model: str | None) -> Path:
    """A copy of the variants JSON or workflow YAML ``path`` in ``out_dir`` pointing at
    ``base_url``; refused when the file holds no ``chat`` classifier or node."""
    text = path.read_text(encoding="utf-8")
    is_json = path.suffix == ".json"
    document = json.loads(text) if is_json else yaml.safe_load(text)
    if point_at(document, base_url, model) == 0:
        raise SystemExit(f"demo_chat: {path} has no chat classifier or node to point at")
    out = out_dir / path.name
    out.write_text(
        json.dumps(document, indent=1) if is_json else yaml.safe_dump(document, sort_keys=False),
        encoding="utf-8",
    )
    return out


def wait_until_answering(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``GET {base_url}/models`` until it answers 200; fail when the server exits or
    does not answer within READY_TIMEOUT_S."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(
                f"demo_chat: the model server exited with {process.returncode}; "
                f"its log ({log}) ends:\n{tail(log)}"
            )
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise SystemExit(f"demo_chat: no answer from {base_url} in {READY_TIMEOUT_S:.0f} s ({log})")


def tail(log: Path, lines: int = 20) -> str:
    if not log.exists():
        return "(no log)"
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


@contextmanager
def llama_server(
    python: str, model: Path, *, port: int, log: Path, extra: Sequence[str]
) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server as a child process on 127.0.0.1:``port``;
    yields its base URL and terminates it (kill after 10 s) on the way out."""
    command = [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra,
    ]
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            # Something already listens there: its answers must not pass for the model's.
            raise SystemExit(f"demo_chat: port {port} on 127.0.0.1 is taken ({error})") from None
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        started = time.monotonic()
        wait_until_answering(base_url, process, log)
        print(
            f"demo_chat: llama.cpp server (pid {process.pid}) answering at {base_url} after "
            f"{time.monotonic() - started:.1f} s; model {model.name}; log {log}",
            flush=True,
        )
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        print(f"demo_chat: llama.cpp server (pid {process.pid}) stopped", flush=True)


@contextmanager
def standin(latency_ms: float) -> Iterator[str]:
    from eval_pipelines.chat_standin.server import serve_standin

    with serve_standin(port=0, latency_ms=latency_ms) as server:
        print(
            f"demo_chat: chat stand-in (deterministic word-overlap answers, no model) at "
            f"{server.base_url}",
            flush=True,
        )
        try:
            yield server.base_url
        finally:
            print(
                f"demo_chat: chat stand-in stopped after {server.request_count} requests",
                flush=True,
            )


def run_commands(groups: list[list[str]], files: dict[str, Path]) -> int:
    """Run each group with ``eval_pipelines.cli.main.main`` in this process, each argument
    naming a rewritten file replaced by its copy; stops at the first non-zero exit."""
    from eval_pipelines.cli.main import main as cli_main

    for group in groups:
        argv = [str(files.get(arg, arg)) for arg in group]
        print(f"demo_chat: eval-pipelines {' '.join(group)}", flush=True)
        started = time.monotonic()
        try:
            code = cli_main(argv)
        except SystemExit as stop:  # argparse and the CLI's own exits
            code = stop.code if isinstance(stop.code, int) else 1
        print(f"demo_chat: exit {code} after {time.monotonic() - started:.1f} s", flush=True)
        if code != 0:
            return code
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if "--" not in raw:
        raise SystemExit("demo_chat: give the eval-pipelines arguments after --")
    cut = raw.index("--")
    parser = argparse.ArgumentParser(
        prog="python -m eval_pipelines.demo.chat", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--file", action="append", default=[], type=Path)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="the stand-in's latency")
    parser.add_argument("--llama", help="the python of the venv holding llama-cpp-python")
    parser.add_argument("--model", type=Path, help="the GGUF file the llama.cpp server loads")
    parser.add_argument("--model-name", help="options.model to set in the chat configs")
    parser.add_argument("--port", type=int, default=0, help="the llama.cpp server's port")
    parser.add_argument("--log", type=Path, help="the llama.cpp server's log file")
    parser.add_argument(
        "--server-arg", action="append", default=[], help="one more llama_cpp.server argument"
    )
    args = parser.parse_args(raw[:cut])
    groups = split_commands(raw[cut + 1 :])
    if args.llama is not None and args.model is None:
        parser.error("--llama needs --model")
    with tempfile.TemporaryDirectory(prefix="demo_chat.") as tmp:
        if args.llama is not None:
            endpoint = llama_server(
                args.llama,
                args.model,
                port=args.port or free_port(),
                log=args.log or Path(tmp) / "llama-server.log",
                extra=args.server_arg,
            )
        else:
            endpoint = standin(args.latency_ms)
        with endpoint as base_url:
            files = {
                str(path): rewritten(path, Path(tmp), base_url, args.model_name)
                for path in args.file
            }
            return run_commands(groups, files)


if __name__ == "__main__":
    raise SystemExit(main())
