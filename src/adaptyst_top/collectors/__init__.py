"""Data sources of adaptyst-top: probes, device telemetry, capability checks.

Usable as a library: nothing here imports Textual.
"""
