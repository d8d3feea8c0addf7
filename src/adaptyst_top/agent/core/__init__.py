"""The agent's privileged process: connections and who they are, what a user may probe,
the BPF programs, devices, and what each user is served."""
