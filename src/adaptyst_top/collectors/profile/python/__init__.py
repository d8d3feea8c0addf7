"""Python frames in a native profile: which CPython a process runs (detect.py), where
its structures lie (offsets.py, generated from each version's own headers), the walk of
its frame chain at sample time (the sampler's BPF, sampler_py.py), what a code object is
called (names.py) and where its frames go among the native ones (interleave.py).

A new interpreter version is one more entry in offsets.py (scripts/python_offsets.py)."""
