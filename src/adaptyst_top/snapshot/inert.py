"""Text from a target, a file, a remote or another user, made inert for a terminal.

A function name, a USDT string key, a process name, a recording or an agent's message
may hold terminal control sequences (ESC ] 0 sets a pane's title; ESC [ 2 J clears the
screen). Such text is made inert once, where it enters the tool's data: every C0 and
C1 control character, DEL, and the Unicode bidirectional overrides (which reorder what
is shown) become a visible \\xNN or \\uNNNN. Plain text is returned as it is."""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def inert(text: str) -> str:
    """TEXT with every control character shown, never acted on."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


def has_unsafe(text: str) -> bool:
    return _UNSAFE.search(text) is not None
