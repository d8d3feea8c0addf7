"""What the profile screen shows, apart from Textual: the stacks of every snapshot summed,
the hottest functions sorted three ways, and an icicle graph of one thread or all,
laid out for a width, with a selected frame to move and zoom."""

from __future__ import annotations

import glob
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from adaptyst_top.collectors.probes.cost.budget import share_text
from adaptyst_top.snapshot import ProfileFunction, Snapshot
from adaptyst_top.snapshot.profile import PYTHON


def probe_spec(f: ProfileFunction) -> str | None:
    """The spec that times F exactly: a Python function's calls, a native one's uprobe
    (None: no symbol, or no file, to attach to)."""
    if f.named_by == PYTHON and f.module.endswith(".py") and "\t" not in f.module:
        return f"python:{glob.escape(f.module)}:{f.name}"
    if not f.symbol or not f.module.startswith("/"):
        return None
    return f"uprobe:{f.module}:{f.symbol}"


SORTS = ("self", "total", "off")  # what `s` cycles through; self first: what to probe
# The interpreter's own file (libpython3.X.so, python3.X): its C beneath a Python frame is
# that frame's work (py-spy's "own" time), in the list's self column.
_INTERPRETER = re.compile(r"/(?:lib)?python3\.\d+[a-z]*(?:\.so[.0-9]*)?$")
MAX_STACKS = 20000  # distinct (thread, stack) pairs kept; the rest count as [other]
OTHER = ("[other]",)
MAX_VALUE = 1e18


@dataclass
class Node:
    name: str
    value: float = 0.0
    children: dict[str, Node] = field(default_factory=dict)
    parent: Node | None = None

    @property
    def path(self) -> tuple[str, ...]:
        out: list[str] = []
        n: Node | None = self
        while n is not None and n.parent is not None:
            out.append(n.name)
            n = n.parent
        return tuple(reversed(out))


@dataclass(frozen=True)
class Box:
    node: Node
    depth: int
    x: int
    width: int


