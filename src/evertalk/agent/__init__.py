"""The agent: turns, tools, permissions and subagents (SPEC §5, §6)."""
