"""The checked-settings cache of csebench.objectives.validate_objectives: a built-in term's settings that
passed are read back without importing the term (torch), exactly as checked; what fails is checked anew
each time; a change to the source, the settings or the training settings is a miss."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

import csebench.objectives as objectives
from csebench.core.errors import ConfigError
from runhelpers import PARAMS, ROOT

TRAINING = SimpleNamespace(batch_size=64, compile=False)
GIVEN = {
    "instance_smoothing": {"buffer_size": 256, "beta": 1.5},
    "distillation": {"shuffle": "rank_range", "rank_range": [2, 5], "teachers": {"run": "simcse", "seeds": [42, 43]}},
    "gaussian_negatives": {},
}


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CSEBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("CSEBENCH_NO_SETTINGS_CACHE", raising=False)
    monkeypatch.setattr(objectives, "_checked_memo", {})
    return tmp_path / "checked-settings"


def test_settings_read_back_are_the_settings_checked(cache, monkeypatch):
    monkeypatch.setenv("CSEBENCH_NO_SETTINGS_CACHE", "1")
    direct = objectives.validate_objectives(GIVEN, "run x", TRAINING)
    assert not cache.exists()
    monkeypatch.delenv("CSEBENCH_NO_SETTINGS_CACHE")
    first = objectives.validate_objectives(GIVEN, "run x", TRAINING)
    assert sorted(p.name.split("-")[0] for p in cache.iterdir()) == ["distillation", "gaussian_negatives", "instance_smoothing"]
    objectives._checked_memo.clear()  # read from the files, as another process would
    monkeypatch.setattr(objectives, "term_class", lambda key: pytest.fail(f"{key} was checked again"))
    again = objectives.validate_objectives(GIVEN, "run x", TRAINING)
    assert direct == first == again
    assert repr(direct) == repr(again)  # the same types (a tuple stays a tuple, 1.5 stays 1.5)
    again["instance_smoothing"]["beta"] = 9.0  # a caller's copy: the next read is untouched
    assert objectives.validate_objectives(GIVEN, "run x", TRAINING)["instance_smoothing"]["beta"] == 1.5


def test_what_fails_is_checked_each_time_and_any_change_is_a_miss(cache, monkeypatch):
    objectives.validate_objectives(GIVEN, "run x", TRAINING)
    files = set(cache.iterdir())
    # the distillation settings passed at batch 64; at batch 4 rank 2..5 does not exist: the check runs, and fails
    with pytest.raises(ConfigError, match="rank_range starts at rank"):
        objectives.validate_objectives({"distillation": GIVEN["distillation"]}, "run x", SimpleNamespace(batch_size=2, compile=False))
    with pytest.raises(ConfigError, match="buffer_size"):
        objectives.validate_objectives({"instance_smoothing": {"buffer_size": -1}}, "run x", TRAINING)
    assert set(cache.iterdir()) == files  # nothing stored for what failed
    objectives.validate_objectives({"instance_smoothing": {"buffer_size": 128}}, "run x", TRAINING)
    assert len(set(cache.iterdir()) - files) == 1  # other settings: another file
    monkeypatch.setattr(objectives, "_source_digest", lambda: "another csebench")
    objectives.validate_objectives({"gaussian_negatives": {}}, "run x", TRAINING)
    assert len(set(cache.iterdir()) - files) == 2  # other source: checked again, stored apart


def test_a_cache_file_that_does_not_read_back_is_checked_again(cache):
    objectives.validate_objectives({"gaussian_negatives": {}}, "run x", TRAINING)
    (path,) = cache.iterdir()
    good = path.read_text()
    for bad in ("{'ratio': ", "__import__('os')", "[1, 2]"):
        path.write_text(bad)
        objectives._checked_memo.clear()
        assert repr(objectives.validate_objectives({"gaussian_negatives": {}}, "run x", TRAINING)["gaussian_negatives"]) == good
        assert path.read_text() == good  # rewritten from the check


def test_planning_every_run_a_second_time_imports_no_torch(tmp_path):
    """What a Snakemake build does before planning (Runs.check: every run of params.yaml resolved): the first
    process checks the terms' settings (and imports torch), the next reads them back."""
    code = ("import sys; from csebench.study.params import load_params; from csebench.study.jobs import Runs; "
            f"Runs(load_params({str(PARAMS)!r})).check(); print('torch' in sys.modules)")
    env = {"PATH": "/usr/bin:/bin", "CSEBENCH_CACHE": str(tmp_path), "HOME": str(tmp_path)}
    seen = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300, check=True).stdout.strip() for _ in range(2)]
    assert seen == ["True", "False"]
