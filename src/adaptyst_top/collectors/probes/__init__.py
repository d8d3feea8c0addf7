"""The eBPF probe engine: specs, attach plans, BPF programs, reading and their cost."""
