"""Bars and sparklines, in Unicode or (for --ascii and old terminals) plain ASCII."""

from __future__ import annotations

from collections.abc import Sequence

SPARK_UNICODE = " ▁▂▃▄▅▆▇█"
SPARK_ASCII = " .:-=+*#%"


def bar(fraction: float | None, width: int, ascii: bool = False) -> str:
    if fraction is None:
        return "-".center(width)
    fraction = min(1.0, max(0.0, fraction))
    full = "#" if ascii else "█"
    empty = "." if ascii else "░"
    n = round(fraction * width)
    return full * n + empty * (width - n)


def sparkline(
    values: Sequence[float | None], width: int, ascii: bool = False, top: float | None = None
) -> str:
    """The last `width` values scaled to `top` (default: their maximum)."""
    chars = SPARK_ASCII if ascii else SPARK_UNICODE
    recent = list(values)[-width:]
    known = [v for v in recent if v is not None]
    peak = top if top is not None else (max(known) if known else 0.0)
    out = []
    for v in recent:
        if v is None or peak <= 0:
            out.append(" ")
        else:
            out.append(chars[min(len(chars) - 1, round(v / peak * (len(chars) - 1)))])
    return "".join(out).rjust(width)


# One cell for one cell, so that columns stay where they are: what --ascii shows for the
# few non-ASCII characters the panes write themselves (units, separators, cuts, arrows).
_ASCII_CELLS = str.maketrans(
    {"µ": "u", "·": "|", "…": "~", "│": "|", "→": ">", "▼": "v", "▲": "^", "–": "-", "×": "x"}
)


def to_ascii(text: str) -> str:
    """TEXT for --ascii: the panes' own glyphs as their ASCII cells, anything else
    non-ASCII (a name from a target) as "?"."""
    if text.isascii():
        return text
    return text.translate(_ASCII_CELLS).encode("ascii", "replace").decode("ascii")
