"""Where the node agent is, defined once (light: read as every command starts, and by
`bridge` on a node whose Python has nothing but the standard library)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_SOCKET = Path("/run/adaptyst-top/agent.sock")
AGENT_ENV = "ADAPTYST_TOP_AGENT"  # the socket to use, as --agent says it
STOPPING_S = 1.0  # a request made after the stop (the last snapshot) may take this long
