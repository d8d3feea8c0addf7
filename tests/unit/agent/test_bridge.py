"""`bridge --ranks`: a user's own processes' ranks as JSON, a malformed list refused."""

from __future__ import annotations

import json
import os

from adaptyst_top.agent.bridge import print_ranks


def test_ranks_as_one_json_line() -> None:
    r, w = os.pipe()
    assert print_ranks(f"{os.getpid()},1", out=w) == 0
    os.close(w)
    told = json.loads(os.read(r, 4096))
    os.close(r)
    assert set(told) == {str(os.getpid()), "1"}
    assert told["1"] is None or isinstance(told["1"], int)  # init: not this user's, as a rule


def test_a_list_that_is_no_pids_is_refused() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for bad in ("", "1,,2", "-1", "x", "1;2", str(1 << 23), ",".join(["1"] * 5000)):
            assert print_ranks(bad, out=null) == 2, bad
    finally:
        os.close(null)
