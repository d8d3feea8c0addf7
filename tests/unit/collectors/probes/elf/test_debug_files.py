"""Finding a stripped file's debug file: its twin only (same build ID, the CRC its link
records), never a FIFO that would block; debuginfod's protocol and elfutils' cache layout
against a real HTTP server on loopback; no server named, no wait."""

from __future__ import annotations

import http.server
import os
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from adaptyst_top.collectors.probes.elf import debuginfod
from adaptyst_top.collectors.probes.elf.debug_files import find_debug_file, read_notes
from adaptyst_top.collectors.probes.elf.debug_names import function_at_address, with_debug_names
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from tests.support.programs import build_stripped_lib


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_stripped_lib(tmp_path_factory.mktemp("lib"), secrets.token_hex(20))


def _linked(lib: Path, debug: Path, d: Path) -> Path:
    out = d / lib.name
    subprocess.run(
        ["objcopy", f"--add-gnu-debuglink={debug}", str(lib), str(out)], check=True, cwd=d
    )
    return out


def test_a_debug_link_counts_only_with_its_crc(lib: tuple[Path, Path], tmp_path: Path) -> None:
    linked = _linked(lib[0], lib[1], tmp_path)
    assert read_notes(str(linked)).link is not None
    (tmp_path / "libhot.debug").write_bytes(lib[1].read_bytes())
    found = find_debug_file(str(linked), str(tmp_path), "")
    assert found is not None and found.named_by == "debuglink"
    os.close(found.fd)
    (tmp_path / "libhot.debug").write_bytes(lib[1].read_bytes() + b"x")  # not its twin
    assert find_debug_file(str(linked), str(tmp_path), "") is None


def test_a_link_to_a_device_is_never_opened(lib: tuple[Path, Path], tmp_path: Path) -> None:
    linked = _linked(lib[0], lib[1], tmp_path)
    (tmp_path / "libhot.debug").symlink_to(lib[1])  # even to the right file: not followed
    assert find_debug_file(str(linked), str(tmp_path), "") is None
    (tmp_path / ".debug").mkdir()
    (tmp_path / ".debug" / "libhot.debug").symlink_to("/dev/zero")
    assert find_debug_file(str(linked), str(tmp_path), "") is None


def test_a_fifo_named_as_the_debug_file_is_not_opened(
    lib: tuple[Path, Path], tmp_path: Path
) -> None:
    linked = _linked(lib[0], lib[1], tmp_path)
    os.mkfifo(tmp_path / "libhot.debug")
    started = time.monotonic()
    assert find_debug_file(str(linked), str(tmp_path), "") is None
    assert time.monotonic() - started < 5


def test_debug_names_are_probed_by_address(lib: tuple[Path, Path], tmp_path: Path) -> None:
    linked = _linked(lib[0], lib[1], tmp_path)
    (tmp_path / "libhot.debug").write_bytes(lib[1].read_bytes())
    elf = read_elf(linked)
    merged = with_debug_names(elf, str(linked), str(linked), beside=True)
    by_name = {f.name: f for f in merged.functions}
    assert by_name["hot_alpha"].by_address and not by_name["hot_run"].by_address
    assert by_name["hot_alpha"].file_offset == elf.offset_of(by_name["hot_alpha"].address)
    # Root planning for a user never looks beside the user's file.
    assert "hot_alpha" not in {
        f.name for f in with_debug_names(elf, str(linked), str(linked), beside=False).functions
    }
    # An address: a function's start, by its symbol or its unwind table; not inside one.
    start = by_name["hot_alpha"].address
    at = function_at_address(read_elf(lib[0]), f"0x{start:x}", str(lib[0]), str(lib[0]))
    assert at is not None and at.by_address and at.source == f"libhot.so+0x{start:x}"
    assert function_at_address(read_elf(lib[0]), f"0x{start + 1:x}", str(lib[0]), "x") is None


class _Server(http.server.BaseHTTPRequestHandler):
    files: ClassVar[dict[str, bytes]] = {}
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        body = self.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_debuginfod_fetches_once_into_a_private_cache(
    lib: tuple[Path, Path], server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_id = read_notes(str(lib[0])).build_id
    assert build_id
    _Server.files = {f"/buildid/{build_id}/debuginfo": lib[1].read_bytes()}
    _Server.asked = []
    cache = tmp_path / "cache"
    monkeypatch.setenv("DEBUGINFOD_URLS", f"{server}/missing {server}")
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(cache))
    debuginfod._failed.clear()
    found = find_debug_file(str(lib[0]), None)
    assert found is not None and found.named_by == "debuginfod"
    os.close(found.fd)
    assert Path(found.path) == cache / build_id / "debuginfo"
    assert Path(found.path).read_bytes() == lib[1].read_bytes()
    assert (cache.stat().st_mode & 0o077) == 0
    assert (Path(found.path).stat().st_mode & 0o077) == 0
    asked = len(_Server.asked)
    again = find_debug_file(str(lib[0]), None)  # from the cache
    assert again is not None and (again.path, again.named_by) == (found.path, found.named_by)
    os.close(again.fd)
    assert len(_Server.asked) == asked
    # A build ID no server has is asked once per process, not at every frame.
    assert debuginfod.fetch("ab" * 20) is None
    asked = len(_Server.asked)
    assert debuginfod.fetch("ab" * 20) is None and len(_Server.asked) == asked


def test_debuginfod_past_its_size_limit_keeps_nothing(
    lib: tuple[Path, Path], server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Server.files = {f"/buildid/{'cd' * 20}/debuginfo": b"\x7fELF" + b"0" * 5000}
    monkeypatch.setenv("DEBUGINFOD_URLS", server)
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))
    monkeypatch.setenv("DEBUGINFOD_MAXSIZE", "1000")
    debuginfod._failed.clear()
    assert debuginfod.fetch("cd" * 20) is None
    assert list((tmp_path / "cache").iterdir()) == []


def test_no_server_named_no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEBUGINFOD_URLS", raising=False)
    started = time.monotonic()
    assert debuginfod.fetch("ef" * 20) is None
    assert debuginfod.urls() == []
    assert time.monotonic() - started < 1
    monkeypatch.setenv("DEBUGINFOD_URLS", "file:///etc ftp://x")  # http(s) only
    assert debuginfod.urls() == []
