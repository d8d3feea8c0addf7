"""The `adaptyst-top` command line: one table of commands (commands.py), a module per
command, the options they share (options.py). On top of every other layer; nothing
imports it but the program's entry point (start.py)."""
