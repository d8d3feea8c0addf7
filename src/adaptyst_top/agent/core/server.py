"""The node agent: one privileged service per node; unprivileged users probe their own
processes through it (`adaptyst-top agent`, run by systemd as root).

Each connection is one client: the kernel says who it is (SO_PEERCRED), and every
request is checked against that (agent/core/authorization.py); nothing a client says about
itself is believed. A client's probes are its own engine's, attached to the processes
it may probe only (pid-scoped uprobes: no other process takes a trap for them), and
they go when the connection goes (a client killed with SIGKILL included). A guard
checks every live session again four times a second: a process that stopped being the
user's (a setuid exec) ends its probes.

A thread per client once it says hello (agent/core/lobby.py holds it until then): a
slow or stalled client blocks only its own thread (dropped when a send has waited
SEND_TIMEOUT_S). What one user may hold is bounded by the settings (runtime/
remote/settings.py): connections (root and the admin group have room of their own),
attach points, modules and keyed probes across their sessions; a connection that says
no hello, or stops asking, is closed; users take turns at the compiler.
"""

from __future__ import annotations

import contextlib
import grp
import socket
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from adaptyst_top.agent.core import profiling
from adaptyst_top.agent.core.authorization import (
    EXEC_SETTLE_S,
    Peer,
    hold_and_check,
    job_refusal,
    may_probe,
    peer_of,
    pin_file,
    spec_refusal,
    still_theirs,
    tenant_of,
)
from adaptyst_top.agent.core.bounds import crowded, profiles_running, room_refusal
from adaptyst_top.agent.core.client import Client, end_locked, read_message, snapshot_answer
from adaptyst_top.agent.core.kept_workers import end_all, reap_idle
from adaptyst_top.agent.core.listen import AgentError, listen, watch_hangup
from adaptyst_top.agent.core.listing import candidates_for, list_for
from adaptyst_top.agent.core.lobby import (
    FULL_PAUSE_S,
    ByDeadline,
    Lobby,
    Sorted,
    accept_some,
    hung_up,
    turn_away,
)
from adaptyst_top.agent.core.parser import reader_for
from adaptyst_top.agent.core.warm import warm_workers
from adaptyst_top.agent.exporter.collector import ProbeSource
from adaptyst_top.collectors.energy.user_view import OwnEnergy
from adaptyst_top.collectors.probes.engine.attach_account import AttachAccount
from adaptyst_top.collectors.probes.engine.uprobe_multi import kernel_refusals
from adaptyst_top.runtime.remote import defaults as agent_defaults
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.remote.settings import AgentSettings
from adaptyst_top.runtime.session import Session, SessionError, open_session
from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target
from adaptyst_top.runtime.sources import ActionError, LiveSource
from adaptyst_top.runtime.stop_flag import StopFlag
from adaptyst_top.snapshot import ProbeRef
from adaptyst_top.system import heap
from adaptyst_top.system.pid_namespaces import PidNamespaceError, in_agents_namespace
from adaptyst_top.system.pinned_files import PinnedFiles
from adaptyst_top.system.readable import readable
from adaptyst_top.system.sd_notify import Notifier

DEFAULT_SOCKET = agent_defaults.DEFAULT_SOCKET
SEND_TIMEOUT_S = 10.0
GUARD_PERIOD_S = 0.25
# The wait for a client ends this often: a signal the kernel hands another thread does not
# interrupt accept() in the main thread (a SIGTERM was seen lost for a minute).
ACCEPT_WAKE_S = 2.0


