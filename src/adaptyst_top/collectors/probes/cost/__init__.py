"""What probes cost: calibration, the budget, per-class costs, on-CPU time."""
