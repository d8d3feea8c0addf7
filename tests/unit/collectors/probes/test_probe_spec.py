from __future__ import annotations

import os

import pytest

from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.spec import ProbeSpecError


def test_uprobe_spec() -> None:
    s = parse_spec("uprobe:/opt/app/bin/solver:solve_*")
    assert (s.kind, s.target, s.func) == ("uprobe", "/opt/app/bin/solver", "solve_*")
    assert s.measures_latency and s.label == "solve_*"


def test_library_short_name() -> None:
    s = parse_spec("uprobe:c:malloc")
    assert s.target == "c" and s.func == "malloc"


def test_usdt_count_pair_and_arg() -> None:
    c = parse_spec("usdt:./app:myprov:tick")
    assert (c.provider, c.name, c.end, c.measures_latency) == ("myprov", "tick", None, False)
    p = parse_spec("usdt:./app:adaptyst:task_begin..task_end@arg1")
    assert (p.name, p.end, p.arg, p.arg_type) == ("task_begin", "task_end", 1, "auto")
    assert p.is_pair and p.measures_latency
    assert parse_spec("usdt:./app:p:n@arg3:int").arg_type == "int"


@pytest.mark.parametrize(
    ("spec", "column", "words"),
    [
        ("kprobe:vfs_read", 1, "unknown probe type"),
        ("uprobe:malloc", 8, "expected uprobe:TARGET:FUNC"),
        ("uprobe:c:", 10, "bad function glob"),
        ("usdt:./app:tick", 6, "expected usdt:TARGET:PROVIDER:NAME"),
        ("usdt:./app:pro-v:tick", 12, "bad USDT provider"),
        ("usdt:./app:p:begin..", 21, "bad END"),
        ("usdt:./app:p:n@argx", 16, "@argN"),
        ("usdt:./app:p:n@arg13", 16, "1..12"),
        ("", 1, "empty"),
    ],
)
def test_malformed_specs_point_at_the_bad_part(spec: str, column: int, words: str) -> None:
    with pytest.raises(ProbeSpecError) as err:
        parse_spec(spec)
    assert words in err.value.one_line
    assert f"column {column}" in err.value.one_line
    assert "\n" not in err.value.one_line


def test_uprobes_split_by_an_argument_or_the_return_value() -> None:
    s = parse_spec("uprobe:./a:f*@arg2")
    assert (s.func, s.arg, s.retval, s.keyed) == ("f*", 2, False, True)
    s = parse_spec('uprobe:./a:"ns::f(int)"@retval:int')
    assert (s.func, s.arg, s.retval, s.arg_type) == ("ns::f(int)", None, True, "int")
    # A symbol's own @ stays in the symbol: only an argument or the return splits.
    s = parse_spec("uprobe:c:memcpy@GLIBC_2.14")
    assert (s.func, s.keyed) == ("memcpy@GLIBC_2.14", False)
    for bad, why in (
        ("uprobe:./a:f@arg7", "arguments 1..6"),
        ("uprobe:./a:f@arg0", "expected @argN or @retval"),
        ("uprobe:./a:f@arg06", "expected @argN or @retval"),  # not a symbol's own @
        ("uprobe:./a:f@retvalue", "expected @argN or @retval"),
        ("uprobe:./a:f@retval:float", "expected @argN or @retval"),
        ("usdt:./a:p:n@retval", "no @retval"),
    ):
        with pytest.raises(ProbeSpecError, match=why):
            parse_spec(bad)


def test_integer_keys_read_signed_as_bpftrace_does() -> None:
    from types import SimpleNamespace

    from adaptyst_top.collectors.probes.bpf.keys import KeyResolver
    from adaptyst_top.collectors.probes.bpf.program import KeyKind

    keys = KeyResolver({})
    assert keys.key_of(SimpleNamespace(kind=KeyKind.INT, num=(1 << 64) - 1)) == -1
    # A "pointer" no user space has (a -1 returned) is never read: no OverflowError.
    from adaptyst_top.collectors.probes.bpf.keys import read_c_string

    for address in ((1 << 64) - 1, 1 << 63, 0xFFFF800000000000, 1 << 47, 0):
        assert read_c_string(os.getpid(), address) is None
    assert keys.key_of(SimpleNamespace(kind=KeyKind.INT, num=(1 << 63) - 1)) == (1 << 63) - 1
