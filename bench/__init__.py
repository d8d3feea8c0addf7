"""Benchmarks: each measures adaptyst-top against a peer in the same run and reports
ratios. Run one as `python -m bench.NAME` from the repository root (bench/README.md)."""