class Agent:
    def __init__(
        self,
        path: Path = DEFAULT_SOCKET,
        admin_gid: int | None = None,
        settings: AgentSettings | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.path = path
        self.notifier = notifier or Notifier({})
        heap.bound_arenas()
        self.admin_gid = admin_gid
        self.settings = settings or AgentSettings()
        self.exports_probes = False  # set when an exporter reads the sessions
        try:
            self.energy_gids = frozenset(
                grp.getgrnam(g).gr_gid for g in self.settings.energy_groups
            )
        except KeyError as exc:
            raise AgentError(f"energy_groups: {exc.args[0]}") from None
        self.clients: list[Client] = []
        self._accounts: dict[int, AttachAccount] = {}  # per user, across their sessions
        self._lock = threading.Lock()
        self._stop = StopFlag()  # set from a signal handler: no lock (stop_flag.py)
        self.sock = listen(path)
        self.lobby: Lobby[Client] = Lobby()
        self._full_until = 0.0  # out of descriptors: accepting pauses until then

    def serve_forever(self) -> None:
        guard = threading.Thread(target=self._guard, name="agent-guard", daemon=True)
        guard.start()
        self.sock.setblocking(False)  # poll() waits; accept() drains what is queued
        self.notifier.ready()
        wake_s = self.notifier.wake_s(ACCEPT_WAKE_S)
        while not self._stop.is_set():
            # Fed only while this loop and the guard run: a stopped (SIGSTOP) or wedged
            # agent goes unfed, and systemd restarts it.
            if guard.is_alive():
                self.notifier.feed()
            # A stop wakes this at once (its pipe); back here, a signal's handler runs.
            listening = self.sock.fileno()
            if listening < 0:  # closed by stop()
                break
            stop = self._stop.fileno()
            paused = time.monotonic() < self._full_until
            door = [] if paused else [listening]
            wait_s = self.lobby.wait_s(FULL_PAUSE_S if paused else wake_s)
            ready = readable([*door, stop, *self.lobby.fds()], wait_s)
            if listening in ready and not accept_some(self.sock, self._admit):
                self._full_until = time.monotonic() + FULL_PAUSE_S
            self._let_in(self.lobby.sort(ready))

    def _admit(self, conn: socket.socket) -> None:
        """CONN to the lobby until it says hello, or a one-line reason and a close when
        its user, or every user, has all the connections they may have."""
        if hung_up(conn):  # connected and closed at once: nothing to answer
            conn.close()
            return
        try:
            peer = peer_of(conn, self.admin_gid)
        except OSError:
            conn.close()
            return
        client = Client(peer, conn)
        if not peer.privileged and not peer.groups & self.energy_gids:
            client.energy = OwnEnergy(self.settings.user_energy_period_s)
        with self._lock:
            why = crowded(peer, [c.peer for c in self.clients], self.settings)
            if why is None:
                self.clients.append(client)
        if why is not None:
            turn_away(conn, why)
            return
        self.lobby.add(conn, client, self.settings.hello_timeout_s)

    def _let_in(self, found: Sorted[Client]) -> None:
        """A thread for each client that spoke; the others' places given back."""
        unserved = []
        for client, hello_by in found.spoke:
            try:
                threading.Thread(target=self._serve, args=(client, hello_by), daemon=True).start()
            except RuntimeError:  # no thread to be had (a task or memory limit)
                unserved.append(client)
        for client in found.gone + found.late + unserved:
            with self._lock:
                self.clients.remove(client)
            if client in found.gone:
                client.conn.close()
            elif client in found.late:
                turn_away(client.conn, f"no hello in {self.settings.hello_timeout_s:g} s")
            else:
                turn_away(client.conn, "the agent is busy: try later")

    def request_stop(self) -> None:
        """Safe in a signal handler: a flag and a byte to a pipe; no lock taken, no
        thread started (a handler that started one could land while the main thread
        starts a client's, and wait for ever on threading's lock). The main thread
        leaves serve_forever() at once and stops the rest."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self.notifier.stopping()
        end_all()  # the users' openers
        self.lobby.close_all()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        with self._lock:
            clients = list(self.clients)
        for c in clients:
            with contextlib.suppress(OSError):
                c.conn.shutdown(socket.SHUT_RDWR)
            end_locked(c)  # a client's thread may be closing it too
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _serve(self, client: Client, hello_by: float) -> None:
        try:
            self._serve_one(client, hello_by)
        except Exception as exc:  # one client's fault ends that client only
            # Its session was closed on the way out; the agent and the others go on.
            print(f"adaptyst-top agent: a client ended on {exc!r}", file=sys.stderr)
            with contextlib.suppress(OSError):
                client.conn.close()

    def _serve_one(self, client: Client, hello_by: float) -> None:
        conn = client.conn
        # The hello by the deadline the lobby started (a byte at a time included).
        reader = proto.LineReader(ByDeadline(conn, hello_by), proto.MAX_LINE)
        hello_s, idle_s = self.settings.hello_timeout_s, self.settings.idle_timeout_s
        try:
            hello = read_message(reader, f"no hello in {hello_s:g} s")
            if hello is None:
                return
            reader.sock = conn
            proto.check_version(hello, "client")
            self._send(client, proto.encode("hello", uid=client.peer.uid))
            warm_workers(client.peer)  # her first request's workers start meanwhile
            while True:
                conn.settimeout(idle_s)
                msg = read_message(reader, f"no request in {idle_s:g} s: closed")
                if msg is None:
                    break
                self._send(client, self._answer(client, msg))
        except proto.ProtocolError as exc:
            with contextlib.suppress(OSError):
                self._send(client, proto.encode("error", message=str(exc)))
        except OSError:
            pass  # gone, or stalled past the send timeout
        finally:
            with self._lock:
                self.clients.remove(client)
            end_locked(client)
            with contextlib.suppress(OSError):
                conn.close()

    def _send(self, client: Client, data: bytes) -> None:
        client.conn.settimeout(SEND_TIMEOUT_S)
        try:
            client.conn.sendall(data)
        finally:
            client.conn.settimeout(None)

    def _answer(self, client: Client, msg: dict[str, Any]) -> bytes:
        kind = msg["type"]
        if kind not in proto.REQUESTS:
            raise proto.ProtocolError(f"unknown request {kind!r}")
        # Every field checked first: a malformed request closes the connection, whatever
        # state the session is in.
        ref = ProbeRef(*proto.ref_field(msg)) if kind in ("toggle", "remove") else None
        spec = proto.field(msg, "spec", str) if kind == "add" else ""
        with_hist = bool(proto.field(msg, "with_hist", bool, optional=True))
        try:
            if kind == "open":
                return self._open(client, msg)
            if kind == "list":
                return list_for(client.peer, msg)
            if kind == "profile":
                room = partial(self._check_room, client.peer, [], 1)  # a sampler: a module
                return profiling.profile_request(client, msg, self._node_pid, room)
            with client.lock:
                if client.session is None or client.revoked:
                    raise ActionError(client.revoked or "open a session first")
                source = LiveSource(client.session)
                if kind == "snapshot":
                    return snapshot_answer(client, source, with_hist)
                if kind in ("add", "candidates"):  # they read the process as it is now
                    pid = client.session.pid
                    if why := profiling.node_wide_refusal(client) or still_theirs(
                        client.peer, client.target, pid
                    ):
                        raise ActionError(why)
                if kind == "add":
                    s = client.session
                    if why := spec_refusal(client.peer, spec, s.pid, s.options.tenant.pinned):
                        raise SessionError(why)
                    self._check_room(client.peer, [spec], by_process=s.options.probing.by_process)
                    source.add(spec)
                    return proto.encode("ok")
                if kind == "candidates":
                    found = (
                        source.candidates()
                        if client.peer.privileged
                        else candidates_for(client.peer, client.session.pid)
                    )
                    return proto.encode(
                        "ok",
                        specs=[c.spec for c in found],
                        candidates=[c.to_json() for c in found],
                    )
                assert ref is not None
                if kind == "toggle":
                    return proto.encode("ok", on=source.toggle(ref))
                return proto.encode("ok", spec=source.remove(ref))
        except (ActionError, SessionError) as exc:
            return proto.encode("error", message=str(exc))
        except OSError as exc:  # what the request read (a /proc file), not the client's socket
            why = f"{kind}: {exc.strerror or exc}: {exc.filename or ''}"
            print(f"adaptyst-top agent: uid {client.peer.uid}: {why}", file=sys.stderr)
            return proto.encode("error", message=why)

    @staticmethod
    def _node_pid(peer: Peer, pid: int) -> int:
        """PID, named in the client's PID namespace, as the agent's."""
        try:
            return in_agents_namespace(peer.pid, pid)
        except PidNamespaceError as exc:
            raise SessionError(str(exc)) from None

    def _open(self, client: Client, msg: dict[str, Any]) -> bytes:
        asked = proto.open_request(msg)
        pid, job, probes, profile_hz = asked.pid, asked.job, asked.probes, asked.profile_hz
        command_path = asked.command_path
        by_process = job is not None or asked.ranks
        peer = client.peer
        if client.session is not None or client.revoked:  # a revoked one opens none again
            raise SessionError(client.revoked or "a session is open already on this connection")
        if job is not None:
            if why := job_refusal(peer, job):
                raise SessionError(why)
        elif pid is None and not peer.privileged and (probes or profile_hz is not None):
            raise SessionError(profiling.NODE_WIDE)
        if pid is not None:
            pid = self._node_pid(peer, pid)
        if pid is not None and (why := hold_and_check(peer, client.target, pid)):
            raise SessionError(why)
        # Their files opened and parsed as them.
        pinned = None if peer.privileged else PinnedFiles(reader_for(peer))
        try:
            for spec in probes:
                if why := spec_refusal(peer, spec, pid, pinned):
                    raise SessionError(why)
            self._check_room(peer, probes, 1 if profile_hz is not None else 0, by_process)
            if command_path is not None and (why := pin_file(peer, command_path, None, pinned)):
                raise SessionError(why)
            session = self._start(
                client,
                SessionOptions(
                    Target(pid=pid, job=job, command_path=command_path),
                    ProbeSettings(
                        probes,
                        asked.budget,
                        asked.enforce_budget,
                        asked.max_probes,
                        power_model=self.settings.power_model,
                        profile_hz=profile_hz,
                        by_process=by_process,
                    ),
                    tenant=tenant_of(
                        peer, pinned, None if peer.privileged else self._account(peer)
                    ),
                ),
            )
        except BaseException:
            if pinned is not None and not pinned.handed_over:
                pinned.close()
            raise
        with client.lock:
            client.session = session
        # Probes the kernel refused (another tool's there): the client says so and stops.
        refused = [] if session.engine is None else kernel_refusals(session.engine.rows.values())
        return proto.encode("ok", refused=refused) if refused else proto.encode("ok")

    def _start(self, client: Client, opts: SessionOptions) -> Session:
        done = threading.Event()
        threading.Thread(
            target=watch_hangup, args=(client.conn, opts.cancel, done), daemon=True
        ).start()
        try:
            session = open_session(opts)
        finally:
            done.set()
        # The PID could have changed hands while the probes attached: asked again.
        if opts.target.pid is not None and (why := may_probe(client.peer, opts.target.pid)):
            session.close()
            raise SessionError(why)
        session.exported = self.exports_probes
        return session

    def _account(self, peer: Peer) -> AttachAccount:
        with self._lock:
            return self._accounts.setdefault(
                peer.uid, AttachAccount(self.settings.max_attach_per_user)
            )

    def _check_room(
        self, peer: Peer, specs: list[str], profiles: int = 0, by_process: bool = False
    ) -> None:
        running = profiles_running([c.session for c in list(self.clients)]) if profiles else 0
        account, room = self._account(peer), (profiles, running, by_process)
        if not peer.privileged and (
            why := room_refusal(peer, account, specs, self.settings, *room)
        ):
            raise SessionError(why)

    def probe_sources(self) -> list[ProbeSource]:
        """Each client's probes as they were last read, with whose and which job."""
        with self._lock:
            live = [(c.peer.who, c.session) for c in self.clients if c.session is not None]
        return [p for who, s in live if (p := ProbeSource.of(who, s)) is not None]

    def _guard(self) -> None:
        """Probes end as soon as their process is no longer the user's to probe."""
        while not self._stop.wait(GUARD_PERIOD_S):
            reap_idle()  # users' workers that exited idle
            with self._lock:
                clients = list(self.clients)
            for c in clients:
                s = c.session
                if s is None or c.peer.privileged:
                    continue
                if s.engine is not None:  # the processes that joined: each one alone
                    # An engine stuck in its user's memory is passed over, not waited on.
                    for p in s.engine.scope_pids_within(GUARD_PERIOD_S) or ():
                        why = may_probe(c.peer, p, EXEC_SETTLE_S)
                        if p != s.pid and why is not None and "no such process" not in why:
                            s.engine.unfollow(p, why)
                            if s.profiler is not None:  # confined in the kernel too
                                s.profiler.drop(p)
                if s.pid is None:
                    continue
                why = may_probe(c.peer, s.pid, EXEC_SETTLE_S)
                if why is not None and "no such process" not in why and not c.revoked:
                    # Closed on a thread of its own: a close may wait (the client's lock,
                    # its profile's threads); this one guards every user's sessions.
                    c.revoked = f"probes ended: {why}"
                    try:
                        threading.Thread(target=end_locked, args=(c,), daemon=True).start()
                    except RuntimeError:  # no thread to be had: here, then
                        end_locked(c)
