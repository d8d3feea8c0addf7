"""Sampled profiles: on-CPU samples and off-CPU intervals of the session's threads, each
with a copy of the top of its user stack, unwound here from each binary's own tables."""
