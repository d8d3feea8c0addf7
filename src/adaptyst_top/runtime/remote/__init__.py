"""A session served by the node agent: its client (the wire protocol, the transport
over its socket or `ssh NODE adaptyst-top bridge`, a session carried across agent
restarts), the checks `doctor` makes of it, and the agent's settings and defaults."""