class ProfileView:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Empty (another process is profiled from now on)."""
        self.stacks: dict[tuple[int, int, tuple[str, ...]], list[float]] = {}
        self.functions: tuple[ProfileFunction, ...] = ()
        self.samples = 0
        self.hz = 0
        self.sort = SORTS[0]
        self.threads: list[tuple[int, int]] = []  # (pid, tid) seen, in order
        self.thread: tuple[int, int] | None = None  # None: every thread
        self.off = False  # the graph of off-CPU ns instead of on-CPU samples
        self.zoom: tuple[str, ...] = ()
        self.selected: tuple[str, ...] = ()
        self._last: tuple[float, float] | None = None  # (t, cpu_s) of the last snapshot
        self.tool_share: float | None = None  # the tool's unwinding, share of a core
        self.sample_ns: float | None = None
        self.asked_hz = 0  # the rate asked, when the budget lowered it
        self.share: float | None = None  # the profile's cost, a share of the target's CPU
        self.note = ""
        self._own: dict[str, float] | None = None  # self_of's, until the next snapshot

    def add(self, snap: Snapshot) -> None:
        p = snap.profile
        if p is None:
            return
        self.functions, self.samples, self.hz = p.functions, p.samples, p.hz
        if self._last is not None and snap.t > self._last[0]:
            self.tool_share = max(0.0, p.cpu_s - self._last[1]) / (snap.t - self._last[0])
        self._last = (snap.t, p.cpu_s)
        self.sample_ns = p.sample_ns
        self.asked_hz, self.share, self.note = p.asked_hz, p.share, p.note
        self._own = None
        for s in p.stacks:
            key = (s.pid, s.tid, s.frames)
            v = self.stacks.get(key)
            if v is None:
                if len(self.stacks) >= MAX_STACKS:
                    key = (s.pid, s.tid, OTHER)
                    v = self.stacks.setdefault(key, [0.0, 0.0])
                else:
                    v = self.stacks[key] = [0.0, 0.0]
                if (s.pid, s.tid) not in self.threads:
                    self.threads.append((s.pid, s.tid))
            # A recording's figures are finite one by one; their sums are held so too.
            v[0] = min(MAX_VALUE, v[0] + s.samples)
            v[1] = min(MAX_VALUE, v[1] + s.off_ns + s.runnable_ns)

    def cost_text(self) -> str:
        """What the profile costs, for the header: the tool's CPU, the kernel's a sample."""
        if not self.hz:
            return ""
        lowered = f" (asked {self.asked_hz})" if self.asked_hz else ""
        parts = [f"profile {self.hz} Hz{lowered}"]
        if self.share is not None:
            parts.append(f"{share_text(self.share)} of target CPU")
        if self.tool_share is not None:
            parts.append(f"unwinding {self.tool_share:.1%} of a core")
        if self.sample_ns is not None:
            parts.append(f"{self.sample_ns / 1000:.1f} µs a sample in the kernel")
        return ", ".join(parts)

    def self_of(self, f: ProfileFunction) -> float:
        """F's samples as the leaf, where the interpreter's C beneath a Python function
        counts as the Python function's (and not as the C function's)."""
        if self._own is None:
            self._own = self._python_own()
        return max(0.0, f.self_samples + self._own.get(f.name, 0.0))

    def _python_own(self) -> dict[str, float]:
        """What moves, by name: + to the innermost Python frame over interpreter C
        leaves, - from those leaves."""
        python = {f.name for f in self.functions if f.named_by == PYTHON}
        interpreter = {
            f.name
            for f in self.functions
            if f.named_by != PYTHON and _INTERPRETER.search(f.module) and f.name not in python
        }
        moved: dict[str, float] = {}
        if not python:
            return moved
        for (_, _, frames), v in self.stacks.items():
            j = len(frames) - 1
            while j >= 0 and frames[j] in interpreter:
                j -= 1
            if 0 <= j < len(frames) - 1 and frames[j] in python:
                moved[frames[j]] = moved.get(frames[j], 0.0) + v[0]
                moved[frames[-1]] = moved.get(frames[-1], 0.0) - v[0]
        return moved

    def sorted_functions(self) -> list[ProfileFunction]:
        """By the sort, those `u` can time first: a newcomer's list began with frames no
        probe can attach to ([unknown], a stripped library's)."""

        def key(f: ProfileFunction) -> tuple[bool, float, str]:
            v = {"total": f.total, "self": self.self_of(f), "off": f.off_ns}[self.sort]
            return (probe_spec(f) is None, -v, f.name)

        return sorted(self.functions, key=key)

    def next_sort(self) -> str:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        return self.sort

    def next_thread(self) -> str:
        """Every thread, then each in turn."""
        order: list[tuple[int, int] | None] = [None, *self.threads]
        self.thread = order[(order.index(self.thread) + 1) % len(order)]
        self.zoom = self.selected = ()
        if self.thread is None:
            return "every thread"
        return f"PID {self.thread[0]}, thread {self.thread[1]}"

    def tree(self) -> Node:
        root = Node("all")
        which = 1 if self.off else 0
        for (pid, tid, frames), v in self.stacks.items():
            if self.thread is not None and (pid, tid) != self.thread:
                continue
            value = v[which]
            if value <= 0:
                continue
            root.value += value
            node = root
            for name in frames:
                child = node.children.get(name)
                if child is None:
                    child = node.children[name] = Node(name, parent=node)
                child.value += value
                node = child
        return root

    def find(self, root: Node, path: tuple[str, ...]) -> Node | None:
        node = root
        for name in path:
            nxt = node.children.get(name)
            if nxt is None:
                return None
            node = nxt
        return node

    def layout(self, width: int, rows: int) -> list[Box]:
        """The zoomed node's icicle: a box per frame at least a cell wide, depth first
        from the zoomed frame down, ROWS levels at most."""
        root = self.tree()
        top = self.find(root, self.zoom) or root
        if top is root:
            self.zoom = ()
        boxes: list[Box] = []

        def place(node: Node, depth: int, x: int, w: int) -> None:
            boxes.append(Box(node, depth, x, w))
            if depth + 1 >= rows:
                return
            cx = x
            for child in sorted(node.children.values(), key=lambda n: (-n.value, n.name)):
                cw = int(w * child.value / node.value) if node.value else 0
                if cw < 1:
                    break
                place(child, depth + 1, cx, cw)
                cx += cw

        if top.value > 0:
            place(top, 0, 0, width)
        inside = self.selected[: len(self.zoom)] == self.zoom
        if self.find(root, self.selected) is None or not inside:
            self.selected = self.zoom
        return boxes

    def move(self, boxes: Iterable[Box], direction: str) -> None:
        """up: the caller; down: the heaviest callee; left/right: the box beside it."""
        placed = list(boxes)
        here = next((b for b in placed if b.node.path == self.selected), None)
        if here is None:
            return
        if direction == "up" and len(self.selected) > len(self.zoom):
            self.selected = self.selected[:-1]
        elif direction == "down":
            below = [b for b in placed if b.depth == here.depth + 1 and b.node.parent is here.node]
            if below:
                self.selected = below[0].node.path
        elif direction in ("left", "right"):
            row = sorted((b for b in placed if b.depth == here.depth), key=lambda b: b.x)
            i = next(i for i, b in enumerate(row) if b is here)
            j = i + (1 if direction == "right" else -1)
            if 0 <= j < len(row):
                self.selected = row[j].node.path

    def zoom_in(self) -> None:
        self.zoom = self.selected

    def zoom_out(self) -> bool:
        """False when already at the top."""
        if not self.zoom:
            return False
        self.zoom = self.zoom[:-1]
        return True

    def function_named(self, name: str) -> ProfileFunction | None:
        return next((f for f in self.functions if f.name == name), None)
