"""evertalk: an AI agent with one chat that never ends."""

__version__ = "0.1.0"
