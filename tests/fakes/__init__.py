"""Offline fakes of the Anthropic Messages API and the OpenAI Chat Completions API.

The real SDK clients talk to them in-process (an httpx2 transport that runs the ASGI app and
streams) or over loopback (uvicorn on 127.0.0.1). Replies are scripted by behaviours; the
Anthropic fake models the prompt cache by Anthropic's rules, the OpenAI fake by automatic prefix
caching. See the modules' docstrings.
"""

from .anthropic_fake import AnthropicFake
from .behaviours import (
    Behaviour,
    Call,
    Fail,
    Reply,
    Script,
    Text,
    Thinking,
    ToolCall,
    calls_tool,
    chat,
    constant,
    cut,
    empty,
    fail,
    fenced,
    never_shortens,
    reply,
    sequence,
    sized_line,
    slow,
    summarizer,
    thinking_only,
    with_head,
)
from .common import FakeClock, RequestRecord, Totals, tokens_of
from .openai_fake import OpenAIFake
from .servers import (
    IN_PROCESS_URL,
    InFlight,
    LoopbackServer,
    SwitchApp,
    anthropic_async,
    async_client,
    openai_async,
    raw_client,
    serve,
    sync_client,
)

__all__ = [
    "IN_PROCESS_URL",
    "AnthropicFake",
    "Behaviour",
    "Call",
    "Fail",
    "FakeClock",
    "InFlight",
    "LoopbackServer",
    "OpenAIFake",
    "Reply",
    "RequestRecord",
    "Script",
    "SwitchApp",
    "Text",
    "Thinking",
    "ToolCall",
    "Totals",
    "anthropic_async",
    "async_client",
    "calls_tool",
    "chat",
    "constant",
    "cut",
    "empty",
    "fail",
    "fenced",
    "never_shortens",
    "openai_async",
    "raw_client",
    "reply",
    "sequence",
    "serve",
    "sized_line",
    "slow",
    "summarizer",
    "sync_client",
    "thinking_only",
    "tokens_of",
    "with_head",
]
