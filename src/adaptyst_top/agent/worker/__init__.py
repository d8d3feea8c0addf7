"""What runs with a user's rights for the agent: each module a program the agent execs
fresh for one user (or ahead, as a spare waiting to be told whose it is), which takes
that user's ids before it reads a request. The opener is standard library only
(`python -I -S PATH`); the parser loads the ELF parsers' and demanglers' code before it
is told whose it is, and reads a user's file only once it runs as her."""
