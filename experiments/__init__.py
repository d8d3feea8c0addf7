"""Experiments: runs that test an idea or a machine rather than price a path against a
peer (placement/, gpu/). Run one as `python -m experiments.PART.NAME` from the
repository root."""
