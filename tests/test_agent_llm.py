"""LLM backends: scripted fake chat model through create_agent, guarded mode, model factory, wire test."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage

from advisor_chat.agent import Advisor, AnswerEvent, TextEvent, ToolCallEvent, ToolResultEvent
from advisor_chat.agent.llm import (
    CHAT_MODEL_FACTORIES,
    GUARDED_PREFIXES,
    MAX_TOKENS,
    SYSTEM_PROMPT,
    ModelEndpointError,
    make_chat_model,
    register_chat_model,
    use_guarded,
)
from advisor_chat.agent.testing import (
    SLOW_RANK,
    fake_case_search,
    scripted,
    tiny_diagnosis,
    tiny_profile,
    tiny_registry,
    tool_call,
)
from advisor_chat.config import Settings
from advisor_chat.errors import ConfigError

FINAL = (
    "Rank 3 is slow: `explain_rank.host_bound.r3` shows 4.20 ms more Free per step than the "
    "median (5.00 ms vs 0.80 ms, from step_trace_time.csv). See case `host-dispatch-bound`."
)


def _advisor(model: Any, profile=None, **settings: Any) -> Advisor:
    return Advisor(
        profile or tiny_profile(),
        settings=Settings(**settings),
        registry=tiny_registry(),
        case_search=fake_case_search,
        chat_model=model,
        diagnose=tiny_diagnosis,
    )


def test_scripted_model_tool_sequence_citations_and_grounding() -> None:
    model = scripted(
        [
            tool_call(
                "explain_rank", {"rank": 16}, "c1"
            ),  # bad: the model must get the valid ranks
            tool_call("explain_rank", {"rank": SLOW_RANK}, "c2"),
            tool_call(
                "search_cases", {"query": "rank 3 Free high", "symptom_tags": ["host_bound"]}, "c3"
            ),
            AIMessage(content=FINAL),
        ]
    )
    adv = _advisor(model)
    events = list(adv.stream("why is rank 3 slow?"))
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "ToolCallEvent",  # diagnose: always the first tool result
        "ToolResultEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "TextEvent",
        "AnswerEvent",
    ]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert results[0].name == "diagnose" and "cause.host_stall.r3" in results[0].summary
    assert results[1].summary == "error: rank 16 does not exist; ranks are 0-3"
    ans = events[-1].answer
    assert [(c.name, c.args) for c in ans.tool_calls] == [
        ("diagnose", {}),
        ("explain_rank", {"rank": 16}),
        ("explain_rank", {"rank": 3}),
        ("search_cases", {"query": "rank 3 Free high", "symptom_tags": ["host_bound"]}),
    ]
    assert ans.tool_calls[1].error is not None
    assert [f.id for f in ans.findings] == ["explain_rank.host_bound.r3"]
    assert ans.findings[0].sources == ["/data/prof/rank_3_ascend_pt/step_trace_time.csv"]
    assert [c.id for c in ans.cases] == ["host-dispatch-bound"]
    assert ans.answer == FINAL
    assert ans.grounding.numbers_total == 4 and ans.grounding.ungrounded == []
    assert ans.mode == "tools" and ans.backend == "custom:ScriptedChatModel"
    # the model saw the system prompt and the fenced tool result
    first = model.seen[0]
    assert isinstance(first[0], SystemMessage) and "untrusted data" in first[0].content
    tool_msgs = [m for m in model.seen[-1] if isinstance(m, ToolMessage)]
    assert "<<<DATA diagnose" in tool_msgs[0].content  # the model's first tool result
    assert next(m for m in model.seen[0] if isinstance(m, ToolMessage)).name == "diagnose"
    assert "<<<DATA explain_rank(rank=3)" in tool_msgs[2].content
    # the suggestions are the diagnosis' typed remedies, actions first
    assert [(x.kind, x.cause_id) for x in ans.suggestions][:1] == [
        ("action", "cause.host_stall.r3")
    ]


def test_invented_number_is_flagged() -> None:
    model = scripted(
        [
            tool_call("explain_rank", {"rank": SLOW_RANK}, "c1"),
            AIMessage(
                content="Rank 3 loses 7.77 ms per step to Free, 4.20 ms more than the median."
            ),
        ]
    )
    ans = _advisor(model).ask("why is rank 3 slow?")
    assert ans.grounding.ungrounded == ["7.77 ms"]
    assert (ans.grounding.numbers_total, ans.grounding.numbers_grounded) == (3, 2)


def test_history_is_kept_across_turns_and_reset_clears_it() -> None:
    model = scripted(
        [
            tool_call("explain_rank", {"rank": SLOW_RANK}, "c1"),
            AIMessage(content="Rank 3 has 4.20 ms more Free."),
            tool_call("explain_rank", {"rank": 1}, "c2"),
            AIMessage(content="Rank 1 is fine."),
            AIMessage(content="Hello."),
        ]
    )
    adv = _advisor(model)
    adv.ask("why is rank 3 slow?")
    second = adv.ask("and rank 1?")
    # only this turn's calls (the diagnosis first)
    assert [(c.name, c.args) for c in second.tool_calls] == [
        ("diagnose", {}),
        ("explain_rank", {"rank": 1}),
    ]
    contents = [getattr(m, "content", "") for m in model.seen[2]]
    assert "why is rank 3 slow?" in contents and "and rank 1?" in contents
    adv.reset()
    adv.ask("hi")
    contents = [getattr(m, "content", "") for m in model.seen[-1]]
    assert "why is rank 3 slow?" not in contents


def test_guarded_mode_accepts_grounded_prose() -> None:
    prose = "Rank 3 idles 4.20 ms more per step than the median; see `host-dispatch-bound`."
    adv = _advisor(scripted([AIMessage(content=prose)]), guarded=True)
    ans = adv.ask("why is rank 3 slow?")
    assert ans.mode == "guarded" and ans.answer == prose
    assert ans.grounding.ungrounded == []
    # the facts came from the planner: the same diagnosis projection as offline
    assert [c.name for c in ans.tool_calls] == ["diagnose", "search_cases"]
    assert [c.id for c in ans.cases] == ["host-dispatch-bound"]


def test_guarded_mode_falls_back_to_the_template_on_invented_numbers() -> None:
    offline = _advisor(None).ask("why is rank 3 slow?")
    adv = _advisor(scripted([AIMessage(content="Rank 3 wastes 12.5 ms per step.")]), guarded=True)
    ans = adv.ask("why is rank 3 slow?")
    assert ans.mode == "guarded-fallback"
    assert ans.answer == offline.answer
    assert ans.grounding.ungrounded == []


def test_model_factory() -> None:
    assert make_chat_model(Settings(model="offline")) is None
    with pytest.raises(ConfigError, match="needs a model name"):
        make_chat_model(Settings(model="openai:"))
    with pytest.raises(ConfigError, match="unknown model 'llama3'"):
        make_chat_model(Settings(model="llama3"))
    with pytest.raises(ConfigError, match="local-model extra"):
        make_chat_model(Settings(model="gguf:/models/x.gguf"))
    with pytest.raises(ConfigError, match="ADVISOR_TEST_NO_SUCH_KEY"):
        make_chat_model(
            Settings(model="openai:gpt-4o-mini", api_key_env="ADVISOR_TEST_NO_SUCH_KEY")
        )
    m = make_chat_model(
        Settings(
            model="qwen2.5-7b",
            base_url="http://127.0.0.1:9/v1",
            api_key_env="ADVISOR_TEST_NO_SUCH_KEY",
        )
    )
    assert m.model_name == "qwen2.5-7b"
    assert m.extra_body == {"max_tokens": MAX_TOKENS}
    assert m.openai_api_key.get_secret_value() == "sk-local-dummy"
    assert m.max_retries == 1


def test_register_chat_model_extension_point() -> None:
    sentinel = object()
    register_chat_model("toy", lambda s: sentinel, guarded=True)
    try:
        assert make_chat_model(Settings(model="toy:abc")) is sentinel
        assert use_guarded(Settings(model="toy:abc"))
        assert not use_guarded(Settings(model="toy:abc", guarded=False))
    finally:
        CHAT_MODEL_FACTORIES.pop("toy")
        GUARDED_PREFIXES.discard("toy")


def test_system_prompt_requires_tools_citations_and_fenced_data() -> None:
    for phrase in (
        "diagnose",
        "narrate",
        "never call a victim",
        "cite",
        "untrusted data",
        "not enough signal",
    ):
        assert phrase.lower() in SYSTEM_PROMPT.lower()


# -- wire test: ChatOpenAI against a stdlib OpenAI-compatible server on 127.0.0.1 ----------------
class _FakeOpenAI(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        msgs = body["messages"]
        called = [tc["function"]["name"] for m in msgs for tc in (m.get("tool_calls") or [])]
        if body.get("tools") and "explain_rank" not in called:  # after the diagnosis
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "explain_rank", "arguments": json.dumps({"rank": 3})},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": FINAL}
            finish = "stop"
        out = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fake_server() -> Iterator[str]:
    _FakeOpenAI.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_chat_openai_over_the_wire(fake_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ADVISOR_TEST_KEY", raising=False)
    adv = Advisor(
        tiny_profile(),
        settings=Settings(model="fake-model", base_url=fake_server, api_key_env="ADVISOR_TEST_KEY"),
        registry=tiny_registry(),
        case_search=fake_case_search,
        diagnose=tiny_diagnosis,
    )
    events = list(adv.stream("why is rank 3 slow?"))
    assert isinstance(events[0], ToolCallEvent) and events[0].name == "diagnose"
    assert isinstance(events[2], ToolCallEvent) and events[2].args == {"rank": 3}
    assert (
        isinstance(events[3], ToolResultEvent) and "explain_rank.host_bound.r3" in events[3].summary
    )
    assert isinstance(events[-2], TextEvent) and isinstance(events[-1], AnswerEvent)
    ans = events[-1].answer
    assert ans.answer == FINAL
    assert [f.id for f in ans.findings] == ["explain_rank.host_bound.r3"]
    assert ans.grounding.ungrounded == [] and ans.grounding.numbers_total == 4
    assert ans.backend == f"fake-model@{fake_server}"
    reqs = _FakeOpenAI.requests
    assert len(reqs) == 2
    assert [m["role"] for m in reqs[0]["messages"]] == ["system", "user", "assistant", "tool"]
    assert [m["role"] for m in reqs[1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert {t["function"]["name"] for t in reqs[0]["tools"]} == {
        "diagnose",
        "cluster_breakdown",
        "slow_rank",
        "explain_rank",
        "search_cases",
        "show_table",
    }
    rank_schema = next(t for t in reqs[0]["tools"] if t["function"]["name"] == "explain_rank")
    assert rank_schema["function"]["parameters"]["properties"]["rank"]["maximum"] == 3
    assert reqs[0]["max_tokens"] == MAX_TOKENS and reqs[0]["model"] == "fake-model"
    assert "<<<DATA explain_rank(rank=3)" in reqs[1]["messages"][-1]["content"]


def test_unreachable_endpoint_is_a_connection_error_naming_the_local_url() -> None:
    import socket

    with socket.socket() as s:  # a free local port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    adv = Advisor(
        tiny_profile(),
        settings=Settings(model="m", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=5),
        registry=tiny_registry(),
        case_search=fake_case_search,
        diagnose=tiny_diagnosis,
    )
    with pytest.raises(ModelEndpointError) as info:
        adv.ask("why is rank 3 slow?")
    msg = str(info.value)
    assert msg.startswith(f"cannot connect to the model endpoint http://127.0.0.1:{port}/v1")
    assert "api.openai.com" not in msg and not isinstance(info.value, ConfigError)


def test_model_that_never_stops_calling_tools_gets_an_honest_answer() -> None:
    loop = [tool_call("slow_rank", {}, f"c{i}") for i in range(40)]
    ans = _advisor(scripted(loop)).ask("which rank is slow?")
    assert ans.answer.startswith("The model did not finish within the tool-call limit")
    assert ans.tool_calls[0].name == "diagnose"
    assert len(ans.tool_calls) > 1 and all(c.name == "slow_rank" for c in ans.tool_calls[1:])
