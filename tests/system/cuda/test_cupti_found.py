"""Which CUPTI the injection library opens: the program's own CUDA major, beside its
CUDA runtime (pip's CUDA 13 keeps libcupti.so.13 in nvidia/cu13/lib with libcudart),
and, where none is found, the program as it would run, with one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.kinds.cuda import INJECTION_ENV, inject_path
from adaptyst_top.collectors.probes.kinds.device_layer import shown_name
from tests.support.cli import record_last
from tests.support.cuda_fake import build_app
from tests.support.marks import requires_root

FAKE = "libfakecuda.so"  # a name no search of CUPTI's by name finds


def run_alone(
    app: Path, out: Path, launches: int = 500, marker: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The program under the injection library, without the monitor; a library it loads
    from the tests' PAYLOAD makes MARKER."""
    env = {INJECTION_ENV: inject_path() or "", "PATH": "/usr/bin:/bin"}
    if marker is not None:
        env["PLANTED_RAN"] = str(marker)
    return subprocess.run(
        [str(app), "--out", str(out), "--launches", str(launches)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@requires_root
def test_cupti_13_beside_the_programs_cuda_runtime_is_found(tmp_path: Path) -> None:
    """The program loaded libcudart.so.13 from a folder that holds libcupti.so.13 (and
    nothing named CUPTI is on the loader's path): that CUPTI times its kernels."""
    app = build_app(tmp_path, soname=FAKE, runtime="libcudart.so.13")
    os.symlink(FAKE, tmp_path / "libcupti.so.13")
    out = tmp_path / "own.json"
    snap, said = record_last(
        "--probe", "cuda:*", "--", str(app), "--out", str(out), "--launches", "600"
    )
    own = json.loads(out.read_text())
    assert own["loaded"] == 1 and "no libcupti" not in said, said
    got = {p["name"]: p["count"] for p in snap["probes"]}
    assert got == {shown_name(n): c for n, c in own["launches"].items()}
    assert sum(got.values()) > 600


@pytest.mark.parametrize("runtime", ["libcudart.so.13", "libcudart.so"])
def test_a_toolkits_cupti_is_found_through_its_linked_lib64(tmp_path: Path, runtime: str) -> None:
    """A toolkit as NVIDIA's installer lays it out: lib64 a link to
    targets/x86_64-linux/lib, CUPTI in extras/CUPTI/lib64 (which is not beside the
    link's target). The program names lib64 (its rpath); the CUPTI of its runtime's
    version is found there, unversioned with an unversioned runtime."""
    real = tmp_path / "targets/x86_64-linux/lib"
    real.mkdir(parents=True)
    os.symlink("targets/x86_64-linux/lib", tmp_path / "lib64")
    app = build_app(tmp_path / "lib64", soname=FAKE, runtime=runtime)
    cupti = tmp_path / "extras/CUPTI/lib64" / runtime.replace("cudart", "cupti")
    cupti.parent.mkdir(parents=True)
    os.symlink(real / FAKE, cupti)
    proc = run_alone(app, tmp_path / "own.json")
    assert proc.returncode == 0, proc.stderr
    assert "adaptyst-top" not in proc.stderr, proc.stderr


def test_without_a_cupti_the_program_runs_as_it_would_and_one_line_says_so(
    tmp_path: Path,
) -> None:
    """Its runtime's folder holds no CUPTI, none by name either: the program's own
    output is whole, and one line on its stderr says where to point the tool."""
    app = build_app(tmp_path, soname=FAKE, runtime="libcudart.so.13")
    out = tmp_path / "own.json"
    proc = run_alone(app, out)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "adaptyst-top" in line]
    assert len(lines) == 1 and "ADAPTYST_CUPTI" in lines[0], proc.stderr
    own = json.loads(out.read_text())
    assert own["loaded"] == 1 and sum(own["launches"].values()) > 500


PAYLOAD = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void ran(void) {
    FILE *f = fopen(getenv("PLANTED_RAN"), "w");
    if (f) fclose(f);
}
"""


@pytest.mark.parametrize(
    "where",
    ["ours", pytest.param("another_users_file", marks=requires_root), "a_folder_all_may_write"],
)
def test_a_cupti_beside_the_runtime_is_loaded_only_from_a_place_no_one_else_controls(
    tmp_path: Path, where: str
) -> None:
    """The runtime in ROOT/lib, a library at ROOT/extras/CUPTI/lib64/libcupti.so.13 (a
    toolkit's place for it): loaded when it and its folders are root's or the user's
    and no one else may write them; never when another user owns it, or when a folder
    on its way lets anyone write (no sticky bit)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    app = build_app(lib, soname=FAKE, runtime="libcudart.so.13")
    planted = tmp_path / "extras/CUPTI/lib64/libcupti.so.13"
    planted.parent.mkdir(parents=True)
    _build_payload(tmp_path, planted)
    if where == "another_users_file":
        os.chown(planted, 65534, 65534)
    elif where == "a_folder_all_may_write":
        os.chmod(tmp_path / "extras", 0o777)  # in pytest's own 0700 tree: no one else reaches it
    marker = tmp_path / "ran"
    proc = run_alone(app, tmp_path / "own.json", 50, marker)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists() == (where == "ours"), (where, proc.stderr)
    assert proc.stderr.count(" not loaded: ") == (where != "ours"), proc.stderr  # said once


THEM = 65534  # another user


def _theirs(*paths: Path) -> None:
    for p in paths:
        os.lchown(p, THEM, THEM)


def _plant(tmp_path: Path, shared: Path, planted: str) -> Path:
    """The program and what another user (or a mode) put on its way; the program."""
    if planted == "writable_behind_linked_lib64":
        real = shared / "job/targets/x86_64-linux/lib"
        real.mkdir(parents=True)
        os.symlink("targets/x86_64-linux/lib", shared / "job/lib64")
        app = build_app(shared / "job/lib64", soname=FAKE, runtime="libcudart.so.13")
        _build_payload(tmp_path, real / "libcupti.so.13")
        (real / "libcupti.so.13").chmod(0o666)
        return app
    if planted == "behind_the_users_own_link":
        # The user's job/extras leads to SHARED/tools/extras; SHARED/tools is theirs.
        lib = tmp_path / "home/job/lib"
        lib.mkdir(parents=True)
        app = build_app(lib, soname=FAKE, runtime="libcudart.so.13")
        mine = tmp_path / "mine/extras/CUPTI/lib64"
        mine.mkdir(parents=True)
        _build_payload(tmp_path, mine / "libcupti.so.13")
        os.symlink(shared / "tools/extras", tmp_path / "home/job/extras")
        os.symlink(tmp_path / "mine", shared / "tools")
        _theirs(shared / "tools")
        return app
    if planted == "hard_link_in_an_open_folder":
        # The runtime's own folder open to all: a hard link there to a library of the
        # user's (which another may make where fs.protected_hardlinks is 0).
        lib = shared / "lib"
        lib.mkdir()
        lib.chmod(0o1777)
        app = build_app(lib, soname=FAKE, runtime="libcudart.so.13")
        _build_payload(tmp_path, tmp_path / "own.so")
        os.link(tmp_path / "own.so", lib / "libcupti.so.13")
        return app
    if planted == "escapes_in_a_name":
        lib = tmp_path / "x\x1b]0;owned\x07 fine/lib"  # (ld takes no newline in an rpath)
        lib.mkdir(parents=True)
        app = build_app(lib, soname=FAKE, runtime="libcudart.so.13")
        (lib.parent / "extras/CUPTI/lib64").mkdir(parents=True)
        (lib.parent / "extras").chmod(0o777)
        _build_payload(tmp_path, lib.parent / "extras/CUPTI/lib64/libcupti.so.13")
        return app
    lib = shared / "job/lib"
    lib.mkdir(parents=True)
    app = build_app(lib, soname=FAKE, runtime="libcudart.so.13")
    target = tmp_path / ("own.so" if planted == "library" else "own.fifo")
    if planted == "library":
        _build_payload(tmp_path, target)
    else:
        os.mkfifo(target, 0o644)
    theirs = shared / "cuda_cupti/lib"
    theirs.mkdir(parents=True)
    os.symlink(target, theirs / "libcupti.so.13")
    _theirs(shared / "cuda_cupti", theirs, theirs / "libcupti.so.13")
    return app


@requires_root
@pytest.mark.parametrize(
    "planted",
    [
        "library",
        "fifo",
        "writable_behind_linked_lib64",
        "behind_the_users_own_link",
        "escapes_in_a_name",
        "hard_link_in_an_open_folder",
    ],
)
def test_a_path_another_user_chose_is_never_followed_and_said_once(
    tmp_path: Path, planted: str
) -> None:
    """SHARED sticky and open to all (as /tmp). Another user makes
    SHARED/cuda_cupti/lib/libcupti.so.13, two folders above the program's runtime in
    SHARED/job/lib, a link to a library of the user's own (code never meant to run
    there) or to the user's FIFO (an open would hang); or is a link on the way the
    user's own link leads. None is loaded or opened, and one line says why, also for a
    CUPTI all may write behind a linked lib64 (two paths lead to it), and with a name
    holding terminal escapes, shown inert."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    marker = tmp_path / "ran"
    app = _plant(tmp_path, shared, planted)
    proc = run_alone(app, tmp_path / "own.json", 50, marker)
    assert proc.returncode == 0 and not marker.exists(), proc.stderr
    assert proc.stderr.count(" not loaded: ") == 1, proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr, proc.stderr


@requires_root
def test_a_clean_path_is_found_though_another_users_link_leads_to_the_same_file(
    tmp_path: Path,
) -> None:
    """The runtime named SHARED/job/lib, job the user's link to HOME/job, CUPTI in
    HOME/cuda_cupti/lib (pip's CUDA 12 layout, found from the resolved folder). Another
    user's SHARED/cuda_cupti/lib leads to that same file: refused in a line, and the
    clean path still finds it (a refusal never hides a file another path reaches)."""
    home, shared = tmp_path / "home", tmp_path / "shared"
    (home / "job/lib").mkdir(parents=True)
    shared.mkdir()
    shared.chmod(0o1777)
    os.symlink(home / "job", shared / "job")
    app = build_app(shared / "job/lib", soname=FAKE, runtime="libcudart.so.12")
    good = home / "cuda_cupti/lib"
    good.mkdir(parents=True)
    os.symlink(home / "job/lib" / FAKE, good / "libcupti.so.12")
    (shared / "cuda_cupti").mkdir()
    os.symlink(good, shared / "cuda_cupti/lib")
    _theirs(shared / "cuda_cupti", shared / "cuda_cupti/lib")
    proc = run_alone(app, tmp_path / "own.json", 50, tmp_path / "ran")
    said = [line for line in proc.stderr.splitlines() if "adaptyst-top" in line]
    assert proc.returncode == 0 and len(said) == 1 and " not loaded: " in said[0], said


def _build_payload(folder: Path, out: Path) -> None:
    source = folder / "payload.c"
    source.write_text(PAYLOAD)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(source)], check=True)
