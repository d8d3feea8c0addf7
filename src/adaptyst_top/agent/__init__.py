"""The node agent (`adaptyst-top agent`, root): `core/` is the privileged process, small
enough to audit (docs/agent.md, "What runs as root"); `worker/` runs as the user a
request is for, exec'd fresh (the opener and the parser of their files). The clients' side
(the wire, the connection, carrying a session across restarts) is runtime's."""
