"""``callsafe serve``: a trace file served as a provider's stream on loopback.

Why a module of its own: what a trace file needs before it can be said on a provider's wire
(its items renamed into the protocol's form, as certification does, and a plain account of
the protocols that can carry it when the chosen one cannot) is this command's business
only, and the command line's main module stays small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import click

__all__ = ["BINARY", "PROTOCOLS", "SAMPLE", "WEBSOCKET", "servable_protocols", "serve_cmd", "static_trace"]

PROTOCOLS: Final = ("openai-chat", "openai-responses", "anthropic-messages", "gemini")
# A trace that serves in every protocol: one call of get_weather, streamed in three
# fragments, closed, and the response ended (docs/serve.md).
# Bedrock's ConverseStream is served in AWS's binary event-stream framing, not SSE
# (callsafe.providers.eventstream): boto3's bedrock-runtime client with endpoint_url reads it.
BINARY: Final = ("bedrock-converse",)
# The OpenAI Realtime API is a WebSocket session (callsafe.loopback.realtime): the openai SDK's
# client.realtime.connect(model=M) with base_url=http://127.0.0.1:PORT/v1 opens ws://.../v1/realtime.
# Gemini Live is a BidiGenerateContent WebSocket session (callsafe.loopback.gemini_live): google-genai's
# client.aio.live.connect speaks only wss, so it is served on the loopback's TLS listener too.
WEBSOCKET: Final = ("openai-realtime", "gemini-live")
SAMPLE: Final = Path(__file__).resolve().parent.parent / "docs" / "samples" / "serve-trace.json"


def static_trace(trace: Any, protocol: str, event_ids: bool = False) -> Any:
    """The loopback's :class:`StaticTrace` for ``trace`` in ``protocol``: the trace's items
    first renamed into the form the protocol addresses them by (an index for Chat
    Completions, as certification renames them: :func:`callsafe.certify.wire.relabel`), so
    that a scenario exported from the catalog serves as it is. Raises ``ValueError`` (a
    ``NotRepresentable``) when the protocol cannot carry the trace."""
    from callsafe.certify.wire import relabel
    from callsafe.loopback.server import StaticTrace

    return StaticTrace(protocol, relabel(trace, protocol).events, event_ids)


def servable_protocols(trace: Any) -> list[str]:
    """The protocols that can carry ``trace``."""
    out = []
    for protocol in (*PROTOCOLS, *WEBSOCKET):
        try:
            static_trace(trace, protocol)
        except (ValueError, KeyError):
            continue
        out.append(protocol)
    return out


@click.command("serve")
@click.argument("trace_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--protocol",
    type=click.Choice((*PROTOCOLS, *BINARY, *WEBSOCKET)),
    default="openai-chat",
    show_default=True,
    help="The protocol every request is answered in (the request's path must match).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port on 127.0.0.1 (0: any free port).",
)
@click.option("--event-ids", is_flag=True, help="Number the events (id:), so a reconnect with Last-Event-ID resumes.")
@click.option(
    "--max-body",
    type=click.IntRange(min=1),
    default=1 << 20,
    show_default=True,
    metavar="BYTES",
    help="The largest request body read; a larger one gets 413 and is never read whole.",
)
def serve_cmd(trace_file: Path, protocol: str, port: int, event_ids: bool, max_body: int) -> None:
    """Serve TRACE_FILE as a provider's stream on 127.0.0.1 (the loopback provider).

    TRACE_FILE is a trace in callsafe's format: docs/samples/serve-trace.json (one call,
    every protocol), `callsafe scenarios export NAME --out FILE` (it says which protocols
    can carry the scenario), a counterexample of a report. Its items are renamed into the
    protocol's form (Chat Completions addresses calls by index), as certification does.

    Point a program's SDK at it: OPENAI_BASE_URL=http://127.0.0.1:PORT/v1,
    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT or GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT
    (Gemini: .../v1beta/models/M:streamGenerateContent?alt=sse); Bedrock: boto3's bedrock-runtime client
    with endpoint_url=http://127.0.0.1:PORT (POST .../model/M/converse-stream, answered in AWS's binary
    event-stream framing, frames split inside the prelude and the payload); OpenAI Realtime
    (--protocol openai-realtime): the openai SDK's client.realtime.connect(model=M) with
    base_url=http://127.0.0.1:PORT/v1, a WebSocket at /v1/realtime whose first response.create gets
    the trace as server events (a response ending in error arrives as the user's barge-in); Gemini Live
    (--protocol gemini-live): google-genai's client.aio.live.connect(model=M) with
    http_options base_url=https://127.0.0.1:TLSPORT and SSL_CERT_FILE=the printed certificate (the SDK
    speaks only wss, so the loopback also listens with TLS on a second port), whose first clientContent
    gets the trace as serverContent and toolCall messages (a turn ending in error arrives as interrupted).
    Every request gets the trace
    rendered for PROTOCOL as real SSE (adversarial chunk boundaries, keep-alives); where the trace
    disconnects the connection drops, and the next request (the reconnect) gets the
    trace's next connection (its replay, then the rest). OpenAI Responses: GET
    .../responses/ID?stream=true&starting_after=N resumes after sequence number N; with
    --event-ids a reconnect with Last-Event-ID gets the rest. A request body over --max-body
    bytes is answered 413 without reading the rest."""
    try:
        from callsafe.loopback.server import LoopbackServer
    except ImportError:
        raise click.ClickException("callsafe serve needs uvicorn: pip install 'callsafe[serve]'") from None
    from callsafe.model.vocabulary import Trace, TraceFormatError

    if event_ids and protocol in BINARY:
        raise click.BadParameter("Bedrock's event-stream frames carry no event ids", param_hint="--event-ids")
    if event_ids and protocol in WEBSOCKET:
        raise click.BadParameter(
            "a realtime WebSocket session does not resume; a reconnect is a new session", param_hint="--event-ids"
        )
    try:
        trace = Trace.loads(trace_file.read_bytes())
    except (TraceFormatError, OSError) as exc:
        raise click.BadParameter(f"not a callsafe trace: {exc}", param_hint="TRACE_FILE") from None
    try:
        static = static_trace(trace, protocol, event_ids)
    except (ValueError, KeyError) as exc:
        others = [p for p in servable_protocols(trace) if p != protocol]
        hint = (
            f"it serves as {', '.join(f'--protocol {p}' for p in others)}"
            if others
            else f"no protocol can carry it; {SAMPLE.name} in docs/samples serves in every one"
        )
        raise click.BadParameter(
            f"{protocol} cannot carry this trace ({exc}); {hint}", param_hint="--protocol"
        ) from None
    try:
        server = LoopbackServer(port=port, static=static, max_body=max_body).start()
    except OSError as exc:
        raise click.BadParameter(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", param_hint="--port"
        ) from None
    if protocol == "gemini-live":
        where = f"{server.tls_base_url()} (trust SSL_CERT_FILE={server.certificate().certfile})"
    elif protocol in WEBSOCKET:
        where = server.base_url.replace("http://", "ws://") + "/v1/realtime"
    else:
        where = server.base_url
    click.echo(f"serving {trace_file.name} as {protocol} at {where} (Ctrl-C stops)")
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.stop()
