"""The cuda kind on the seam: its specs, its rows' names (cut as the injection library
cuts them), what a launched command gets in its environment, and a process started
without the library."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.cost.table import DEFAULT_COSTS, CostTable
from adaptyst_top.collectors.probes.kinds import KINDS, kind_of, parse_spec
from adaptyst_top.collectors.probes.kinds.cuda import (
    BUDGET_ENV,
    INJECTION_ENV,
    PROVIDER,
    inject_path,
)
from adaptyst_top.collectors.probes.kinds.device_layer import row_name
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import ProbeSpecError


def test_a_spec_names_the_librarys_site_split_by_kernel_name() -> None:
    library = inject_path()
    assert library is not None, "the install builds the injection library (CUPTI's headers)"
    spec = parse_spec("cuda:_Z9vector*")
    assert (spec.kind, spec.target, spec.provider, spec.func) == (
        "cuda",
        library,
        PROVIDER,
        "_Z9vector*",
    )
    assert (spec.label, spec.measures_latency, spec.arg_type) == ("cuda:_Z9vector*", True, "str")
    assert KINDS["cuda"].sampled_latency and not KINDS["cuda"].host_time


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cuda:", "kernel name or glob"),
        ("cuda:a b", "kernel name or glob"),
        ("cuda:$(id)", "kernel name or glob"),
        ("cuda:x@arg1", "split by kernel name"),
        ("cuda:x@retval", "no @retval"),
    ],
)
def test_a_malformed_spec_is_one_line(text: str, says: str) -> None:
    with pytest.raises(ProbeSpecError, match=says) as err:
        parse_spec(text)
    assert "\n" not in err.value.one_line


def test_a_long_name_keeps_its_beginning_and_a_hash_of_the_whole() -> None:
    assert row_name("_Z6reducePfS_i") == "_Z6reducePfS_i"
    assert row_name("k" * 31) == "k" * 31
    a = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE"
    b = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AbsFunctorIfEE"
    assert row_name(a) != row_name(b)
    assert row_name(a).startswith(a[:22] + "~") and len(row_name(a).encode()) == 31
    # FNV-1a of "a" * 32, as the C computes it over the whole name.
    h = 2166136261
    for _ in range(32):
        h = ((h ^ ord("a")) * 16777619) & 0xFFFFFFFF
    assert row_name("a" * 32) == "a" * 22 + f"~{h:08x}"


def test_entries_are_the_kernels_the_glob_names() -> None:
    spec = parse_spec("cuda:_Z6*")
    kind = kind_of(spec)
    assert kind.entry_name(spec, spec.label, "_Z6reducePfS_i") == "_Z6reducePfS_i"
    assert kind.entry_name(spec, spec.label, "[HtoD]") is None
    assert kind.entry_name(spec, spec.label, None) == "cuda:_Z6*"


def test_a_launched_command_gets_the_library_in_place_of_anothers() -> None:
    kind = kind_of(parse_spec("cuda:*"))
    library = inject_path()
    assert kind.launch_env({}, 0.02) == {INJECTION_ENV: library, BUDGET_ENV: "0.020000000"}
    assert kind.launch_env({INJECTION_ENV: "/opt/other.so"}, 1.0)[INJECTION_ENV] == library


def test_its_rows_are_priced_as_records_timed_and_counted() -> None:
    from adaptyst_top.collectors.probes.cost.budget import interval_cost_ns
    from adaptyst_top.collectors.probes.model import Row

    row = Row(0, parse_spec("cuda:*"), "cuda:*", "/inject.so", "cuda-record", 0)
    row.count_class = "cuda-count"
    row.interval_hits, row.interval_timed = 1000, 10
    timed, counted = DEFAULT_COSTS["cuda-record"], DEFAULT_COSTS["cuda-count"]
    assert 0 < counted.per_hit_ns < timed.per_hit_ns
    assert interval_cost_ns(row, CostTable()) == 10 * timed.per_hit_ns + 990 * counted.per_hit_ns


class _Held:
    """A PlanContext whose held process is this test's own (files read through it)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def proc_file(self, pid: int, name: str) -> int | None:
        return os.open(f"/proc/{pid}/{name}", os.O_RDONLY)


def test_a_process_started_without_the_library_ends_the_spec_in_one_line() -> None:
    spec = parse_spec("cuda:*")
    with pytest.raises(ProbeError, match="not started with this tool's CUDA injection") as err:
        kind_of(spec).instead(_Held(os.getpid()), spec)  # type: ignore[arg-type]
    assert "\n" not in str(err.value) and "-- CMD" in str(err.value)


def test_a_process_started_with_the_library_or_a_launch_is_planned_as_it_is() -> None:
    spec = parse_spec("cuda:*")
    env = {**os.environ, INJECTION_ENV: spec.target}
    with subprocess.Popen(["sleep", "30"], env=env) as proc:
        try:
            # Popen returns as exec closes the error pipe, before the new program's
            # arguments and environment are in place: wait for them.
            deadline = time.monotonic() + 10
            while not Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                assert time.monotonic() < deadline
                time.sleep(0.01)
            assert kind_of(spec).instead(_Held(proc.pid), spec) is None  # type: ignore[arg-type]
        finally:
            proc.kill()
    launched = _Held(0)
    launched.pid = None  # type: ignore[assignment]
    assert kind_of(spec).instead(launched, spec) is None  # type: ignore[arg-type]


def test_a_long_name_told_whole_is_shown_whole() -> None:
    from adaptyst_top.collectors.probes.bpf.keys import hashed_name, told_name
    from adaptyst_top.collectors.probes.bpf.program import WHOLE_LEN
    from adaptyst_top.collectors.probes.kinds.device_layer import shown_name

    a = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE"
    assert hashed_name(row_name(a)) and not hashed_name(a) and not hashed_name("k" * 31)
    assert shown_name(a) == a and shown_name("[HtoD]") == "[HtoD]"
    key = row_name(a).encode()
    assert told_name(key + b"\0", a.encode() + b"\0junk") == a
    # Longer than the names map keeps: cut, ending in the key's hash (two alike that far
    # stay apart).
    long_a, long_b = "x" * 300 + "a", "x" * 300 + "b"
    assert shown_name(long_a) != shown_name(long_b)
    assert len(shown_name(long_a).encode()) == WHOLE_LEN - 1
    assert shown_name(long_a).endswith(row_name(long_a)[22:])
    cut = long_a.encode()[: WHOLE_LEN - 1]
    assert told_name(row_name(long_a).encode(), cut) == shown_name(long_a)
    assert shown_name("y" * 255) == "y" * 255  # 255 bytes: whole, its hash says so
    assert told_name(row_name("y" * 255).encode(), b"y" * 255) == "y" * 255


def test_a_told_name_that_is_not_its_keys_is_refused() -> None:
    """A process tells names through its own layer's site: one that does not start with
    the key's bytes and hash to the key's hash renames nothing."""
    from adaptyst_top.collectors.probes.bpf.keys import told_name

    a = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE"
    key = row_name(a).encode()
    assert told_name(key, b"rm -rf / \x1b[2J") is None  # another prefix
    assert told_name(key, a.encode() + b"X") is None  # the prefix, not the hash
    assert told_name(b"short", a.encode()) is None  # not a long name's key
    assert told_name(key[:22] + b"~zzzzzzzz", a.encode()) is None  # no hex
