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


def test_a_corpus_of_your_own_is_keyed_by_its_content_not_its_path(tmp_path, monkeypatch):
    """The same corpus file named as my-corpus.txt from its folder and as ../mywork/my-corpus.txt from a sibling
    folder, or copied elsewhere, is one run (one key, one folder); other content is another run. A file not there
    yet keeps its path in the key. The shared folder's corpora ({shared}/...) keep the keys recorded above."""
    from csebench.study.typed import Params

    work = tmp_path / "mywork"
    work.mkdir()
    (work / "my-corpus.txt").write_text("a sentence.\nanother sentence.\n", encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "copy.txt").write_bytes((work / "my-corpus.txt").read_bytes())
    params = Params.load(ROOT / "params.yaml")

    def key(corpus: str) -> str:
        own, suite, run = params.with_run_of_your_own("minilm", "simcse", corpus, {}, None, 42)
        return own.suite(suite).resolve(run, 42).key()

    monkeypatch.chdir(work)
    here = key("my-corpus.txt")
    assert key(str(work / "my-corpus.txt")) == here and key("../elsewhere/copy.txt") == here
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert key("../mywork/my-corpus.txt") == here
    (tmp_path / "elsewhere" / "copy.txt").write_text("a sentence.\n", encoding="utf-8")
    assert key("copy.txt") != here
    assert key("not-there.txt") != key("../not-there.txt")  # nothing to read yet: its path
