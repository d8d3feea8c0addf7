"""scripts/reachable.sh: a checkout under a folder others cannot pass (root's home is
0700) is run where the users the system tests make can reach it, in a private mount
namespace that changes nothing outside it (a clone there failed 36 tests)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.marks import requires_root
from tests.support.paths import REPO

pytestmark = requires_root


def test_a_checkout_behind_a_0700_folder_is_reachable_inside_only() -> None:
    # Not pytest's tmp_path: its own base is 0700 (root's).
    base = Path(tempfile.mkdtemp(prefix="adaptyst-reach-", dir="/tmp"))
    base.chmod(0o755)
    try:
        _check(base)
    finally:
        shutil.rmtree(base)


def _check(base: Path) -> None:
    blocked = base / "home"
    checkout = blocked / "me" / "repo"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "reachable.sh", checkout / "scripts")
    (checkout / "marker").write_text("ours\n")
    (blocked / "me").chmod(0o755)
    (blocked / ".tools").mkdir()  # what else lies there (root's ~/.pyenv) stays there
    (blocked / ".tools" / "python").write_text("a tool\n")
    blocked.chmod(0o700)
    probe = (
        f"stat -c %a {blocked} {blocked / 'me'}; "
        f"setpriv --reuid=65534 --regid=65534 --clear-groups cat {checkout / 'marker'}; "
        f"head -c 1 {blocked / '.tools' / 'python'}"
    )
    inside = subprocess.run(
        [str(checkout / "scripts" / "reachable.sh"), "sh", "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.split() == ["711", "755", "ours", "a"]
    assert "is not o+x" in inside.stderr
    # Outside, nothing changed: the folder as it was, no mount left, no folder in /run.
    assert oct(blocked.stat().st_mode & 0o777) == "0o700"
    assert str(blocked) not in Path("/proc/self/mountinfo").read_text()
    assert not list(Path("/run").glob("adaptyst-top-checkout.*"))
    # A reachable checkout runs the command as it is.
    blocked.chmod(0o755)
    plain = subprocess.run(
        [str(checkout / "scripts" / "reachable.sh"), "true"], capture_output=True, text=True
    )
    assert plain.returncode == 0 and plain.stderr == ""
