"""The probes' BPF side: the C compiled with the package (setup.py's BuildWithBpf):
`module.h`, the probe modules' maps and interval logic that each kind's
`kinds/<kind>.bpf.c` includes, `follow.bpf.c` (the process follower); and the Python
that loads and reads them: libbpf.py (loading), program.py (the programs' sources and
key structs), maps.py, keys.py (decoding keys), stats.py (the kernel's run-time
statistics), module_object.py, kernel_btf.py, ebpf_env.py (what the node allows) and
ebpf_smoke.py. Nothing here is compiled on the node."""
