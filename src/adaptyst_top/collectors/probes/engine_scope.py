"""The probe engine's scope: the processes its probes attach to (one, a job's, the
children they start, every one), followed as they start, exec and exit."""

from __future__ import annotations

import contextlib
import os
import sys

from adaptyst_top.collectors.probes.engine_attach import EngineAttach
from adaptyst_top.collectors.probes.model import (
    one_line,
)
from adaptyst_top.collectors.probes.process_follow import (
    ProcessEvent,
    ProcessFollower,
    descendants,
    is_thread,
)
from adaptyst_top.collectors.probes.reading import (
    read_module,
)
from adaptyst_top.snapshot import ProbeTarget
from adaptyst_top.system.targets import (
    TargetError,
    mapped_files,
    pid_alive,
    process_start,
)


class EngineScope(EngineAttach):
    def _reference_pid(self) -> int | None:
        """The process whose view resolves names (library short names, USDT): the target,
        or another live process of the scope once it is gone."""
        if self.pid is not None and pid_alive(self.pid):
            return self.pid
        return next(iter(self._attach_pids()), None) if self.scope else None

    def target(self) -> ProbeTarget:
        """What the probes attach to now, for the snapshot."""
        if self.scope is None:
            return ProbeTarget("every process")
        return ProbeTarget(self.scope_name, tuple(sorted(self.scope_pids())))

    def scope_pids(self) -> list[int]:
        """The processes probed now (empty for node-wide probes)."""
        with self._lock:
            return list(self.scope or ())

    def scope_pids_within(self, wait_s: float) -> list[int] | None:
        """scope_pids(), or None when the engine stayed busy past WAIT_S (a read stuck in
        its user's memory: a stopped FUSE daemon behind a string key), so that the
        agent's guard goes on to the other users instead of waiting with it."""
        if not self._lock.acquire(timeout=wait_s):
            return None
        try:
            return list(self.scope or ())
        finally:
            self._lock.release()

    def _start_following(self) -> None:
        try:
            follower = ProcessFollower(list(self.scope or ()), self._on_process_event, self.owner)
        except Exception as exc:  # bcc raises plain Exception (no tracefs, say)
            self.warnings.append(f"children are not followed: {one_line(exc)}")
            return
        with self._lock:
            if self._closed or self.target_ended:
                follower.close()
                return
            self._follower = follower
            known = list(self.scope or ())
        # The children started before the follower: from /proc, after the kernel's map
        # has the parents (a fork meanwhile is told, and follow() takes a PID once).
        for pid in descendants(known):
            self.follow(pid)

    def _on_process_event(self, ev: ProcessEvent) -> None:
        if ev.kind == "fork":
            if is_thread(ev.pid):
                if self._follower is not None:
                    self._follower.discard(ev.pid)
                return
            self.follow(ev.pid)
        elif ev.kind == "exec" and self.admit is not None:
            # A setuid program may have made it someone else's: asked at once, not at the
            # next guard round.
            if why := self.admit(ev.pid):
                self.unfollow(ev.pid, why)
        elif ev.kind == "exit" and ev.pid != self.pid:
            self.unfollow(ev.pid)

    def follow(self, pid: int) -> bool:
        """Probe PID too (a child of a followed process, a job's new task): every live
        row attaches for it now. False when it is not taken (known, gone, refused)."""
        with self._lock:
            if self.scope is None or self._closed or self.target_ended or pid in self.scope:
                return False
        if self.admit is not None and (why := self.admit(pid)):
            self.warnings.append(f"PID {pid} not probed: {why}")
            return False
        start = process_start(pid)
        with self._lock:
            if start is None or self._closed or self.target_ended or pid in self.scope:
                return False
            if not self.held.hold(pid, start):
                return False
            self.scope[pid] = start
            self.joined += 1
            if self._follower is not None:
                self._follower.add(pid)
            live = [
                row
                for row in self.rows.values()
                if row.state == "attached"
                and row.linked
                and not row.unlinking
                and row.module is not None
                and not row.module.closed
            ]
            with contextlib.suppress(Exception):  # it exited meanwhile
                self._attach_rows_pid(live, pid)
        return True

    def unfollow(self, pid: int, why: str | None = None) -> None:
        """Stop probing PID. With a reason (it is no longer one the user may probe) its
        probes are detached before this returns; otherwise in the background."""
        with self._lock:
            if self.scope is None or self.scope.pop(pid, None) is None:
                return
            self.held.release(pid)
            if self._follower is not None:
                self._follower.discard(pid)
            if why:
                self.warnings.append(f"PID {pid}: {why}; its probes ended")
            rows = [r for r in self.rows.values() if pid in r.pids]
        if why:
            self._detach_pid(rows, pid)
        else:
            self._queue.put(lambda: self._detach_pid(rows, pid))

    def _prune_scope(self) -> None:
        """Drop the processes that exited (their PIDs may come back as someone else's)."""
        if self.scope is None:
            return
        for pid, start in list(self.scope.items()):
            if pid != self.pid and process_start(pid) != start:
                self.unfollow(pid)

    def _check_target(self) -> None:
        """End the probes when no process of the target is left; notice an exec."""
        self._prune_scope()
        main_alive = self.pid is not None and pid_alive(self.pid)
        others = [p for p in self.scope or () if p != self.pid]
        if main_alive:
            self._check_exec()
        elif self.pid is not None and not others:
            self._end_target(f"target PID {self.pid} exited")
        elif self.pid is not None and not self._main_gone_told:
            self._main_gone_told = True
            self.warnings.append(
                f"target PID {self.pid} exited; the {len(others)} process(es) it started "
                "are still probed"
            )
        elif self.pid is None and self.scope is not None and not self.scope:
            self._end_target(f"{self.scope_name} has no process left")

    def _check_exec(self) -> None:
        """A target that exec'd another program keeps its PID but not its probes: the rows
        on files it no longer maps end, with the reason."""
        assert self.pid is not None
        try:
            link = os.readlink(f"/proc/{self.pid}/exe")
        except OSError:
            return
        if link == self._exe_link:
            return  # nothing exec'd since the last tick: no path to resolve
        self._exe_link = link
        exe = os.path.realpath(link)
        if self._exe is None:
            if self.command_path is not None and exe == os.path.realpath(sys.executable):
                return  # a launched command still held at the door (the gate is Python)
            self._exe = exe
            return
        if exe == self._exe:
            return
        self._exe = exe
        try:
            mapped = set(mapped_files(self.pid))
        except TargetError:
            return
        gone = [r for r in self.rows.values() if r.path not in mapped and r.state != "error"]
        for row in gone:
            if row.state in ("attached", "detached"):
                self._switch_off(row, "ended")
            row.error = f"PID {self.pid} exec'd {exe}: {row.path} is no longer mapped"
        self.warnings.append(
            f"PID {self.pid} exec'd {exe}: {len(gone)} probe(s) on the old program ended"
        )

    def _end_target(self, why: str) -> None:
        self.target_ended = True
        if self._follower is not None:
            self._follower.close()
        for module in self.modules:
            read_module(module)  # the final statistics stay in the rows
        for row in self.rows.values():
            self.bpf_run_ns(row, fresh=True)
        for row in self.rows.values():
            if row.state in ("attached", "detached"):
                row.state = "ended"
        for module in self.modules:
            module.close()
        self.warnings.append(f"{why}; final statistics kept")
