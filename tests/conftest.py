"""Shared fixtures, and the rule that as root an eBPF test may not skip."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.marks import IS_ROOT

# CI replays the same examples every run (a failure there is reproducible); a developer's
# run explores new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="session")
def models_of_this_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The advisor's kept models go to a folder of this run (the monitors the tests start
    inherit it): a test never starts from what an earlier run or test learned."""
    from adaptyst_top.runtime.model_store import DIR_ENV

    folder = tmp_path_factory.mktemp("models")
    os.chmod(folder, 0o700)
    old = os.environ.get(DIR_ENV)
    os.environ[DIR_ENV] = str(folder)
    yield folder
    if old is None:
        os.environ.pop(DIR_ENV, None)
    else:
        os.environ[DIR_ENV] = old


# The tier is the folder: tests/unit/ (no root, no services, nothing sleeping over a
# second; `make test-fast`, as any user) and tests/system/<service>/ (root, another
# user, or a service the suite starts). Moving a file is the only way to change its tier.
TESTS = Path(__file__).parent
# Under pytest-xdist (--dist loadgroup) a folder of one service runs on one worker, one
# test after another (one sshd, one Slurm, one Prometheus port range, one tmux server);
# elsewhere a module is the unit, so its module-scoped fixtures are built once.
SHARED_BY_MODULE = {"unit", "ebpf", "agent"}


def xdist_group(path: Path) -> str:
    parts = path.relative_to(TESTS).parts
    service = parts[1] if parts[0] == "system" and len(parts) > 2 else parts[0]
    return str(path.relative_to(TESTS)) if service in SHARED_BY_MODULE else service


# First: xdist reads the groups in its own hook, which would otherwise run before this.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.relative_to(TESTS).parts
        if parts[0] == "system":
            item.add_marker(pytest.mark.system)
        if parts[:2] == ("system", "install"):  # an admin's build: the one place for clang
            item.add_marker(pytest.mark.builds)
        item.add_marker(pytest.mark.xdist_group(xdist_group(item.path)))


def unreachable_folder(*paths: Path) -> Path | None:
    """The first folder on the way to PATHS that other users cannot pass (no o+x)."""
    for path in paths:
        for folder in [path, *path.parents]:
            if folder.is_dir() and not folder.stat().st_mode & 0o001:
                return folder
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    # As root the system tests start users' processes (useradd) on this checkout's
    # interpreter: under a 0700 folder every one of them fails with EACCES, 29 at once.
    if not IS_ROOT or hasattr(session.config, "workerinput"):
        return
    if not any(item.get_closest_marker("system") for item in session.items):
        return
    folder = unreachable_folder(TESTS.parent.resolve(), Path(sys.prefix).resolve())
    if folder is not None:
        raise pytest.UsageError(
            f"other users cannot reach this checkout: {folder} is not o+x (the system "
            "tests run as users made by useradd); run from a folder they can reach"
        )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-ebpf-if-root",
        action="store_true",
        help="as root, fail the run unless eBPF tests ran and passed (used by `make test`)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if IS_ROOT and item.get_closest_marker("ebpf") and report.skipped:
        # As root the real thing is there; a skip would hide a broken setup.
        report.outcome = "failed"
        report.longrepr = f"eBPF test skipped while root: {report.longrepr}"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Counted where the reports meet: the xdist controller, or the only process.
    if report.when == "call" and report.passed and "ebpf" in report.keywords:
        global EBPF_PASSED
        EBPF_PASSED += 1


EBPF_PASSED = 0


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller counts every worker's reports
    wanted = IS_ROOT and config.getoption("--require-ebpf-if-root")
    if wanted and EBPF_PASSED == 0 and exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print("\nFAILED: running as root but no eBPF test ran and passed")


@pytest.fixture(scope="session")
def workload_bin(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tests.support.workload import build

    return build(tmp_path_factory.mktemp("workload"))


@pytest.fixture
def workload(workload_bin):  # type: ignore[no-untyped-def]
    from tests.support.workload import Workload

    w = Workload(workload_bin)
    yield w
    w.kill()


@pytest.fixture(scope="session")
def escapes_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.programs import build_escapes

    return build_escapes(tmp_path_factory.mktemp("escapes"))


@pytest.fixture(scope="session")
def keys_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.programs import build_keys

    return build_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def energy_uj_denied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every RAPL energy_uj read fails as it does for non-root since CVE-2020-8694
    (root reads a mode-0000 file anyway, so the denial is simulated at the read)."""
    real = Path.read_text

    def deny(self: Path, *a: object, **k: object) -> str:
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_text", deny)
