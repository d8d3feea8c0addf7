"""The NVIDIA path on a real GPU (scripts/gpu_check.sh): the run (gpu_check), its pure
figures and checks (gpu_figures) and the CUDA load it measures (gpu_load). Results of
the H200 run are in results/h200/."""
