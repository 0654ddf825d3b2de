"""docs/guard.md's agent loops run as written, against the real ``openai`` and ``anthropic``
SDKs, sync and async, and their tools run exactly once per finished call.

Each SDK client is pointed at an in-process HTTP transport (``httpx.MockTransport``) that
answers every request with an SSE body rendered by callsafe's providers: the first answer
asks for tool calls (arguments cut into fragments), the next one, which must carry the
tool results, ends with text. The SDK itself parses the SSE and builds its own stream
objects, which are what the guard reads. The same loops then run against the loopback
provider (``callsafe.loopback``: real HTTP on 127.0.0.1, the bytes cut inside ``data:``
fields and UTF-8 characters, keep-alive comments).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import skips

from callsafe.guard import Guard, ToolCall
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    Event,
    Fragment,
    ResponseTerminal,
    TextFragment,
)
from callsafe.providers.sse import encode_payloads
from callsafe.providers.streams import render_payloads

openai = pytest.importorskip("openai", reason=skips.missing("openai"))
anthropic = pytest.importorskip("anthropic", reason=skips.missing("anthropic"))
httpx = pytest.importorskip("httpx", reason=skips.missing("httpx"))
httpx2 = pytest.importorskip(
    "httpx2", reason=skips.missing("httpx2", "pip install -e '.[sdks]' (the anthropic SDK speaks HTTP with it)")
)  # what the anthropic SDK speaks HTTP with

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guard.md"
CITIES = ("Paris", "Rome")


def _example(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    text = GUIDE.read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        if block.startswith(f"# file: {name}.py\n"):
            (tmp_path / f"{name}.py").write_text(block, encoding="utf-8")
            monkeypatch.syspath_prepend(str(tmp_path))
            sys.modules.pop(name, None)
            return __import__(name)
    raise AssertionError(f"docs/guard.md has no {name}.py block")


def _calls(response: str, items: Sequence[str], ids: Sequence[str], *, cut: str = "completed") -> list[Event]:
    """Two get_weather calls, each argument text in three fragments."""
    events: list[Event] = []
    for item, call, city in zip(items, ids, CITIES, strict=True):
        text = json.dumps({"city": city})
        parts = [text[:3], text[3:9], text[9:]]
        events.append(CallOpened("t", response, item, call, "get_weather"))
        events += [Fragment("t", response, item, call, n, part) for n, part in enumerate(parts)]
    events += [CallTerminal("t", response, item, call, "", cut) for item, call in zip(items, ids, strict=True)]  # type: ignore[arg-type]
    events.append(ResponseTerminal("t", response, cut))  # type: ignore[arg-type]
    return events


class Server:
    """The model: tool calls first, text once the tool results came back."""

    def __init__(self, protocol: str, cut: str = "completed") -> None:
        self.protocol = protocol
        self.cut = cut
        self.requests: list[dict[str, Any]] = []

    def body(self, request_json: dict[str, Any]) -> bytes:
        self.requests.append(request_json)
        payloads = self.payloads(len(self.requests))
        if self.protocol == "openai-chat":
            return encode_payloads(payloads, done=True)
        return encode_payloads(payloads, lambda p: str(p["type"]))

    def payloads(self, n: int) -> list[dict[str, Any]]:
        """The payloads of the answer to request ``n`` (1: tool calls; then text)."""
        if self.protocol == "openai-chat":
            if n == 1:
                events = _calls("chatcmpl-1", ["0", "1"], ["call_p", "call_r"], cut=self.cut)
            else:
                events = [
                    TextFragment("t", f"chatcmpl-{n}", "text", "Sunny in both."),
                    ResponseTerminal("t", f"chatcmpl-{n}"),
                ]
            return render_payloads("openai-chat", events)
        if n == 1:
            events = [
                TextFragment("t", "msg_1", "0", "Let me look."),
                *_calls("msg_1", ["1", "2"], ["toolu_p", "toolu_r"], cut=self.cut),
            ]
        else:
            events = [TextFragment("t", f"msg_{n}", "0", "Sunny in both."), ResponseTerminal("t", f"msg_{n}")]
        payloads = render_payloads("anthropic-messages", events)
        for payload in payloads:  # what real servers always send, which the SDK's helper reads
            if payload["type"] == "message_delta":
                payload["usage"] = {"output_tokens": 1}
        return payloads

    def handle(self, request: Any) -> Any:
        body = self.body(json.loads(request.content))
        module = httpx if self.protocol == "openai-chat" else httpx2
        return module.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async def handle_async(self, request: Any) -> Any:
        return self.handle(request)


@pytest.fixture
def weather() -> Iterator[tuple[Counter[str], Callable[..., str]]]:
    runs: Counter[str] = Counter()

    def get_weather(city: str) -> str:
        runs[city] += 1
        return f"sunny in {city}"

    yield runs, get_weather


def _guard(executor: Callable[[ToolCall], object] | None, tools: Any) -> Guard:
    return Guard(tools, executor=executor, store="memory:")


def _tool_results(request: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for message in request["messages"]:
        if message["role"] == "tool":
            out.append((message["tool_call_id"], message["content"]))
        elif isinstance(message.get("content"), list):
            out += [(b["tool_use_id"], b["content"]) for b in message["content"] if b.get("type") == "tool_result"]
    return out


def test_openai_agent_loop_sync_runs_each_tool_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weather: Any
) -> None:
    example = _example("guard_openai_agent", tmp_path, monkeypatch)
    runs, get_weather = weather
    server = Server("openai-chat")
    client = openai.OpenAI(
        api_key="x",
        base_url="http://model.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(server.handle)),
    )
    guard = _guard(lambda call: get_weather(**call.arguments), example.TOOLS)
    answer = example.run_agent(client, guard, "Weather?", turn_id="t1", user="alice", tenant="acme")
    assert answer == "Sunny in both."
    assert runs == Counter({"Paris": 1, "Rome": 1})
    assert _tool_results(server.requests[1]) == [("call_p", "sunny in Paris"), ("call_r", "sunny in Rome")]
    assert [r.decision for r in guard.ledger()] == ["dispatched", "dispatched"]
    assert guard.status("t1") == "done"


def test_openai_agent_loop_async_yield_mode_runs_each_tool_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weather: Any
) -> None:
    example = _example("guard_openai_agent", tmp_path, monkeypatch)
    runs, get_weather = weather
    example.TOOL_IMPLEMENTATIONS["get_weather"] = get_weather
    server = Server("openai-chat")
    client = openai.AsyncOpenAI(
        api_key="x",
        base_url="http://model.test/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(server.handle_async)),
    )
    guard = _guard(None, example.TOOLS)
    answer = asyncio.run(example.run_agent_async(client, guard, "Weather?", turn_id="t1", user="alice", tenant="acme"))
    assert answer == "Sunny in both."
    assert runs == Counter({"Paris": 1, "Rome": 1})
    assert _tool_results(server.requests[1]) == [("call_p", "sunny in Paris"), ("call_r", "sunny in Rome")]


def test_anthropic_agent_loop_sync_helper_stream_runs_each_tool_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weather: Any
) -> None:
    example = _example("guard_anthropic_agent", tmp_path, monkeypatch)
    runs, get_weather = weather
    server = Server("anthropic-messages")
    client = anthropic.Anthropic(
        api_key="x",
        base_url="http://model.test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(server.handle)),
    )
    guard = _guard(lambda call: get_weather(**call.arguments), example.TOOLS)
    answer = example.run_agent(client, guard, "Weather?", turn_id="t1", user="alice", tenant="acme")
    assert answer == "Sunny in both."
    assert runs == Counter({"Paris": 1, "Rome": 1})
    assert _tool_results(server.requests[1]) == [("toolu_p", "sunny in Paris"), ("toolu_r", "sunny in Rome")]


def test_anthropic_agent_loop_async_raw_stream_runs_each_tool_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weather: Any
) -> None:
    example = _example("guard_anthropic_agent", tmp_path, monkeypatch)
    runs, get_weather = weather
    server = Server("anthropic-messages")
    client = anthropic.AsyncAnthropic(
        api_key="x",
        base_url="http://model.test",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server.handle_async)),
    )
    guard = _guard(lambda call: get_weather(**call.arguments), example.TOOLS)
    answer = asyncio.run(example.run_agent_async(client, guard, "Weather?", turn_id="t1", user="alice", tenant="acme"))
    assert answer == "Sunny in both."
    assert runs == Counter({"Paris": 1, "Rome": 1})
    assert _tool_results(server.requests[1]) == [("toolu_p", "sunny in Paris"), ("toolu_r", "sunny in Rome")]


@pytest.mark.parametrize("cut", ["length", "error"])
@pytest.mark.parametrize("protocol", ["openai-chat", "anthropic-messages"])
def test_a_response_cut_off_by_the_token_limit_or_an_error_event_runs_nothing(
    protocol: str, cut: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weather: Any
) -> None:
    """The case the accumulation loops get wrong: the arguments parse, but the model was cut
    off (``finish_reason: length`` / ``stop_reason: max_tokens``), or the server sent an
    error event (which the SDK consumes and raises for). Nothing runs, the ledger says why
    (``error`` for the error event, not a dropped connection), and the user is offered a retry."""
    runs, get_weather = weather
    server = Server(protocol, cut=cut)
    if protocol == "openai-chat":
        example = _example("guard_openai_agent", tmp_path, monkeypatch)
        client: Any = openai.OpenAI(
            api_key="x",
            base_url="http://model.test/v1",
            http_client=httpx.Client(transport=httpx.MockTransport(server.handle)),
        )
    else:
        example = _example("guard_anthropic_agent", tmp_path, monkeypatch)
        client = anthropic.Anthropic(
            api_key="x",
            base_url="http://model.test",
            http_client=httpx2.Client(transport=httpx2.MockTransport(server.handle)),
        )
    guard = _guard(lambda call: get_weather(**call.arguments), example.TOOLS)
    if cut == "error":
        with pytest.raises((openai.APIError, anthropic.APIError)):
            example.run_agent(client, guard, "Weather?", turn_id="t1", user="alice", tenant="acme")
    else:
        example.run_agent(client, guard, "Weather?", turn_id="t1", user="alice", tenant="acme")
    assert runs == Counter()
    assert [(r.decision, r.terminal_reason) for r in guard.ledger()] == [("failed", cut), ("failed", cut)]
    assert guard.status("t1") == "retry"


# -- the same loops against the loopback provider: real HTTP over 127.0.0.1 -------------------


@pytest.fixture(scope="module")
def loopback() -> Iterator[Any]:
    pytest.importorskip("uvicorn", reason=skips.missing("uvicorn", "pip install -e '.[serve]'"))
    from callsafe.loopback.server import LoopbackServer

    server = LoopbackServer().start()
    yield server
    server.stop()


def _serve(loopback: Any, protocol: str) -> None:
    """The loopback provider's next two answers: the tool calls, then the text (each cut
    adversarially, with keep-alives, by the provider)."""
    model = Server(protocol)
    for n in (1, 2):
        stream = loopback.open_stream(protocol)
        for payload in model.payloads(n):
            stream.push(payload)
        stream.finish(done_sentinel=protocol == "openai-chat")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("protocol", ["openai-chat", "anthropic-messages"])
def test_the_agent_loops_against_the_loopback_provider_run_each_tool_once(
    protocol: str, mode: str, loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weather: Any
) -> None:
    runs, get_weather = weather
    name = "guard_openai_agent" if protocol == "openai-chat" else "guard_anthropic_agent"
    example = _example(name, tmp_path, monkeypatch)
    if protocol == "openai-chat":
        example.TOOL_IMPLEMENTATIONS["get_weather"] = get_weather  # the async loop runs tools itself
    if protocol == "openai-chat":
        client: Any = (openai.OpenAI if mode == "sync" else openai.AsyncOpenAI)(
            api_key="x", base_url=f"{loopback.base_url}/v1", max_retries=0
        )
    else:
        client = (anthropic.Anthropic if mode == "sync" else anthropic.AsyncAnthropic)(
            api_key="x", base_url=loopback.base_url, max_retries=0
        )
    executor = None if (protocol, mode) == ("openai-chat", "async") else (lambda call: get_weather(**call.arguments))
    guard = _guard(executor, example.TOOLS)
    _serve(loopback, protocol)
    loop = example.run_agent if mode == "sync" else example.run_agent_async
    answer = loop(client, guard, "Weather?", turn_id="t1", user="alice", tenant="acme")
    if mode == "async":
        answer = asyncio.run(answer)
    assert answer == "Sunny in both."
    assert runs == Counter({"Paris": 1, "Rome": 1})
    assert [r.decision for r in guard.ledger()] == ["dispatched", "dispatched"]
