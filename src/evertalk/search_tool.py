"""The `search` tool's definition, offered with `[memory] search = true` in config.toml.

Kept out of `prompts.TOOLS`: that list is every session's, and this tool is opt-in. The
description steers the model to the view and zoom first, since they are the memory; search is
for the exact string a summary may have dropped.
"""

from __future__ import annotations

from evertalk.providers.base import Tool

SEARCH = Tool(
    name="search",
    description=(
        "Full-text search over every message and summary of your memory, for an exact string "
        "you cannot place: a name, an error message, a number, a path. For anything else, read "
        "your view and zoom: they are your memory, and search only finds words. Each hit gives "
        "its `id+n` (a message when n = 1, else a summary), its date, the words around the "
        "match, and the view line it falls in; zoom opens either. The whole text is tried as "
        "a phrase first, then as words anywhere; case and punctuation are ignored."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The words to find, as they were written."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 50,
                "description": "Most hits returned (default 10).",
            },
        },
        "required": ["query"],
    },
)
