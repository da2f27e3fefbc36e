"""The context a turn's call may use by default, in a module of its own: the session uses it,
and the setup form shows it, and a client must not load the agent to learn one number."""

from typing import Final

CONTEXT_BUDGET: Final = 200_000
"""Tokens a call may use, prompt and output cap together: the context window of the current
Anthropic models (OpenAI's are larger). A turn stops its loop, and says so, before a call that
would need more (SPEC §6.2); its steps are logged and reach the next turn through the view."""
