"""A pure-Python program whose CPU splits by construction: caller_a -> Model.big (4 units)
and caller_b -> Model.small (1 unit), each timed by its thread's CPU clock, and a third
caller, packer, that spends its time in C (zlib). Prints what it measured, as JSON. Runs
on CPython 3.7 and later (time.thread_time)."""

import json
import sys
import time
import zlib


def spin(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


class Model:
    def big(self, unit):
        return spin(4 * unit)

    def small(self, unit):
        return spin(unit)


def caller_a(m, unit):
    return m.big(unit)


def caller_b(m, unit):
    return m.small(unit)


def packer(data):
    return len(zlib.compress(data, 9))


def main(seconds):
    m = Model()
    data = bytes(range(256)) * 64
    end = time.monotonic() + seconds
    t = {"big": 0.0, "small": 0.0, "packer": 0.0, "rounds": 0}
    lcg = 12345
    while time.monotonic() < end:
        # Rounds of uneven length (0.5..1.5 units): at an even one near a multiple of the
        # sampling period, samples fall at the same few points of every round.
        lcg = (lcg * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        unit = 5000 + (lcg >> 33) % 10000
        c0 = time.thread_time()
        caller_a(m, unit)
        c1 = time.thread_time()
        caller_b(m, unit)
        c2 = time.thread_time()
        packer(data)
        c3 = time.thread_time()
        t["big"] += c1 - c0
        t["small"] += c2 - c1
        t["packer"] += c3 - c2
        t["rounds"] += 1
    print(json.dumps(t))


main(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
