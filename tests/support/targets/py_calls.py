"""A Python program that counts and times its own calls of Model.big (~200 us each, by
perf_counter_ns around each call) among many calls of a tiny function and one of a
method with a long qualified name, and prints what it measured as JSON when its seconds
are up."""

import json
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


class TransformerEncoderLayerWithRotaryEmbeddings:
    """A qualified name longer than a probe's key (31 bytes): its row shows it whole."""

    def forward_attention_block(self):
        return spin(100)


def main(seconds):
    m = Model()
    layer = TransformerEncoderLayerWithRotaryEmbeddings()
    end = time.monotonic() + seconds
    calls = took = tinies = 0
    while time.monotonic() < end:
        t0 = time.perf_counter_ns()
        m.big()
        took += time.perf_counter_ns() - t0
        calls += 1
        for i in range(10):
            tiny(i)
            tinies += 1
        layer.forward_attention_block()
    out = {"calls": calls, "mean_ns": took / calls, "tiny_calls": tinies, "long_calls": calls}
    print(json.dumps(out))


main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
