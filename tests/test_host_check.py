import re
import sys

import pytest

from runhelpers import ROOT


def test_host_check_prints_a_round_and_refuses_zero_rounds(capsys, monkeypatch):
    """benchmarks/host_check.py (BENCHMARKS.md): one line a round, fresh-memory cost and one core's product time."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import host_check

    assert host_check.main(["--rounds", "1", "--pause", "0", "--size-mb", "4"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"round 1: 4 MB written [\d.]+ ms/MB reused at once, [\d.]+ ms/MB after 0 s; fp32 1024x1024 "
                        r"product x40 on one thread [\d.]+ s \((steal [\d.]+%|steal n/a)\)\n", out), out
    with pytest.raises(SystemExit) as stop:
        host_check.main(["--rounds", "0"])
    assert stop.value.code == 2 and "at least 1" in capsys.readouterr().err
    sys.modules.pop("host_check", None)
