"""What runs with a user's rights for the agent: each module a program the agent execs
fresh for one user, which takes that user's ids before it reads a request. The opener
is standard library only (`python -I -S PATH`); the parser imports the ELF parsers and
demanglers only once it runs as the user."""
