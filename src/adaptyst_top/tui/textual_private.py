"""The one door to Textual's private names, and the switch back to stock rendering.

Two fast paths read names Textual does not promise to keep: direct_paint.py (changed
lines written past the compositor) and quiet_driver.py (an input thread without
Textual's 0.1 s poll). The app and the widgets reach them only through here, and
both are off — Textual renders and reads input as it always does — when:

- the environment has ADAPTYST_TOP_STOCK_RENDERING=1, or the config file
  `stock_rendering = true`;
- the installed Textual lacks a module or name they import (a later version);
- a name they read on a running app is gone (an AttributeError turns them off for
  the rest of the run, and that frame is refreshed as Textual would).

The Textual the tests pin (tests/constraints.txt) is checked by tests/system/pty/test_direct_paint.py;
`make test` also runs the TUI tests with the switch on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from textual.app import App
from textual.driver import Driver
from textual.widget import Widget

STOCK_ENV = "ADAPTYST_TOP_STOCK_RENDERING"

_direct_paint: ModuleType | None
_quiet_driver: ModuleType | None
try:
    from adaptyst_top.tui import direct_paint as _direct_paint
    from adaptyst_top.tui import quiet_driver as _quiet_driver
except (ImportError, AttributeError):  # a Textual without the private names they import
    _direct_paint = _quiet_driver = None


class _Switch:
    def __init__(self) -> None:
        self.why_stock: str | None = None
        if _direct_paint is None or _quiet_driver is None:
            self.why_stock = "this Textual lacks the private names the fast paths read"
        elif os.environ.get(STOCK_ENV, "") not in ("", "0"):
            self.why_stock = f"{STOCK_ENV} is set"


_switch = _Switch()


def fast() -> bool:
    """Whether the fast paths are on."""
    return _switch.why_stock is None


def why_stock() -> str | None:
    """Why Textual renders stock (None: the fast paths are on)."""
    return _switch.why_stock


def use_stock(why: str) -> None:
    """Stock rendering from now on (the config's `stock_rendering`, or a name gone)."""
    if _switch.why_stock is None:
        _switch.why_stock = why


def one_write(app: App[Any]) -> contextlib.AbstractContextManager[None]:
    """direct_paint.one_write: the paints made inside go out in one write."""
    if _direct_paint is None or not fast():
        return contextlib.nullcontext()
    block: contextlib.AbstractContextManager[None] = _direct_paint.one_write(app)
    return block


def paint_lines(widget: Widget, lines: Iterable[int]) -> bool:
    """direct_paint.paint_lines; False (refresh as Textual would) when stock."""
    if _direct_paint is None or not fast():
        return False
    try:
        return bool(_direct_paint.paint_lines(widget, lines))
    except AttributeError as exc:  # a private name gone: stock from now on
        use_stock(f"Textual changed: {exc}")
        return False


def when_done(widget: Widget, repaint: Callable[[], object]) -> None:
    """direct_paint.when_done; stock: after the handler, as Textual's call_later."""
    if _direct_paint is None or not fast():
        widget.call_later(repaint)
    else:
        _direct_paint.when_done(widget, repaint)


def quiet(driver_class: type[Driver]) -> type[Driver]:
    """quiet_driver.quiet: the driver an app runs with (Textual's own when stock)."""
    if _quiet_driver is None or not fast():
        return driver_class
    chosen: type[Driver] = _quiet_driver.quiet(driver_class)
    return chosen
