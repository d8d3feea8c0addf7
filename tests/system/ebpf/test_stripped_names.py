"""A stripped shared library's hot static functions, named from the best source there is:
by the start its unwind table gives (no debug file), by a separate debug file found by
build ID or by debug link, by elfutils' own debuginfod server; each shown with its share
of the samples as the program measured it, and each probed exactly (`u` on its row gives
the spec the row carries: `0xADDRESS` or the debug file's name)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.support.programs import build_stripped_lib
from tests.support.shares import share_bound

pytestmark = [pytest.mark.ebpf, requires_root, pytest.mark.xdist_group("stripped_names")]

SOURCE = TARGETS / "stripped_lib.c"
HZ = 497
SECONDS = 4


@dataclass(frozen=True)
class Built:
    app: Path
    lib: Path  # stripped to its exported names, with no debug link
    debug: Path  # its separate debug file (objcopy --only-keep-debug)
    build_id: str
    starts: dict[str, int]  # hot_alpha's and hot_beta's link-time addresses


def _build(d: Path) -> Built:
    # A build ID of its own: the host's debug tree is shared with every other test.
    build_id = secrets.token_hex(20)
    lib, debug = build_stripped_lib(d, build_id)
    app = d / "app"
    subprocess.run(
        ["gcc", "-O2", "-o", str(app), str(SOURCE), f"-L{d}", "-lhot", "-Wl,-rpath,$ORIGIN"],
        check=True,
    )
    starts = {
        f.name: f.address
        for f in read_elf(debug, debug=True).functions
        if f.name in ("hot_alpha", "hot_beta")
    }
    assert len(starts) == 2 and read_elf(lib).stripped
    assert not {f.name for f in read_elf(lib).functions} & set(starts)
    return Built(app, lib, debug, build_id, starts)


@pytest.fixture
def built(tmp_path: Path) -> Built:
    return _build(tmp_path)


def _record(
    built: Built,
    tmp: Path,
    *probes: str,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
) -> tuple[dict, dict]:
    """The program run under the profile alone (no probes given) or under PROBES alone:
    a probe's own cost lands in the program's clock and only partly in the samples, so
    shares are read where nothing else is attached."""
    rec = tmp / f"rec-{secrets.token_hex(4)}.jsonl"
    args = [*prefix, *CLI, "record", "--interval", "1", "--out", str(rec)]
    args += [a for p in probes for a in ("--probe", p)] or ["--profile-hz", str(HZ)]
    proc = subprocess.run(
        [*args, "--", str(built.app), str(SECONDS)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    last = json.loads(rec.read_text().splitlines()[-1])
    return truth, last


def _check_shares(truth: dict, profile: dict, names: dict[str, str], named_by: str) -> dict:
    """Rows named NAMES (hot_alpha -> the row's name), with their shares of the library's
    samples within 5 points of what the program measured; the rows, by function."""
    rows = {f["name"]: f for f in profile["functions"]}
    assert not any(n.startswith("[libhot") for n in rows), "a bare-library row"
    spun = truth["alpha_s"] + truth["beta_s"]
    found = {fn: rows[name] for fn, name in names.items()}
    in_lib = sum(r["self"] for r in found.values())
    assert in_lib >= 0.5 * HZ * spun
    for fn, key in (("hot_alpha", "alpha_s"), ("hot_beta", "beta_s")):
        assert found[fn]["named_by"] == named_by
        bound = share_bound(truth[key] / spun, in_lib)
        assert abs(found[fn]["self"] / in_lib - truth[key] / spun) <= bound, (fn, found, truth)
    return found


def _probe_rows(last: dict) -> dict[str, dict]:
    return {p["spec"]: p for p in last["probes"]}


def test_unwind_table_names_rows_a_probe_counts_exactly(built: Built, tmp_path: Path) -> None:
    a, b = built.starts["hot_alpha"], built.starts["hot_beta"]
    names = {"hot_alpha": f"libhot.so+0x{a:x}", "hot_beta": f"libhot.so+0x{b:x}"}
    truth, last = _record(built, tmp_path)
    rows = _check_shares(truth, last["profile"], names, "eh_frame")
    # What `u` on each row asks for: the spec from the row's own symbol.
    specs = [f"uprobe:{r['module']}:{r['symbol']}" for r in rows.values()]
    assert specs == [f"uprobe:{built.lib}:0x{a:x}", f"uprobe:{built.lib}:0x{b:x}"]
    truth, last = _record(built, tmp_path, *specs)
    probes = _probe_rows(last)
    assert probes[specs[0]]["count"] == truth["alpha_calls"]
    assert probes[specs[1]]["count"] == truth["beta_calls"]
    assert probes[specs[0]]["name"] == names["hot_alpha"]
    assert none_left()


def test_an_address_inside_a_function_is_refused(built: Built, tmp_path: Path) -> None:
    inside = built.starts["hot_alpha"] + 1
    proc = subprocess.run(
        [
            *CLI,
            "record",
            "--probe",
            f"uprobe:{built.lib}:0x{inside:x}",
            "--duration",
            "1",
            "--out",
            str(tmp_path / "r.jsonl"),
            "--",
            str(built.app),
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "no function starts at" in proc.stderr and "Traceback" not in proc.stderr
    assert none_left()


@pytest.fixture
def in_build_id_tree(built: Built) -> Iterator[Path]:
    folder = Path("/usr/lib/debug/.build-id") / built.build_id[:2]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{built.build_id[2:]}.debug"
    shutil.copyfile(built.debug, path)
    yield path
    path.unlink()
    if not any(folder.iterdir()):  # removed only when it holds nothing else
        folder.rmdir()


def _named_run(
    built: Built,
    tmp: Path,
    named_by: str,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
) -> None:
    truth, last = _record(built, tmp, env=env, prefix=prefix)
    names = {"hot_alpha": "hot_alpha", "hot_beta": "hot_beta"}
    rows = _check_shares(truth, last["profile"], names, named_by)
    specs = [f"uprobe:{r['module']}:{r['symbol']}" for r in rows.values()]
    assert specs == [f"uprobe:{built.lib}:hot_alpha", f"uprobe:{built.lib}:hot_beta"]
    truth, last = _record(built, tmp, *specs, env=env, prefix=prefix)
    probes = _probe_rows(last)
    assert probes[specs[0]]["count"] == truth["alpha_calls"]
    assert probes[specs[1]]["count"] == truth["beta_calls"]
    assert none_left()


def test_a_debug_file_in_the_build_id_tree_names_them(
    built: Built, in_build_id_tree: Path, tmp_path: Path
) -> None:
    _named_run(built, tmp_path, "build-id")


def test_a_debug_link_names_them(built: Built, tmp_path: Path) -> None:
    subprocess.run(["objcopy", f"--add-gnu-debuglink={built.debug}", str(built.lib)], check=True)
    _named_run(built, tmp_path, "debuglink")


def test_debuginfod_names_them(built: Built, tmp_path: Path) -> None:
    """elfutils' debuginfod listens on every address: it runs in a network namespace of
    its own with loopback alone, and the monitor in that namespace asks it."""
    served = tmp_path / "served"
    served.mkdir()
    shutil.copyfile(built.debug, served / "libhot.debug")
    port = 18000 + secrets.randbelow(2000)
    cache = tmp_path / "cache"
    # The test's own process runs in the namespace: a helper script in this interpreter.
    script = tmp_path / "inside.py"
    # The server dies with the script (PR_SET_PDEATHSIG) and is killed and reaped when the
    # command ends: nothing of the test outlives it, whatever ends it.
    script.write_text(
        "import ctypes, signal, subprocess, sys, time, urllib.request\n"
        "subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"srv = subprocess.Popen(['debuginfod', '-F', {str(served)!r}, '-p', '{port}',"
        f" '-d', {str(tmp_path / 'db.sqlite')!r}, '-t', '0', '-g', '0'],"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,"
        " preexec_fn=lambda: libc.prctl(1, signal.SIGKILL))\n"
        f"url = 'http://127.0.0.1:{port}/buildid/{built.build_id}/debuginfo'\n"
        "try:\n"
        "    for _ in range(300):\n"
        "        try:\n"
        "            urllib.request.urlopen(url, timeout=2).read(4); break\n"
        "        except OSError: time.sleep(0.1)\n"
        "    else: sys.exit('debuginfod never served the file')\n"
        "    code = subprocess.run(sys.argv[1:]).returncode\n"
        "finally:\n"
        "    srv.kill(); srv.wait()\n"
        "sys.exit(code)\n"
    )
    env = {"DEBUGINFOD_URLS": f"http://127.0.0.1:{port}", "DEBUGINFOD_CACHE_PATH": str(cache)}
    inside = ("unshare", "--net", "--", "/usr/bin/python3", str(script), "/usr/bin/env")
    _named_run(
        built, tmp_path, "debuginfod", prefix=(*inside, *(f"{k}={v}" for k, v in env.items()))
    )
    # elfutils' cache layout, private to its owner.
    kept = cache / built.build_id / "debuginfo"
    assert kept.read_bytes() == built.debug.read_bytes()
    assert (cache.stat().st_mode & 0o077) == 0 and (kept.stat().st_mode & 0o077) == 0
    left = subprocess.run(["pgrep", "-f", str(served)], capture_output=True, text=True).stdout
    assert left == "", "the test's debuginfod outlived it"
    assert none_left()
