"""Every run of params.yaml keeps its key (and so its folder, results/runs/KEY/seedN, and whatever was trained
there) across a change that should not alter any run: tests/fixtures/run_keys.json holds each (suite, run, seed)
of params.yaml with its key, as computed before the package was carved into stage packages (commit 85dae8f).
A change that alters runs on purpose (a hyperparameter of params.yaml) regenerates the file, and says so."""

from __future__ import annotations

import json
from pathlib import Path

from csebench.study.jobs import suite_jobs
from csebench.study.params import list_suites, load_params
from csebench.study.resolve import resolve_run

ROOT = Path(__file__).resolve().parents[1]


def current_keys() -> dict[str, str]:
    params = load_params(ROOT / "params.yaml")
    return {f"{suite}/{run}/seed{seed}": resolve_run(params, suite, run, seed).key()
            for suite in list_suites(params) for run, seed in suite_jobs(params, suite)}


def test_every_run_of_params_yaml_keeps_its_key():
    recorded = json.loads((ROOT / "tests" / "fixtures" / "run_keys.json").read_text(encoding="utf-8"))
    now = current_keys()
    missing = sorted(set(recorded) - set(now))
    changed = sorted(j for j in set(recorded) & set(now) if recorded[j] != now[j])
    assert not missing, f"runs of params.yaml no longer listed: {missing[:10]}"
    assert not changed, "runs whose key changed: " + ", ".join(f"{j} {recorded[j]} -> {now[j]}" for j in changed[:10])
    assert len(recorded) >= 400
