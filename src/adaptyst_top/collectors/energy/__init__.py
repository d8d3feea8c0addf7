"""Every joule attribution, in one room: an energy counter's account (account.py), the
node's busy CPU time (busy.py), the CPU's split by scope (scope_cpu.py) and per probe
row (probes.py), a GPU's split per process (gpu_split.py, gpu_processes.py), per kernel
and task row (gpu_tasks.py), per placed task's run (task_runs.py), per Slurm job (jobs.py) and per placed Dask call
(calls.py); and what a user of the agent may see of them (user_view.py)."""
