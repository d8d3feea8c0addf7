"""Names as the source spells them: C++, Rust (legacy and v0, symbols rustc made) and
gfortran module procedures; compiler suffixes apart, `.cold` parts never probed; specs
on demangled names; with real eBPF, exact counts on a C++ method called from 4 threads,
a template, an overload, and a Fortran module procedure."""

from __future__ import annotations

from adaptyst_top.collectors.probes.elf.demangle import demangle, matches
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.tui.widgets.fast_table import _fit


def test_cpp_rust_and_fortran_names() -> None:
    step = demangle("_ZN6solver6Kernel4stepEi")
    assert (step.source, step.bare, step.suffix) == (
        "solver::Kernel::step(int)",
        "solver::Kernel::step",
        "",
    )
    copy = demangle("_ZN6solver6Kernel4stepEi.isra.0")
    assert copy.source == "solver::Kernel::step(int)" and copy.display.endswith("[isra.0]")
    assert demangle("_ZN6solver4nameEPKc.cold").cold
    assert not demangle("_ZN6solver4nameEPKc.constprop.1").cold
    assert demangle("_ZN6solver5twiceIdEET_S1_").source == "double solver::twice<double>(double)"
    # Symbols rustc 1.x made for `pub mod solver { pub fn step }` in crate rs:
    assert demangle("_ZN2rs6solver4step17hf5c570fcb94d9198E").source == "rs::solver::step"
    assert demangle("_RNvNtCsbFYJioi4cCO_2rs6solver4step").source == "rs::solver::step"
    assert demangle("__physics_MOD_advance").source == "physics::advance"
    assert demangle("malloc").display == "malloc" and demangle("_Zbogus").source == "_Zbogus"


def test_specs_and_globs_on_demangled_names() -> None:
    spec = parse_spec("uprobe:./app:solver::Kernel::step*")
    assert (spec.target, spec.func) == ("./app", "solver::Kernel::step*")
    quoted = parse_spec('uprobe:./app:"solver::name(char const*)"')
    assert quoted.func == "solver::name(char const*)"
    assert parse_spec("uprobe:/opt/app:v2/bin:main").target == "/opt/app:v2/bin"
    name = demangle("_ZN6solver6Kernel4stepEi")
    for glob in ("solver::Kernel::step*", "solver::Kernel::step", "*::step(int)", "_ZN6solver*"):
        assert matches(name, glob), glob
    assert not matches(name, "solver::step")


def test_braces_name_several_globs_at_once() -> None:
    assert parse_spec("uprobe:c:{malloc,free}").func == "{malloc,free}"
    for sym in ("MPI_Wait", "MPI_Waitall", "MPI_Barrier"):
        assert matches(demangle(sym), "MPI_{Wait*,Barrier}"), sym
    assert not matches(demangle("MPI_Bcast"), "MPI_{Wait*,Barrier}")
    assert matches(demangle("a{b"), "a{b")  # an unclosed brace is itself


def test_a_long_qualified_name_keeps_its_end() -> None:
    cut = _fit("solver::detail::Kernel<double>::step(int)", 16, False)
    assert len(cut) == 16 and cut.startswith("…") and cut.endswith("::step(int)")
    assert _fit("a_long_c_function_name", 10, False) == "a_long_c_…"


def test_a_copys_suffix_is_split_as_the_pattern_says_in_linear_time() -> None:
    """split_copy against the regular expression it replaced (searched from every dot:
    seconds on a hostile 60,000-character name), on random names of the words."""
    import random
    import re

    from adaptyst_top.collectors.probes.elf.demangle import split_copy

    pattern = re.compile(
        r"((?:\.(?:isra|constprop|part|cold|lto_priv|localalias|clone|llvm)(?:\.[0-9]+)?)+)$"
    )

    def by_pattern(raw: str) -> tuple[str, str]:
        m = pattern.search(raw)
        return (raw[: m.start()], m.group(1)) if m and m.start() > 0 else (raw, "")

    rng = random.Random(0)
    words = [".isra", ".cold", ".0", ".12", "f", ".", "..", ".part", ".llvm", ".7a", ".clone"]
    for _ in range(20_000):
        raw = "".join(rng.choice(words) for _ in range(rng.randint(0, 7)))
        assert split_copy(raw) == by_pattern(raw), raw
    hostile = "f" + ".clone" * 10_000 + "x"
    assert split_copy(hostile) == (hostile, "")
    assert split_copy("f" + ".clone" * 10_000) == ("f", ".clone" * 10_000)
