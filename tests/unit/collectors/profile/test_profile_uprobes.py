"""The uprobes' state a sample carries (sampler.RETURNS) and how the unwinder reads it:
the agent hands events to the user's worker encoded, so they must survive the trip."""

from __future__ import annotations

from adaptyst_top.collectors.profile.sampler import MAX_RETURNS, RETURNS, Event, decode, encode
from adaptyst_top.collectors.profile.unwind import Pending, _trampoline_slot


def test_pending_returns_and_a_stepped_probe_survive_the_agents_encoding() -> None:
    e = Event(
        RETURNS, 7, 8, 123, 0x401000, 0x7FFF0080, returns=((0x7FF0, 0x4011), (0x7FF8, 0x4022))
    )
    assert decode(encode(e)) == e


def test_more_returns_than_the_kernel_sends_are_cut_to_the_innermost() -> None:
    pairs = tuple((0x1000 + 8 * i, 0x2000 + i) for i in range(MAX_RETURNS + 3))
    back = decode(encode(Event(RETURNS, 1, 1, 1, returns=pairs)))
    assert back is not None and back.returns == pairs[:MAX_RETURNS]


def test_the_trampoline_takes_the_newest_return_whose_slot_it_popped() -> None:
    pending = Pending({0x7340: 0xA, 0x7348: 0xB})
    assert _trampoline_slot(pending, 0x7348) == 0x7340  # ret popped the slot: sp = slot + 8
    assert _trampoline_slot(pending, 0x7330) == 0x7340  # three words pushed since
    # The newest was taken already: the one beyond is never mistaken for it.
    assert _trampoline_slot(Pending({0x7348: 0xB}), 0x7330) is None
