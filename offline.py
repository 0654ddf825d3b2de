"""Client libraries stay offline and quiet under callsafe: the environment switches that
turn off their own start-up downloads and telemetry, set before any of them is imported.

Why: a certifier runs where the network may be absent or must not be used, and its output
must be only its own. Left alone, ``litellm`` fetches its model price list from GitHub when
it is imported (warnings on stderr and seconds of retries offline), the agent frameworks
export traces and usage telemetry (openai-agents to the OpenAI tracing endpoint, crewai to
its telemetry service, OpenTelemetry exporters), and a Hugging Face tokenizer may be fetched
from the hub. Every callsafe entry point that can import such a library calls
:func:`keep_offline` first: the ``callsafe`` command (``cli/main.py``), the framework programs
(``adapters/frameworks/``), the library adapters' imports (``targets/litellm.py``) and
``callsafe inspect``'s library runs. The programs callsafe starts inherit the environment.

``os.environ.setdefault``: a switch the user set explicitly is left as it is. Standard
library only, and nothing of callsafe is imported here (a loose module of the package,
below every folder).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["OFFLINE_ENVIRONMENT", "keep_offline"]

# variable -> value, each with the library that reads it.
OFFLINE_ENVIRONMENT: Final[Mapping[str, str]] = MappingProxyType(
    {
        # litellm: the bundled model price list instead of a download at import
        # (litellm/litellm_core_utils/get_model_cost_map.py), and no other fetch.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "true",
        # openai-agents: no trace export to the OpenAI tracing endpoint (agents/tracing/provider.py).
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
        # crewai: no anonymous telemetry, no trace upload (crewai/telemetry, crewai/events).
        "CREWAI_DISABLE_TELEMETRY": "true",
        "CREWAI_TRACING_ENABLED": "false",
        # agno: no anonymous usage telemetry to api.agno.com (agent/_init.py, set_telemetry).
        "AGNO_TELEMETRY": "false",
        # smolagents' Hub helpers and LangSmith (langchain-core, langgraph): no trace upload.
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        # OpenTelemetry SDK (crewai, strands, google-adk set one up): no exporter starts.
        "OTEL_SDK_DISABLED": "true",
        # Hugging Face hub (tokenizers some libraries load): the local cache only.
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        # google-auth (google-genai, google-adk): no probe of the GCE metadata server
        # (169.254.169.254) while looking for default credentials.
        "NO_GCE_CHECK": "true",
        # chromadb (crewai's memory) and the cross-tool convention: no usage analytics.
        "ANONYMIZED_TELEMETRY": "False",
        "DO_NOT_TRACK": "1",
    }
)


def keep_offline() -> None:
    """Set every switch of :data:`OFFLINE_ENVIRONMENT` not already set. Call it before the
    library is imported: most read their switch once, at import."""
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
