"""`--job ID` from a login node: one `ssh NODE adaptyst-top bridge` per node of the job (as
`--host` opens one, with the user's own SSH config, agent and keys), each asking that
node's agent for the job's processes there with the same probes, and one view of them all
(job_merge.py). Past the fan-out, a link reaches a relay on a group's first node, which
does the same for its group (job_tree.py, job_relay.py). Nothing listens on the network:
each node's agent is reached as the user, and decides as for a local client.

Each node has a thread of its own that connects, opens and asks for a snapshot when the
view asks for one; the view waits for the answers FRESH_WAIT_S at most, so a slow or lost
node never holds the others: it merges each node's latest, says how old it is, and a node
that cannot be reached is a row that says why, tried again with a growing pause (its
connection's own, once it had one)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from adaptyst_top.runtime.job_merge import merge_nodes, row_identity
from adaptyst_top.runtime.job_tree import TreeError, plan
from adaptyst_top.runtime.listing import Candidate
from adaptyst_top.runtime.node_ranks import ask_ranks
from adaptyst_top.runtime.remote.client import (
    AgentConnection,
    AgentInterrupted,
    AgentRefused,
    AgentUnavailable,
)
from adaptyst_top.runtime.remote.defaults import DEFAULT_SOCKET
from adaptyst_top.runtime.session_options import SessionOptions
from adaptyst_top.runtime.stop_flag import StopFlag
from adaptyst_top.snapshot import NodeState, ProbeRef, Snapshot
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.snapshot.parts import NodeStatus

# Nodes opened at once, first or again (each an ssh process while it connects).
OPEN_AT_ONCE = 32
MAX_RANKS_KEPT = 65536  # a node's processes' ranks kept (a node that makes pids up)
RANKS_AT_ONCE = 4096  # pids asked in one `bridge --ranks` (what it takes)
RETRY_FIRST_S, RETRY_MAX_S = 2.0, 30.0  # a node never reached: asked again after these
CLOSE_WAIT_S = 5.0  # a node's thread, told to stop, ends within this
FRESH_WAIT_S = 1.0  # the view waits this long for the nodes' answers, then shows the latest
# A node's snapshot waits this long for its new processes' ranks; one unanswered shows
# them by pid, and they are asked again, RANKS_TRIES times in all.
RANKS_HOLD_S, RANKS_TRIES = 2.5, 3
# A node whose latest answer is older than this is shown lost: 3 s, and its ranks' wait
# (its age counts from its answer's arrival), directly or through a relay alike.
LATE_S = 3.0 + RANKS_HOLD_S


class JobRefused(RuntimeError):
    """No node of the job would take the session (another user's job), in one line."""


@dataclass
class NodeLink:
    """One node's connection and its latest snapshot."""

    name: str
    members: tuple[str, ...] = ()  # a relay's group, on NAME (empty: NAME's agent itself)
    conn: AgentConnection | None = None
    last: Snapshot | None = None
    last_at: float | None = None  # time.monotonic() of `last`
    state: NodeStatus = "connecting"
    reason: str | None = None
    refused: bool = False  # its agent refused the session: not asked again
    retry_at: float = 0.0
    backoff: float = RETRY_FIRST_S
    lock: threading.Lock = field(default_factory=threading.Lock)
    want: threading.Event = field(default_factory=threading.Event)  # the view asks
    fresh: bool = False  # it answered since the view last asked
    ranks: dict[int, int | None] = field(default_factory=dict)  # its processes' (asked there)
    rank_tries: int = 0  # asks in a row with no answer
    opened_at: float = 0.0  # time.monotonic() of its session's open
    merged: Snapshot | None = None  # its snapshot the view merged last


class JobFanout:
    """The job's nodes (NODES), each opened with OPTS' probes, reached as OPTS'
    `job_fanout` says; a hub (snapshot, close) and the actions a live source asks of its
    remote (add, toggle, remove). FRESH_WAIT: how long a snapshot waits for the nodes;
    OPEN_WITHIN: seconds the first opens may take in all (a node later is unreachable)."""

    def __init__(
        self,
        job: str,
        nodes: Sequence[str],
        opts: SessionOptions,
        fresh_wait: float = FRESH_WAIT_S,
        open_within: float | None = None,
    ) -> None:
        try:
            reach = plan(nodes, opts.target.job_fanout)
        except TreeError as exc:
            raise JobRefused(f"job {job}: {exc}") from None
        self.job = job
        self.opts = opts
        self.fresh_wait = fresh_wait
        self.host = socket.gethostname().split(".")[0]
        self.links = [NodeLink(r.head, r.members) for r in reach]
        self.stop = StopFlag()
        self._started = time.monotonic()
        self._added: list[str] = []
        self._answered = threading.Condition()
        self.refused: list[str] = []  # what each node's kernel refused at the open
        self._opening = threading.BoundedSemaphore(OPEN_AT_ONCE)
        self._open_by = None if open_within is None else time.monotonic() + open_within
        pool = ThreadPoolExecutor(min(OPEN_AT_ONCE, len(self.links)) or 1)
        try:
            list(pool.map(self._open, self.links))
        except BaseException:  # a signal while opening: no bridge is left behind
            self.stop.set()  # the opens under way end now, those queued never start
            pool.shutdown(wait=False, cancel_futures=True)
            self.close()
            raise
        pool.shutdown()
        self._open_by = None  # the first opens' deadline, not the session's
        for link in self.links:
            if link.conn is not None:
                link.conn.give_up_at = None
        if all(link.refused for link in self.links):
            reasons = sorted({link.reason or "" for link in self.links})
            self.close()
            raise JobRefused(reasons[0] if len(reasons) == 1 else "; ".join(reasons))
        self._threads = [
            threading.Thread(
                target=self._follow, args=(link,), name=f"node-{link.name}", daemon=True
            )
            for link in self.links
        ]
        for t in self._threads:
            t.start()

    def _open(self, link: NodeLink) -> None:
        """LINK's connection and session, or its state saying why not."""
        with self._opening:
            if not self.stop.is_set():
                self._open_now(link)

    def _open_now(self, link: NodeLink) -> None:
        p = self.opts.probing
        relay = ("--job", self.job, "--nodes", ",".join(link.members)) if link.members else ()
        try:
            conn = AgentConnection(str(DEFAULT_SOCKET), link.name, self.stop, self._open_by, relay)
        except (AgentUnavailable, AgentInterrupted, OSError) as exc:
            self._failed(link, "unreachable", str(exc))
            return
        try:
            conn.open(
                None,
                list(p.specs),
                p.budget,
                p.enforce_budget,
                p.max_probes,
                None,
                self.job,
                p.profile_hz,
                True,
            )
        except AgentRefused as exc:
            conn.close()
            link.refused = True
            self._failed(link, "refused", str(exc))
            return
        except (AgentInterrupted, OSError, ValueError) as exc:
            conn.close()
            self._failed(link, "unreachable", str(exc))
            return
        for spec in list(self._added):  # added since: each on its own (one refused, others on)
            with contextlib.suppress(AgentRefused, AgentInterrupted, OSError, ValueError):
                conn.add(spec)
        with link.lock:
            link.conn, link.state, link.reason, link.backoff = conn, "ok", None, RETRY_FIRST_S
            link.opened_at = time.monotonic()
            # A relay's are named by its nodes already.
            self.refused += [r if link.members else f"{link.name}: {r}" for r in conn.refused]

    def _failed(self, link: NodeLink, state: NodeStatus, why: str) -> None:
        with link.lock:
            link.state, link.reason = state, inert(" ".join(why.split()))[:300]
            link.retry_at = time.monotonic() + link.backoff
            link.backoff = min(RETRY_MAX_S, link.backoff * 2)

    def _follow(self, link: NodeLink) -> None:
        """LINK's snapshot each time the view asks, until it closes."""
        while True:
            link.want.wait()
            link.want.clear()
            if self.stop.is_set():
                return
            try:
                self._ask(link)
            except Exception as exc:  # what a node sent that nothing foresaw: it, not the view
                self._failed(link, "lost", f"{type(exc).__name__}: {exc}")
            finally:
                with self._answered:
                    link.fresh = True
                    self._answered.notify_all()

    def _ask(self, link: NodeLink) -> None:
        if link.conn is None and not link.refused and time.monotonic() >= link.retry_at:
            self._open(link)
        if (conn := link.conn) is None:
            return
        snap = conn.snapshot(with_hist=True)
        at, lost = time.monotonic(), conn.lost
        if not link.members and lost is None:  # a relay names its nodes' ranks
            self._name_ranks(link, snap)
        with link.lock:  # the snapshot shown once its processes' ranks are known
            link.last, link.last_at = snap, at
            link.state = "ok" if lost is None else "ended" if lost.startswith("agent:") else "lost"
            link.reason = None if lost is None else inert(lost)[:300]

    def _name_ranks(self, link: NodeLink, snap: Snapshot) -> None:
        """The ranks of SNAP's processes LINK does not know yet, asked on its node: each
        process's before its first share or stack shows (export folds them by rank)."""
        seen = set(snap.target.pids) if snap.target is not None else set()
        seen |= {q.pid for p in snap.probes for q in p.parts}
        seen |= {s.pid for s in snap.profile.stacks} if snap.profile is not None else set()
        unnamed = seen - set(link.ranks)
        if not unnamed:
            return
        if len(link.ranks) + len(unnamed) > MAX_RANKS_KEPT:
            link.ranks.clear()
        asked = sorted(unnamed)[:RANKS_AT_ONCE]
        told = ask_ranks(link.name, asked, self.stop, RANKS_HOLD_S)
        if told is None:
            link.rank_tries += 1
            if link.rank_tries < RANKS_TRIES:
                return  # asked again with the next snapshot
            told = dict.fromkeys(asked)  # given up: by pid
        link.rank_tries = 0
        with link.lock:
            link.ranks.update(told)

    def snapshot(self, with_hist: bool = True) -> Snapshot:
        """Every node's latest (asked now, FRESH_WAIT_S given), merged at the run's clock."""
        with self._answered:
            for link in self.links:
                link.fresh = False
                link.want.set()
            self._answered.wait_for(lambda: all(x.fresh for x in self.links), self.fresh_wait)
        snap = self._merge(True)
        if not with_hist:
            snap = replace(snap, probes=tuple(replace(p, hist=None) for p in snap.probes))
        return snap

    def _merge(self, mark: bool) -> Snapshot:
        """The nodes' latest merged; MARK: their profile stacks counted as shown (a merge
        that is only looked at leaves them to the next snapshot)."""
        now = time.monotonic()
        snaps, states, ranks, fresh = {}, [], {}, set()
        for link in self.links:
            with link.lock:
                if link.last is not None and link.last is not link.merged:
                    fresh.add(link.name)  # its interval not in a merge before
                    if mark:
                        link.merged = link.last
                age = None if link.last_at is None else round(now - link.last_at, 3)
                if link.last is not None:
                    snaps[link.name] = link.last
                ranks[link.name] = dict(link.ranks)
                state, reason = link.state, link.reason
                # Open, its first answer on the way (its ranks asked first) for a while.
                age_or_open = age if age is not None else now - link.opened_at
                if state == "ok" and age_or_open > LATE_S:
                    state, reason = "lost", f"no answer for {age_or_open:.0f} s"
                elif state == "ok" and age is None:
                    state = "connecting"
                if link.members:
                    states += relayed_states(link, state, reason, age)
                else:
                    states.append(NodeState(link.name, state, reason, age))
        t = round(now - self._started, 3)
        relayed = {link.name for link in self.links if link.members}
        return merge_nodes(t, self.host, self.job, snaps, states, ranks, fresh, relayed)

    # What a live source asks of its remote: each node's own session does it.
    def add(self, spec: str) -> None:
        """SPEC on every node that answers; kept (for nodes that come back) unless every
        node that answered refused it: AgentRefused then, with the first one's reason."""
        why: list[str] = []
        took = False
        for link in self.links:
            if (conn := link.conn) is None:
                continue
            try:
                conn.add(spec)
                took = True
            except AgentRefused as exc:
                why.append(f"{link.name}: {exc}")
            except Exception as exc:  # that node's link, not the others': it is lost
                self._failed(link, "lost", f"{type(exc).__name__}: {exc}")
        if took or not why:
            self._added.append(spec)
        else:
            raise AgentRefused(why[0])

    def toggle(self, ref: ProbeRef) -> bool:
        """The row REF names, on every node (each numbers its rows its own way)."""
        on = [False]

        def one(conn: AgentConnection, ref_there: ProbeRef) -> None:
            on[0] = conn.toggle(ref_there) or on[0]

        self._each_row(ref, one)
        return on[0]

    def remove(self, ref: ProbeRef) -> str:
        spec = [""]

        def one(conn: AgentConnection, ref_there: ProbeRef) -> None:
            spec[0] = conn.remove(ref_there)

        self._each_row(ref, one)
        if spec[0] in self._added:
            self._added.remove(spec[0])
        return spec[0]

    def candidates(self) -> list[Candidate]:
        return []  # the picker lists one process's functions: type a spec instead

    def profile(self, pid: int, hz: int) -> None:
        raise AgentRefused("a job's nodes are profiled with --profile when it opens")

    @property
    def give_up_at(self) -> float | None:
        return None

    @give_up_at.setter
    def give_up_at(self, when: float | None) -> None:
        """No node's answer is waited for past WHEN (record's --duration)."""
        for link in self.links:
            if link.conn is not None:
                link.conn.give_up_at = when

    def _each_row(self, ref: ProbeRef, fn: Callable[[AgentConnection, ProbeRef], None]) -> None:
        """FN(conn, the row's ref there) on each node that has the row REF names here;
        AgentRefused with the first refusal where no node did it."""
        row = next((p for p in self._merge(False).probes if p.ref == ref), None)
        if row is None:
            return
        refused: list[AgentRefused] = []
        done = False
        for link in self.links:
            with link.lock:
                conn, last = link.conn, link.last
            if conn is None or last is None:
                continue
            there = next((p for p in last.probes if row_identity(p) == row_identity(row)), None)
            if there is None:
                continue
            try:
                fn(conn, there.ref)
                done = True
            except AgentRefused as exc:  # that node keeps its row as it was
                refused.append(exc)
            except Exception as exc:  # that node's link, not the others': it is lost
                self._failed(link, "lost", f"{type(exc).__name__}: {exc}")
        if refused and not done:
            raise refused[0]

    def close(self) -> None:
        self.stop.set()  # every wait of every node's ends now
        for link in self.links:
            link.want.set()
        deadline = time.monotonic() + CLOSE_WAIT_S
        for t in getattr(self, "_threads", ()):
            t.join(max(0.0, deadline - time.monotonic()))
        conns = [link.conn for link in self.links if link.conn is not None]
        if conns:  # each ends its ssh (a TERM, then a KILL after 2 s): side by side
            with ThreadPoolExecutor(min(OPEN_AT_ONCE, len(conns))) as pool:
                list(pool.map(lambda c: c.close(), conns))


def relayed_states(
    link: NodeLink, state: NodeStatus, reason: str | None, age: float | None
) -> list[NodeState]:
    """The states of the nodes a relay LINK reaches: as its latest answer says them,
    their ages counted to here, while the link itself is well; else the link's, each."""
    told = {n.name: n for n in link.last.nodes} if link.last is not None and state == "ok" else {}
    out = []
    for name in link.members:
        n = told.get(name)
        if n is None:
            why = f"through {link.name}: {reason}" if reason else None
            out.append(NodeState(name, state if state != "ok" else "connecting", why, age))
            continue
        later = None if n.age_s is None else round(max(0.0, n.age_s) + (age or 0.0), 3)
        state_there, why = n.state, inert(n.reason)[:300] if n.reason else None
        if state_there == "ok" and later is not None and later > LATE_S:
            state_there, why = "lost", f"no answer for {later:.0f} s"  # as if direct
        out.append(NodeState(name, state_there, why, later))
    return out
