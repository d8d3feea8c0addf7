"""What runs with a user's rights for the agent: each module a program the agent has
started for one user (forked by its fork server, agent/core/fork_server.py, or exec'd
fresh where it cannot), which takes that user's ids before it reads a request. The
opener is standard library only (`python -I -S PATH` where exec'd); the parser imports
the ELF parsers and demanglers only once it runs as the user (the fork server has
imported them, as root, before: their code, never a user's data)."""
