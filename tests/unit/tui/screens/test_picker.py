"""`a`, the add-probe picker, on what real targets hold: functions whose names repeat
(local functions of several files linked into one library, as OpenBLAS' `add_y`) and
C++ overloads; and a target whose symbols take long to read: the first matches show
while the rest are read, loading is said as loading, never as "none"."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from textual.app import App
from textual.widgets import Input, OptionList

from adaptyst_top.runtime.listing import Candidate, iter_candidates
from adaptyst_top.tui.screens.picker import AddProbeScreen

UNIT = """
static __attribute__((noinline)) int add_y(int y) {{ return y + {n}; }}
int entry_{n}(int y) {{ return add_y(y) * 2; }}
"""
OVERLOADS = """
__attribute__((noinline)) int scale(int x) { return 2 * x; }
__attribute__((noinline)) double scale(double x) { return 2 * x; }
extern "C" int entry_0(int); extern "C" int entry_1(int); extern "C" int entry_2(int);
int main(int argc, char **) { return scale(argc) + int(scale(1.5)) + entry_0(1) + entry_1(1) + entry_2(1); }
"""


def repeated_names(tmp_path: Path) -> Path:
    """A program whose three C files each have their own local add_y, plus C++ overloads."""
    objects = []
    for n in range(3):
        src = tmp_path / f"unit{n}.c"
        src.write_text(UNIT.format(n=n))
        subprocess.run(["gcc", "-O1", "-c", "-o", f"{src}.o", str(src)], check=True)
        objects.append(f"{src}.o")
    main = tmp_path / "main.cpp"
    main.write_text(OVERLOADS)
    binary = tmp_path / "repeats"
    subprocess.run(["g++", "-O1", "-o", str(binary), str(main), *objects], check=True)
    return binary


class Host(App[None]):
    def __init__(self, load: object) -> None:
        super().__init__()
        self.load = load
        self.picked: list[str | None] = []

    def on_mount(self) -> None:
        self.push_screen(AddProbeScreen(self.load), self.picked.append)  # type: ignore[arg-type]


def prompts(app: App[None]) -> list[str]:
    options = app.screen.query_one("#picker-list", OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_names_that_repeat_are_one_option_and_overloads_each_theirs(tmp_path: Path) -> None:
    binary = repeated_names(tmp_path)
    symbols = subprocess.run(["nm", str(binary)], capture_output=True, text=True).stdout
    assert symbols.count(" add_y") == 3  # the case that crashed the picker
    app = Host(lambda: iter_candidates([str(binary)], None, None))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.5)
        await pilot.press(*"add_y")
        await pilot.pause(0.2)
        assert prompts(app) == [f"{binary}:add_y"]
        app.screen.query_one("#picker-input", Input).value = ""
        await pilot.press(*"scale")
        await pilot.pause(0.2)
        assert sorted(prompts(app)) == [f"{binary}:scale(double)", f"{binary}:scale(int)"]
        await pilot.press("enter")
        await pilot.pause(0.1)
    assert app.picked and str(app.picked[0]).startswith(f"uprobe:{binary}:_Z5scale")


async def test_first_matches_show_while_the_rest_is_read() -> None:
    release = threading.Event()

    def slow() -> Iterator[Candidate]:
        for i in range(2000):
            yield Candidate(f"uprobe:/lib/big.so:fn_{i}", f"/lib/big.so:fn_{i}")
        release.wait(30)  # the rest of a library of 200,000 symbols, still being read
        yield Candidate("uprobe:/lib/big.so:malloc_hook", "/lib/big.so:malloc_hook")

    app = Host(slow)
    async with app.run_test(size=(100, 30)) as pilot:
        started = time.monotonic()
        await pilot.press(*"mall")
        while not prompts(app)[-1].startswith("reading the target's symbols… 2,000"):
            assert time.monotonic() - started < 2.0, prompts(app)
            await pilot.pause(0.05)
        assert prompts(app) == ["reading the target's symbols… 2,000 so far"]  # not "none"
        app.screen.query_one("#picker-input", Input).value = ""
        await pilot.press(*"fn_19")
        await pilot.pause(0.1)
        assert prompts(app)[:2] == ["/lib/big.so:fn_19", "/lib/big.so:fn_190"]
        app.screen.query_one("#picker-input", Input).value = ""
        await pilot.press(*"mall")
        release.set()
        deadline = time.monotonic() + 5
        while prompts(app) != ["/lib/big.so:malloc_hook"]:
            assert time.monotonic() < deadline, prompts(app)
            await pilot.pause(0.05)
        app.screen.query_one("#picker-input", Input).value = ""
        await pilot.press(*"nothing-like-it")
        await pilot.pause(0.1)
        assert prompts(app) == ["none of 2,001 symbols matches"]


async def test_names_that_read_as_markup_are_shown_as_they_are() -> None:
    """A symbol named `f[/b]` ended the monitor (Textual's MarkupError); one named
    `[@click=app.quit]x` made its line an action."""
    offered = [
        Candidate("uprobe:/lib/x.so:f[/b]", "/lib/x.so:f[/b]"),
        Candidate("uprobe:/lib/x.so:g", "/lib/x.so:[@click=app.quit]g"),
    ]
    app = Host(lambda: offered)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.5)
        assert prompts(app) == ["/lib/x.so:f[/b]", "/lib/x.so:[@click=app.quit]g"]
        await pilot.press("enter")
        await pilot.pause(0.1)
    assert app.picked == ["uprobe:/lib/x.so:f[/b]"]
