"""How fast a key takes effect in the live monitor with 200+ probes attached to a real
process (goal: within 100 ms), and what one refresh of that many rows costs.

    sudo .venv/bin/python -m bench.bench_tui_live_keys [--repeats 5] [--json]

The target is tests/support/targets/workload.c running `forever`; the probes are its own
functions and two libc globs in it (get*, *printf*), each an entry+return uprobe pair.
A key's time runs from the press until its effect is in the widgets (the next frame
paints it; frames are capped at TEXTUAL_FPS, 20 by default): a probe's state cell
changed (space), a screen mounted with all its widgets (enter, /, ?), the sort changed and the rows reordered (s, S), the cursor
moved (down). The app runs headless under Textual's pilot, in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from textual import events

from adaptyst_top.runtime.session import open_session
from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target
from adaptyst_top.runtime.sources import LiveSource
from adaptyst_top.tui.app import MonitorApp
from adaptyst_top.tui.screens.detail import DetailScreen
from adaptyst_top.tui.screens.help import HelpScreen
from adaptyst_top.tui.screens.prompt import PromptScreen
from adaptyst_top.tui.widgets.fast_table import FastTable
from bench import common
from tests.support.workload import build


async def until(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > deadline:
            return False
        await asyncio.sleep(0.001)
    return True


# What a terminal's bytes become: the key and its character.
CHARS = {"space": " ", "enter": "\r", "slash": "/", "question_mark": "?", "down": None}


async def timed(app: MonitorApp, key: str, effect: Callable[[], bool]) -> float:
    """Milliseconds from the key's arrival until its effect is in the widgets. The key
    enters where a terminal's keys do (the driver's message queue); pilot.press is not
    used for the timing: it also waits for the whole process to go idle."""
    event = events.Key(key, CHARS.get(key, key))
    event.set_sender(app)
    assert app._driver is not None
    t0 = time.perf_counter()
    app._driver.send_message(event)
    if not await until(effect):
        raise RuntimeError(f"{key}: no effect within 5 s")
    return (time.perf_counter() - t0) * 1e3


async def measure(app: MonitorApp, repeats: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one("#probes", FastTable)
        if not await until(lambda: len(table.rows) >= 200, 60):
            raise RuntimeError(f"only {len(table.rows)} probe rows")
        await pilot.pause(1.5)  # a refresh or two with every row in
        out["rows"] = [float(len(table.rows))]

        def state_is_not(key: str, state: str) -> Callable[[], bool]:
            return lambda: table.rows[key].cells["state"] != state

        def cursor_at(index: int) -> Callable[[], bool]:
            return lambda: table.cursor == index

        def sort_is_not(sort: tuple[str | None, bool]) -> Callable[[], bool]:
            # Rows are reordered in the same call that sets the sort.
            return lambda: (table.sort_key, table.sort_reverse) != sort

        def showing(screen: type, shown: bool = True) -> Callable[[], bool]:
            def check() -> bool:
                s = app.screen
                if not shown:
                    return not isinstance(s, screen)
                # Shown: the screen and every widget on it mounted (composed, styled).
                return isinstance(s, screen) and all(
                    w._is_mounted for w in s.walk_children(with_self=True)
                )

            return check

        def add(name: str, ms: float) -> None:
            out.setdefault(f"{name}_ms", []).append(ms)

        for _ in range(repeats):
            key = table.selected_key
            assert key is not None
            for name in ("space", "space_back"):  # off, then on again
                add(
                    name,
                    await timed(app, "space", state_is_not(key, table.rows[key].cells["state"])),
                )
            add("down", await timed(app, "down", cursor_at(table.cursor + 1)))
            for k in ("s", "S"):
                add(k, await timed(app, k, sort_is_not((table.sort_key, table.sort_reverse))))
            for k, screen in (
                ("enter", DetailScreen),
                ("slash", PromptScreen),
                ("question_mark", HelpScreen),
            ):
                add(k, await timed(app, k, showing(screen)))
                await pilot.press("escape")
                await until(showing(screen, False))
            await pilot.pause(0.3)
        await pilot.press("q")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    if os.geteuid() != 0:
        print("bench_tui_live_keys: needs root (eBPF)", file=sys.stderr)
        return 1
    binary = build(Path(tempfile.mkdtemp()))
    specs = [f"uprobe:{binary}:*_fn", "uprobe:c:get*", "uprobe:c:*printf*"]
    t0 = time.perf_counter()
    session = open_session(
        SessionOptions(Target(command=[str(binary), "forever", "300"]), ProbeSettings(specs))
    )
    assert session.child is not None and session.engine is not None
    session.child.release()
    try:
        session.engine.wait(300)
        attach_s = time.perf_counter() - t0
        rows = session.snapshot(with_hist=False).probes
        attached = sum(1 for r in rows if r.state == "attached")
        ticks = []
        for _ in range(20):
            t = time.perf_counter()
            session.snapshot(with_hist=False)
            ticks.append((time.perf_counter() - t) * 1e3)
        app = MonitorApp(LiveSource(session), interval=1.0)
        samples = asyncio.run(measure(app, args.repeats))
    finally:
        session.close()
        session.child.end()
    res: dict[str, float] = {
        "probe_rows": samples.pop("rows")[0],
        "attached": attached,
        "attach_all_s": attach_s,
        "snapshot_ms_median": statistics.median(ticks),
    }
    for k, v in samples.items():
        res[f"{k}_median"] = statistics.median(v)
        res[f"{k}_max"] = max(v)
    common.footer(res, args.json, width=26, spec="10.2f")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
