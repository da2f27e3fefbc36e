"""The agent's tools (SPEC §6.5–§6.7): memory (`zoom`, `date`), work (`shell`, `read`, `write`,
`edit`) and `agent`, behind one `Toolbox` that validates, checks permission and runs."""

from evertalk.agent.tools.agent import DEPTH_ERROR, NAME_RULE, name_taken, valid_name
from evertalk.agent.tools.base import StartAgent, ToolContext, ToolError, ToolOutcome
from evertalk.agent.tools.memory import read_agent_log
from evertalk.agent.tools.registry import MEMORY_TOOLS, PARSERS, Toolbox

__all__ = [
    "DEPTH_ERROR",
    "MEMORY_TOOLS",
    "NAME_RULE",
    "PARSERS",
    "StartAgent",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "Toolbox",
    "name_taken",
    "read_agent_log",
    "valid_name",
]
