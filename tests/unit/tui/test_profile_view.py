"""The profile list's self time, as a Python user reads it: the interpreter's C beneath
a Python function is that function's (py-spy's own time), and only that C: a C library
called from Python (zlib) keeps its own."""

from __future__ import annotations

from adaptyst_top.snapshot import ProfileFunction, Snapshot
from adaptyst_top.snapshot.profile import PYTHON, ProfilePart, ProfileStack
from adaptyst_top.tui.profile_view import ProfileView

LIBPYTHON = "/opt/py/lib/libpython3.12.so.1.0"
EXE = "/opt/py/bin/python3.12"
APP = "/srv/app.py"
ZLIB = "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13"


def _view() -> ProfileView:
    functions = (
        ProfileFunction("main", EXE, "main", 0, 100, named_by="symtab"),
        ProfileFunction("<module>", APP, "", 0, 100, named_by=PYTHON, line=1),
        ProfileFunction("Model.big", APP, "", 0, 70, named_by=PYTHON, line=5),
        ProfileFunction("spin", APP, "", 10, 60, named_by=PYTHON, line=9),
        ProfileFunction("_PyObject_Free", LIBPYTHON, "_PyObject_Free", 50, 50),
        ProfileFunction("pack", APP, "", 0, 30, named_by=PYTHON, line=12),
        ProfileFunction("deflate", ZLIB, "deflate", 30, 30),
    )
    base = ("main", "<module>")
    stacks = (
        ProfileStack(1, 1, (*base, "Model.big", "spin"), samples=10),
        ProfileStack(1, 1, (*base, "Model.big", "spin", "_PyObject_Free"), samples=50),
        ProfileStack(1, 1, (*base, "pack", "deflate"), samples=30),
    )
    view = ProfileView()
    view.add(
        Snapshot(
            t=1.0,
            host="h",
            profile=ProfilePart(hz=99, samples=100, functions=functions, stacks=stacks),
        )
    )
    return view


def test_the_interpreter_beneath_a_python_function_is_its_own_time() -> None:
    view = _view()
    own = {f.name: view.self_of(f) for f in view.functions}
    assert own["spin"] == 60 and own["_PyObject_Free"] == 0
    assert own["deflate"] == 30 and own["pack"] == 0  # a library's C stays its own
    assert [f.name for f in view.sorted_functions()][:2] == ["spin", "deflate"]


def test_a_profile_without_python_keeps_every_leaf() -> None:
    view = ProfileView()
    functions = (ProfileFunction("_PyObject_Free", LIBPYTHON, "_PyObject_Free", 5, 5),)
    stacks = (ProfileStack(1, 1, ("main", "_PyObject_Free"), samples=5),)
    view.add(
        Snapshot(
            t=1.0,
            host="h",
            profile=ProfilePart(hz=99, samples=5, functions=functions, stacks=stacks),
        )
    )
    assert view.self_of(functions[0]) == 5
