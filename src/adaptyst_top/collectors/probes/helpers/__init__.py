"""The small C programs the tool builds and runs on itself (calibration, the entry check)."""
