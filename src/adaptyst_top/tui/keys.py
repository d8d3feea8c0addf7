"""Every key of the main screen, declared once: the app's bindings (their order is the
footer's) and the help's lines are both made from this table."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Key:
    shown: str  # as the help writes it
    help: str
    bindings: tuple[Binding, ...] = ()  # none: Textual's own (tab, the palette)


def _b(key: str, action: str, label: str, show: bool = True) -> Binding:
    return Binding(key, action, label, show=show)


KEYS: tuple[Key, ...] = (
    Key("q", "quit (probes detach; nothing is left in the kernel)", (_b("q", "quit", "Quit"),)),
    Key("?", "this help", (_b("question_mark", "help", "Help"),)),
    Key(
        "space",
        "switch the selected probe on/off (a map write; no recompilation)",
        (_b("space", "toggle_probe", "On/off"),),
    ),
    Key(
        "a",
        "add probes: pick from the target's functions and USDT probes, or type a spec",
        (_b("a", "add_probe", "Add"),),
    ),
    Key("d", "remove the selected probe's spec", (_b("d", "remove_probe", "Remove"),)),
    Key(
        "enter",
        "probe detail: latency histogram, percentiles, rate and p99 over time",
        (_b("enter", "detail", "Detail"),),
    ),
    Key(
        "e",
        "power and energy of each device over the session (a plot)",
        (_b("e", "power", "Power", show=False),),
    ),
    Key(
        "f",
        "the sampled profile (--profile): hot functions, flame graph; / finds one, u times it",
        (_b("f", "profile", "Profile"),),
    ),
    Key(
        "l",
        "the process list, by CPU: enter profiles the selected process",
        (_b("l", "processes", "Processes", show=False),),
    ),
    Key("/", "filter probe rows (substring; empty to clear)", (_b("slash", "filter", "Filter"),)),
    Key(
        "s / S",
        "sort by the next column / reverse the order",
        (_b("s", "sort", "Sort"), _b("S", "sort_reverse", "Reverse", show=False)),
    ),
    Key(
        "R",
        "a job's probe rows (--job, --ranks): merged with their imbalance / per rank / per node",
        (_b("R", "rank_view", "Ranks", show=False),),
    ),
    Key("p", "pause / resume the display", (_b("p", "pause", "Pause"),)),
    Key(
        "+ / -",
        "refresh slower / faster",
        (
            _b("plus,equals_sign", "interval(2)", "Slower", show=False),
            _b("minus", "interval(0.5)", "Faster", show=False),
        ),
    ),
    Key("m", "apply the selected advice", (_b("m", "apply_advice", "Apply", show=False),)),
    Key(
        "M",
        "advisor: switch between suggest and auto",
        (_b("M", "advisor_mode", "Auto/suggest", show=False),),
    ),
    Key("tab", "move between panes"),
    Key(
        "< / >",
        "replay: slower / faster",
        (
            _b("less_than_sign", "speed(0.5)", "Replay slower", show=False),
            _b("greater_than_sign", "speed(2)", "Replay faster", show=False),
        ),
    ),
    Key(".", "replay: one snapshot (while paused)", (_b("full_stop", "step", "Step", show=False),)),
    Key("ctrl+p", "command palette"),
)

BINDINGS: tuple[Binding, ...] = tuple(b for k in KEYS for b in k.bindings)
