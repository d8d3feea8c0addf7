"""The placement experiments: DyPe's evaluation on this machine's devices
(placement_eval), the simulator of cases never tuned on (placement_sim), the warm-up
check (placement_warmup) and the figure of an evaluation (placement_plot)."""
