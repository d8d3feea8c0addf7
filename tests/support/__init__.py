"""What tests and benchmarks share: the programs they probe, the users they become, the
services they start, the files they read. Importable as `tests.support` from the
repository root (pytest's rootdir, `python -m bench.NAME`)."""
