"""The node's processes, files and jobs: targets, private files, /proc, Slurm, launching a command."""
