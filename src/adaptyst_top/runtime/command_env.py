"""A command the monitor launches, held at the door, and the environment it gets from
its probes' kinds (OpenCL's layer, CUDA's injection library, the Python hook), and what
of the user's own it puts aside: the CUDA driver loads one injection library, so one the
user named (a profiler's) is replaced, and the user is told so rather than left to
wonder why the other tool went quiet."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.runtime.session_options import SessionOptions
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.system.launcher import HeldCommand, LaunchError

if TYPE_CHECKING:
    from adaptyst_top.runtime.python_control import PythonControl

SHOWN = 120  # characters of a replaced value a note shows


def command_env(
    specs: Sequence[ProbeSpec], budget: float, env: Mapping[str, str]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The variables to set over ENV (the command's own), and a line for each value of
    the user's a kind replaced."""
    from adaptyst_top.collectors.probes.kinds import kind_of  # with specs only

    added: dict[str, str] = {}
    notes: list[str] = []
    for spec in specs:
        kind = kind_of(spec)
        for name, value in kind.launch_env({**env, **added}, budget, spec).items():
            old = env.get(name)
            if name in kind.exclusive_env and name not in added and old and old != value:
                notes.append(
                    f"{inert(spec.text[:SHOWN])}: the command's {name} ({inert(old[:SHOWN])})"
                    " is replaced by this tool's: the tool it named will not run"
                )
            added[name] = value
    return added, tuple(notes)


def held_command(
    opts: SessionOptions, specs: Sequence[ProbeSpec]
) -> tuple[HeldCommand | None, tuple[str, ...], PythonControl | None]:
    """The command launched and held at the door (None without -- CMD), what its
    environment replaced of the user's (command_env), and, for a Python program whose
    probes may change while it runs, the pipe they go on (python_control). LaunchError
    when it cannot be started."""
    if not opts.target.command:
        return None, (), None
    # The advisor's socket, told to the command (it may not be where an app looks first).
    env = {}
    if opts.advisor.objective:  # the advisor's channel, imported only for it
        from adaptyst_top.placement.control import CONTROL_ENV, server_socket_path

        env[CONTROL_ENV] = str(server_socket_path())
    # What its probes' kinds need in it from the start (OpenCL's layer, CUDA's library).
    added, notes = command_env(specs, opts.probing.budget, {**os.environ, **env})
    env.update(added)
    control = None
    exe = shutil.which(opts.target.command[0])
    if opts.target.python_later and exe:
        from adaptyst_top.runtime.python_control import PythonControl, is_python_program

        if is_python_program(os.path.realpath(exe)):
            control = PythonControl(list(specs))
            env.update(control.env({**os.environ, **env}))
    try:
        child = HeldCommand(
            opts.target.command,
            stdout=opts.target.child_stdout,
            stderr=opts.target.child_stderr,
            env=env or None,
            pass_fds=() if control is None else (control.pass_fd,),
        )
    except LaunchError:
        if control is not None:
            control.close()
        raise
    if control is not None:
        control.launched(child.pid)
    return child, notes, control
