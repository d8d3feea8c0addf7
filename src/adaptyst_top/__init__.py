"""adaptyst-top: a live terminal monitor for compute nodes with CPUs, GPUs and FPGAs.

The layers, lowest first (docs/architecture.md; tests/unit/test_layers.py checks them):
collectors and placement gather and advise, runtime wires a session, tui presents,
and the command line sits on top."""
