"""A Python program for a probe added while it runs: it calls Model.big once (so the
hook has seen it, and set it aside, before any probe names it) and says so (the file
GO.ready), then only tiny() until the file GO exists, then Model.big CALLS times, timing
each call itself, and prints what it measured as JSON."""

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
    took = 0
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        m.big()
        took += time.perf_counter_ns() - t0
    print(json.dumps({"calls": calls, "mean_ns": took / calls, "waited": waited}), flush=True)


main(sys.argv[1], int(sys.argv[2]))
