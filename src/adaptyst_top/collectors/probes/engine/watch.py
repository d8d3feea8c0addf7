"""The probe engine's scope kept current: the children of its processes followed as they
start, processes dropped as they exit or exec into someone else's, the target's own exec
and end noticed."""

from __future__ import annotations

import contextlib
import os
import sys

from adaptyst_top.collectors.probes.engine.attach import Attacher
from adaptyst_top.collectors.probes.engine.process_follow import (
    ProcessEvent,
    ProcessFollower,
    descendants,
    is_thread,
)
from adaptyst_top.collectors.probes.engine.scope import Scope
from adaptyst_top.collectors.probes.engine.state import EngineState
from adaptyst_top.collectors.probes.model import one_line
from adaptyst_top.system.targets import TargetError, mapped_files, pid_alive, process_start


class ScopeWatch:
    """COMMAND_PATH: the launched command (its exec from the Python gate is not an exec
    of the target)."""

    def __init__(
        self,
        state: EngineState,
        scope: Scope,
        attacher: Attacher,
        command_path: str | None,
    ) -> None:
        self.state = state
        self.scope = scope
        self.attacher = attacher
        self.command_path = command_path
        self.follower: ProcessFollower | None = None
        self._main_gone_told = False
        self._exe: str | None = None  # the target's program, to notice an exec
        self._exe_link: str | None = None  # its /proc link as last read (realpath on change)

    def start_following(self) -> None:
        """Follow the children the scope's processes start (run on the compiler thread,
        before any probe attaches)."""
        st = self.state
        try:
            follower = ProcessFollower(self.scope.pids(), self._on_event)
        except Exception as exc:  # no BTF, no libbpf, a kernel that refuses
            st.warnings.append(f"children are not followed: {one_line(exc)}")
            return
        with st.lock:
            if st.closed or st.target_ended:
                follower.close()
                return
            self.follower = follower
            known = list(self.scope.starts or ())
        # The children started before the follower: from /proc, after the kernel's map
        # has the parents (a fork meanwhile is told, and follow() takes a PID once).
        for pid in descendants(known):
            self.follow(pid)

    def _on_event(self, ev: ProcessEvent) -> None:
        if ev.kind == "fork":
            if is_thread(ev.pid):
                if self.follower is not None:
                    self.follower.discard(ev.pid)
                return
            self.follow(ev.pid)
        elif ev.kind == "exec" and self.scope.admit is not None:
            # A setuid program may have made it someone else's: asked at once, not at the
            # next guard round.
            if why := self.scope.admit(ev.pid):
                self.unfollow(ev.pid, why)
        elif ev.kind == "exit" and ev.pid != self.scope.pid:
            self.unfollow(ev.pid)

    def follow(self, pid: int) -> bool:
        """Probe PID too (a child of a followed process, a job's new task): every live
        row attaches for it now. False when it is not taken (known, gone, refused)."""
        st, scope = self.state, self.scope
        with st.lock:
            if not scope.may_join(pid):
                return False
        if scope.admit is not None and (why := scope.admit(pid)):
            st.warnings.append(f"PID {pid} not probed: {why}")
            return False
        start = process_start(pid)
        with st.lock:
            if not scope.take(pid, start):
                return False
            if self.follower is not None:
                self.follower.add(pid)
            with contextlib.suppress(Exception):  # it exited meanwhile
                self.attacher.attach_rows_pid(st.live_rows(), pid)
        return True

    def unfollow(self, pid: int, why: str | None = None) -> None:
        """Stop probing PID. With a reason (it is no longer one the user may probe) its
        probes are detached before this returns; otherwise in the background."""
        st = self.state
        with st.lock:
            if not self.scope.drop(pid):
                return
            if self.follower is not None:
                self.follower.discard(pid)
            if why:
                st.warnings.append(f"PID {pid}: {why}; its probes ended")
            rows = [r for r in st.rows.values() if pid in r.pids]
        if why:
            self.attacher.detach_pid(rows, pid)
        else:
            st.queue.put(lambda: self.attacher.detach_pid(rows, pid))

    def check(self) -> str | None:
        """Drop the processes that exited and notice the target's exec (the caller holds
        the lock); why the probes end when no process of the target is left, else None."""
        scope = self.scope
        for pid in scope.exited():
            self.unfollow(pid)
        main_alive = scope.pid is not None and pid_alive(scope.pid)
        others = scope.others()
        if main_alive:
            self._check_exec()
        elif scope.pid is not None and not others:
            return f"target PID {scope.pid} exited"
        elif scope.pid is not None and not self._main_gone_told:
            self._main_gone_told = True
            self.state.warnings.append(
                f"target PID {scope.pid} exited; the {len(others)} process(es) it started "
                "are still probed"
            )
        elif scope.pid is None and scope.starts is not None and not scope.starts:
            return f"{scope.name} has no process left"
        return None

    def _check_exec(self) -> None:
        """A target that exec'd another program keeps its PID but not its probes: the rows
        on files it no longer maps end, with the reason."""
        pid = self.scope.pid
        assert pid is not None
        try:
            link = os.readlink(f"/proc/{pid}/exe")
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
            mapped = set(mapped_files(pid))
        except TargetError:
            return
        rows = self.state.rows.values()
        gone = [r for r in rows if r.path not in mapped and r.state != "error"]
        for row in gone:
            if row.state in ("attached", "detached"):
                self.attacher.switch_off(row, "ended")
            row.error = f"PID {pid} exec'd {exe}: {row.path} is no longer mapped"
        self.state.warnings.append(
            f"PID {pid} exec'd {exe}: {len(gone)} probe(s) on the old program ended"
        )

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()
