"""The loopback provider: an HTTP server on 127.0.0.1 that answers the OpenAI Chat
Completions, OpenAI Responses, Anthropic Messages and Gemini
(``streamGenerateContent?alt=sse``) streaming endpoints with a trace rendered for that
protocol (by :mod:`callsafe.providers`), as real SSE.

Role: the provider side of wire mode over HTTP. A program under test reads the stream with
its own SDK (pointed here by ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``), so its HTTP
client and SSE decoder are certified too. ``callsafe serve`` runs it on its own; certify
runs it for exec targets that read a provider's stream over HTTP. Imports only
:mod:`callsafe.providers` and :mod:`callsafe.model` (and uvicorn, from ``callsafe[serve]``).
"""
