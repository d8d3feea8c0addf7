"""The advisor the learner replaced (per-bucket models with a fitted power law, measured
explorations, priors from similar tasks), kept as a baseline for the evaluations
(placement_eval.py, placement_sim.py); the monitor and Dask place with the learner."""
