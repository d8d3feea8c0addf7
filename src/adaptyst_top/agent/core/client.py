"""One connection to the agent: who it is (the kernel's word), its session, and the end
of both."""

from __future__ import annotations

import dataclasses
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.agent.core.authorization import Peer
from adaptyst_top.collectors.energy.gpu_processes import visible_to
from adaptyst_top.collectors.energy.user_view import OwnEnergy
from adaptyst_top.runtime.remote import protocol as proto
from adaptyst_top.runtime.session import Session
from adaptyst_top.runtime.sources import LiveSource
from adaptyst_top.snapshot import reusing
from adaptyst_top.system import heap
from adaptyst_top.system.held_processes import HeldProcesses


@dataclass
class Client:
    peer: Peer
    conn: socket.socket
    session: Session | None = None
    revoked: str = ""  # why its probes were ended by the guard
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The session's process, held from its check on: a later owner of its PID is not it.
    target: HeldProcesses = field(default_factory=HeldProcesses)
    # A user's view of energy: their own joules only (None: root, admin, energy_groups).
    energy: OwnEnergy | None = None


def end(client: Client) -> None:
    """CLIENT's session closed and its process let go (the connection is the caller's)."""
    session, client.session = client.session, None
    client.target.release_all()
    if session is not None:
        session.close()
        heap.give_back()  # what its compiles and maps freed


def end_locked(client: Client) -> None:
    """end(CLIENT) once its lock is had: never beside a request of its under way."""
    with client.lock:
        end(client)


def snapshot_answer(client: Client, source: LiveSource, with_hist: bool) -> bytes:
    """CLIENT's snapshot, as its user may see it, encoded."""
    source.want_hist = with_hist
    snap = source.snapshot()
    if not client.peer.privileged:  # the agent reads GPUs as root
        snap = dataclasses.replace(snap, devices=visible_to(snap.devices, client.peer.uid))
    if client.energy is not None:
        snap = client.energy.apply(snap)
    with reusing():  # encoded and sent: nothing keeps the JSON
        return proto.encode("snapshot", snapshot=snap.to_json())


def read_message(reader: proto.LineReader, silent: str) -> dict[str, Any] | None:
    """The next message; a timeout is a ProtocolError that says SILENT."""
    try:
        return reader.read()
    except TimeoutError:
        raise proto.ProtocolError(silent) from None
