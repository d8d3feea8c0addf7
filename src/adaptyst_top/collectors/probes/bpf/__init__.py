"""The BPF C compiled with the package (setup.py's BuildWithBpf): `module.h`, the probe
modules' maps and interval logic that each kind's `kinds/<kind>.bpf.c` includes, and the
programs that belong to no kind (`follow.bpf.c`: the process follower). Loaded by
libbpf (../libbpf.py); nothing here is compiled on the node."""
