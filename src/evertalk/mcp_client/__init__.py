"""Other MCP servers as tools: their settings (`[mcp]` in config.toml), the command line that
edits them, and the running servers whose tools the model is offered as `NAME__tool`.

Importing the package loads nothing heavy: the SDK comes in with `tools.py`, which only a running
agent imports.
"""
