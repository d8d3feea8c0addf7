"""A Python program for a probe added while it runs: it calls Model.big once (so the
hook has seen it, and set it aside, before any probe names it) and says so (the file
GO.ready), then only tiny() until the file GO exists and (3.12+) the hook is on, then
Model.big CALLS times, timing each call itself, and prints what it measured as JSON."""

import json
import os
import sys
import time


def spin(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


class Model:
    def big(self):
        return spin(2000)


def tiny(i):
    return i + 1


def hooked():
    """From 3.12, until the monitor's hook is registered with its events on (its thread
    imports and installs it once the first set of probes comes, a while after the
    monitor sent it on a loaded node): the calls measured are the calls it can see."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for i in range(6):
            if mon.get_tool(i) == "adaptyst-top" and mon.get_events(i):
                return
        time.sleep(0.001)


def main(go, calls):
    m = Model()
    m.big()
    open(go + ".ready", "w").close()
    waited = 0
    while not os.path.exists(go):
        for i in range(100):
            tiny(i)
        waited += 1
        time.sleep(0.001)
    hooked()
    took = 0
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        m.big()
        took += time.perf_counter_ns() - t0
    print(json.dumps({"calls": calls, "mean_ns": took / calls, "waited": waited}), flush=True)


main(sys.argv[1], int(sys.argv[2]))
