"""A probe module's shape, as both sides know it: the constants and enums of
`bpf/module.h` (KEYLEN, MAX_DEPTH, the key kinds, the error counters), the slots a plan
makes (one per attach point: its role, its chain, where its key comes from) and the
maps' sizes. The programs themselves are C compiled with the package (`bpf/module.h`,
`kinds/<kind>.bpf.c`); module_object.py loads them.

A slot is named as a program of its own (`at_s3`, `at_s3_1` for its second argument
reader, `at_r3` for a uprobe's return): module_object.core_plan maps each name onto the
object's one program for that role and the attach cookie that tells the slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from adaptyst_top.collectors.probes.elf.usdt_args import UsdtArg

KEYLEN = 32
MAX_DEPTH = 16  # a power of two (the verifier needs the mask)
MAX_THREADS = 16384
MAX_KEYS = 16384  # a module whose keys come from an @argN (any number of them)
HIST_ENTRIES = 131072
# The most buckets one key can fill: 16 per power of two over 64 bits (bucket_of).
HIST_PER_KEY = 1024


# bpf/module.h's enums, by the same names (KEY_*, ARG_*, ERR_*).
class KeyKind(IntEnum):
    """What a statistics key holds, as the kernel writes it."""

    NONE = 0
    INT = 1
    STR = 2
    PTR = 3  # an address the kernel could not read: user space reads the string


class ArgType(IntEnum):
    """How an @argN value is keyed: as the spec asks (`@arg1:str`) or guessed."""

    AUTO = 0  # a value that reads as a user-space C string is a string
    INT = 1
    STR = 2


class KernelError(IntEnum):
    """Indexes of the `errors` array the programs count into."""

    MAP_FULL = 0
    TOO_DEEP = 1
    NO_ENTRY = 2  # a return without a recorded entry
    BAD_COUNT = 3  # a hand-over of more hits than one can hold
    BAD_TIME = 4  # a handed-over time past a day: counted, not timed


SlotRole = Literal[
    "uprobe-entry", "usdt-count", "usdt-begin", "usdt-end", "usdt-batch", "usdt-add", "usdt-name"
]
WHOLE_LEN = 256  # kinds/usdt.bpf.c: a device layer's long name, told whole (cut past it)
WHOLE_NAMES = 1024  # long names kept per module: a layer's MAX_NAMES

# The two programs of a module whose functions attach through multi-uprobe links: the
# link's cookie is the slot.
MULTI_ENTRY, MULTI_RETURN, MULTI_AFTER = "at_multi", "at_multi_ret", "at_multi_after"


@dataclass(frozen=True)
class Slot:
    """One attach point's program: which role it plays and where its key comes from."""

    index: int  # 0.. within its module
    role: SlotRole
    chain: int = 0  # USDT pairs: one stack per pair (uprobes share chain 0)
    arg: int | None = None
    arg_type: str = "auto"
    retval: bool = False  # a uprobe keyed by its return value (@retval)
    # A USDT @argN: where it lies, one program per distinct location among the sites.
    readers: tuple[UsdtArg, ...] = ()
    # usdt-batch, usdt-add: each site argument's place (records, their number; a name, its hits)
    args: tuple[UsdtArg, ...] = ()
    files_as: int | None = None  # the slot whose row its keys and gate are (None: its own)
    retimed: bool = False  # a uprobe entry's interval starts at a second probe past it

    @property
    def keyed(self) -> bool:
        return self.arg is not None or self.retval

    @property
    def fn_name(self) -> str:
        return f"at_s{self.index}"

    def variant_name(self, j: int) -> str:
        """The program of the Jth of `readers` (the first is fn_name)."""
        return self.fn_name if j == 0 else f"{self.fn_name}_{j}"

    @property
    def fn_names(self) -> list[str]:
        return [self.variant_name(j) for j in range(max(1, len(self.readers)))]

    @property
    def ret_fn_name(self) -> str:
        return f"at_r{self.index}"

    @property
    def after_fn_name(self) -> str:
        """The program that starts the interval again past a single-stepped entry."""
        return f"at_a{self.index}"


ARG_TYPES = {"auto": ArgType.AUTO, "int": ArgType.INT, "str": ArgType.STR}  # a spec's word


UNTIMED = (1 << 64) - 1  # a batch record's device time for "counted, not timed" (module.h's)


def map_sizes(slots: list[Slot], by_process: bool = False) -> tuple[int, int]:
    """Entries of the statistics and histogram maps. Without an @argN, and with every
    process's hits together, a slot has one key, so the maps hold exactly what they can
    need: reading a hash map walks every bucket it has (0.3 ms for an empty one of
    131,072 here, every interval, per module)."""
    if by_process or any(s.keyed for s in slots):
        return MAX_KEYS, HIST_ENTRIES
    keys = max(1, len(slots))
    return keys, min(HIST_ENTRIES, keys * HIST_PER_KEY)
