"""An OpenCL program that counts its own kernel launches and times each one from its own
profiling events, for checking `opencl:` rows against (and for the overhead bench).

    python opencl_launches.py --launches N --out FILE.json [--seed S] [--loop] [--hold S]

Irregular by default: each launch picks a kernel and a size at random, its event kept
and read once all are done, and buffer reads and writes come between (counted as [read] and [write]). FILE gets
{"launches": {name: count}, "device_ns": {kernel: total}, "seconds": wall, "layer":
whether the tool's OpenCL layer is loaded, "cpu_device": whether it ran on a CPU}. --loop: one short kernel launched N times
back to back (--items work items, 64 by default), events unread (the bench's short-kernel
loop), and "per_s" in FILE.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np
import pyopencl as cl

SOURCE = """
__kernel void scale(__global float *a) { int i = get_global_id(0); a[i] = 0.5f * a[i] + 1.0f; }
__kernel void square(__global float *a) { int i = get_global_id(0); a[i] = a[i] * a[i]; }
__kernel void tiny(__global float *a) { a[get_global_id(0)] += 1.0f; }
__kernel void global_bandwidth_v1_local_offset_float4(__global float *a) { a[get_global_id(0)] -= 1.0f; }
"""
LONG = "global_bandwidth_v1_local_offset_float4"  # longer than a probe's key: shown whole
SIZES = (64, 1024, 16384)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=300)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--loop", action="store_true")
    ap.add_argument("--items", type=int, default=64, help="work items of --loop's kernel")
    ap.add_argument("--hold", type=float, default=0.0, help="seconds to wait, set up, first")
    args = ap.parse_args()
    ctx = cl.Context(cl.get_platforms()[0].get_devices()[:1])
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    program = cl.Program(ctx, SOURCE).build()
    kernels = {n: cl.Kernel(program, n) for n in ("scale", "square", "tiny", LONG)}
    host = np.ones(max(*SIZES, args.items), np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    for k in kernels.values():
        k.set_arg(0, buf)
    time.sleep(args.hold)  # OpenCL loaded: a monitor may attach meanwhile
    launches = dict.fromkeys(kernels, 0)
    device_ns = dict.fromkeys(kernels, 0)
    started = time.perf_counter()
    if args.loop:
        tiny = kernels["tiny"]
        for _ in range(args.launches):
            cl.enqueue_nd_range_kernel(queue, tiny, (args.items,), None)
        queue.finish()
        launches["tiny"] = args.launches
    else:
        rng = random.Random(args.seed)
        events: list[tuple[str, cl.Event]] = []
        for i in range(args.launches):
            name = rng.choice(("scale", "scale", "square", "tiny", LONG))
            events.append(
                (name, cl.enqueue_nd_range_kernel(queue, kernels[name], (rng.choice(SIZES),), None))
            )
            launches[name] += 1
            if i % 50 == 49:  # transfers between, and a pause now and then
                cl.enqueue_copy(queue, host, buf)
                cl.enqueue_copy(queue, buf, host)
                launches["[read]"] = launches.get("[read]", 0) + 1
                launches["[write]"] = launches.get("[write]", 0) + 1
                queue.finish()
                time.sleep(rng.random() * 0.02)
        queue.finish()
        for name, ev in events:
            device_ns[name] += ev.profile.end - ev.profile.start
    seconds = time.perf_counter() - started
    with open("/proc/self/maps") as f:
        layer = any("_opencl_layer" in line for line in f)
    cpu = bool(ctx.devices[0].type & cl.device_type.CPU)
    out = {"launches": launches, "device_ns": device_ns, "seconds": seconds, "layer": layer}
    out["cpu_device"] = cpu
    if args.loop:
        out["per_s"] = args.launches / seconds
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
