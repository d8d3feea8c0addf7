"""USDT argument locations (collectors/probes/elf/usdt_args.py): every form SDT notes use on
x86-64 read, the rest refused in one line, and the C each becomes."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.probes.elf.usdt_args import ArgError, UsdtArg, parse_arg, reader


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("8@%rax", UsdtArg(8, False, reg="ax")),
        ("-4@%eax", UsdtArg(4, True, reg="ax")),
        ("1@%sil", UsdtArg(1, False, reg="si")),
        ("8@%r14", UsdtArg(8, False, reg="r14")),
        ("-4@%r9d", UsdtArg(4, True, reg="r9")),
        ("8@-16(%rbp)", UsdtArg(8, False, base="bp", disp=-16)),
        ("-4@12(%rsp)", UsdtArg(4, True, base="sp", disp=12)),
        ("8@(%rax)", UsdtArg(8, False, base="ax")),
        ("8@8(%rax,%rdx,8)", UsdtArg(8, False, base="ax", disp=8, index="dx", scale=8)),
        ("2@(%rbx,%rcx)", UsdtArg(2, False, base="bx", index="cx")),
        ("4@$5", UsdtArg(4, False, const=5)),
        ("-8@$-1", UsdtArg(8, True, const=-1)),
        ("8@$0x10", UsdtArg(8, False, const=16)),
    ],
)
def test_every_location_sdt_notes_use_is_read(text: str, want: UsdtArg) -> None:
    assert parse_arg(text) == want


@pytest.mark.parametrize(
    "text",
    [
        "8@foo(%rip)",  # a global: relative to the instruction pointer
        "8@%fs:8",
        "3@%rax",
        "8@%xmm0",
        "8@%rax)",
        "8@(%rax,%rdx,3)",
        "@%rax",
        "8@" + "9" * 100,
        "8@$" + "9" * 25,
        "",
        "8@%rip",
    ],
)
def test_what_it_does_not_read_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ArgError) as got:
        parse_arg(text)
    assert "\n" not in str(got.value) and len(str(got.value)) < 200


def test_each_location_becomes_c_that_leaves_the_value_in_v() -> None:
    assert reader(parse_arg("8@%rax")) == "v = ctx->ax;"
    assert reader(parse_arg("-4@%eax")) == "v = ctx->ax; v = (u64)(s64)(s32)v;"
    assert reader(parse_arg("2@%bx")) == "v = ctx->bx; v = (u64)(u16)v;"
    assert reader(parse_arg("-8@$-1")) == "v = (u64)0xffffffffffffffffULL;"
    mem = reader(parse_arg("-4@8(%rax,%rdx,4)"))
    assert "bpf_probe_read_user(&t, sizeof(t), (void *)(ctx->ax + (8LL) + ctx->dx * 4))" in mem
    assert mem.startswith("{ u32 t = 0;") and mem.endswith("v = (u64)(s64)(s32)v;")


def test_an_argument_in_too_many_places_is_refused_before_anything_compiles() -> None:
    """A file whose probe keeps @arg1 in 17 places would cost 17 programs: refused."""
    from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, UsdtProbe
    from adaptyst_top.collectors.probes.engine.attach_plan import MAX_READERS, PlanError, plan_usdt
    from adaptyst_top.collectors.probes.kinds import parse_spec

    def sites(n: int) -> tuple[UsdtProbe, ...]:
        return tuple(UsdtProbe("p", "n", 0x1000 + i, 0, f"8@{8 * i}(%rbp)") for i in range(n))

    spec = parse_spec("usdt:/nonexistent:p:n@arg1")
    many = ElfInfo("/nonexistent", (), sites(MAX_READERS + 1), True, "EM_X86_64")
    with pytest.raises(PlanError, match=f"lies in {MAX_READERS + 1} places"):
        plan_usdt(spec, "/nonexistent", many, 100)


def test_a_spec_of_too_many_sites_or_two_at_one_place_is_refused() -> None:
    from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, UsdtProbe
    from adaptyst_top.collectors.probes.engine.attach_plan import MAX_SITES, PlanError, plan_usdt
    from adaptyst_top.collectors.probes.kinds import parse_spec

    def elf(addresses: list[int]) -> ElfInfo:
        notes = tuple(UsdtProbe("p", "n", a, 0, "") for a in addresses)
        return ElfInfo("/nonexistent", (), notes, True, "EM_X86_64")

    spec = parse_spec("usdt:/nonexistent:p:n")
    with pytest.raises(PlanError, match=f"{MAX_SITES + 1} probe sites"):
        plan_usdt(spec, "/nonexistent", elf(list(range(MAX_SITES + 1))), 1000)
    with pytest.raises(PlanError, match="two of its probe sites lie at one address"):
        plan_usdt(spec, "/nonexistent", elf([0x10, 0x10]), 1000)
