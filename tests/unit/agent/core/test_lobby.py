"""The agent's lobby: connections sorted by whether they spoke, left or ran late."""

from __future__ import annotations

import socket
import time

from adaptyst_top.agent.core.lobby import Lobby, hung_up, turn_away


def test_the_lobby_sorts_who_spoke_who_left_and_who_is_late() -> None:
    pairs = {name: socket.socketpair() for name in ("speaks", "leaves", "silent", "late")}
    lobby: Lobby[str] = Lobby()
    for name, (ours, _) in pairs.items():
        lobby.add(ours, name, 0.0 if name == "late" else 30.0)
    assert len(lobby) == 4
    assert 0.0 <= lobby.wait_s(2.0) < 0.01  # "late" is due now
    pairs["speaks"][1].sendall(b'{"type": "hello"}\n')
    pairs["leaves"][1].close()
    assert not hung_up(pairs["silent"][0]) and hung_up(pairs["leaves"][0])
    ready = [pairs[n][0].fileno() for n in ("speaks", "leaves", "silent")]
    time.sleep(0.001)
    found = lobby.sort(ready)
    assert [item for item, _ in found.spoke] == ["speaks"]
    assert found.gone == ["leaves"] and found.late == ["late"]
    assert lobby.fds() == [pairs["silent"][0].fileno()]
    assert 29.0 < lobby.wait_s(60.0) <= 30.0
    turn_away(pairs["late"][0], "no hello in 1 s")
    assert b"no hello in 1 s" in pairs["late"][1].recv(4096)
    lobby.close_all()
    assert len(lobby) == 0 and pairs["silent"][0].fileno() == -1
