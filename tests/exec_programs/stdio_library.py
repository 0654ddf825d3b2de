"""The openai Chat Completions library adapter (``final`` surface) as an exec target that
reads the wire over stdio: each payload arrives as a ``wire`` message."""

from callsafe.adapters.stdio import serve
from callsafe.targets.openai_chat import OpenAIChatTarget

raise SystemExit(serve(lambda: OpenAIChatTarget("final")))
