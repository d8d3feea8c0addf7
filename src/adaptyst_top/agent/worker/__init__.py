"""What runs with a user's rights for the agent: each module a script the agent execs
(`python -I -S PATH`), standard library only."""
