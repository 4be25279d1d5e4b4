"""MTEB beside SentEval: `csebench eval-mteb` runs mteb's own evaluation loop on small
local tasks built here (MTEB's data layout, loaded by mteb through `datasets`), writes MTEB's result
files; offline and bad-input errors; the opt-in `mteb:` suite section, the rule, the plan and the rows."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from csebench.cli import main
from csebench.core.errors import ConfigError
from csebench.study.params import load_params
from csebench.study.typed import Params
from runhelpers import PARAMS, ROOT, SHARED, write_config

WORDS = "cat dog bird fish tree river stone cloud bread lamp".split()


def needs_mteb() -> None:
    """Skip, saying why, where the optional [mteb] extra is not installed (the tests of csebench's own
    messages without mteb run anyway)."""
    pytest.importorskip("mteb", reason="the optional [mteb] extra is not installed: pip install -e '.[mteb]'")


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def local_tasks(root):
    """An STS and a classification task in MTEB's format (a dataset folder of split files), defined
    like mteb's own tasks: an AbsTask subclass whose metadata names the dataset. The STS pairs are
    the first 60 of STS-B dev (real sentences: no two cosines tie)."""
    needs_mteb()
    from mteb.abstasks.classification import AbsTaskClassification
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    with open(SHARED / "senteval/downstream/STS/STSBenchmark/sts-dev.csv", encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for _, line in zip(range(60), fh)]
    pairs = [{"sentence1": r[5], "sentence2": r[6], "score": float(r[4])} for r in rows]
    write_jsonl(root / "sts" / "test.jsonl", pairs)
    for split, n in (("train", 40), ("test", 24)):
        write_jsonl(root / "cls" / f"{split}.jsonl",
                    [{"text": f"{WORDS[i % 2]} {WORDS[(i * 7) % 10]} {WORDS[(i * 3) % 10]}", "label": i % 2} for i in range(n)])

    def meta_for(name, folder, kind, score):
        return TaskMetadata(name=name, dataset={"path": str(root / folder), "revision": "local"}, description="csebench test task",
                            type=kind, category="t2t" if kind == "STS" else "t2c", modalities=["text"],
                            eval_splits=["test"], eval_langs=["eng-Latn"], main_score=score)

    class LocalSTS(AbsTaskSTS):
        metadata = meta_for("CsebenchLocalSTS", "sts", "STS", "cosine_spearman")
        min_score, max_score = 0, 5

    class LocalClassification(AbsTaskClassification):
        metadata = meta_for("CsebenchLocalClassification", "cls", "Classification", "accuracy")

    return [LocalSTS(), LocalClassification()], pairs


@pytest.fixture(scope="module")
def mteb_run(tmp_path_factory, shared_dir):
    """`csebench eval-mteb` on the packaged MiniLM (a real encoder: a random tiny BERT's cosines all lie
    near 1, where float32 rounding reorders them) and the two local tasks (the names resolved to them)."""
    needs_mteb()
    import datasets

    from csebench.model.encoder import packaged_model_dir
    from csebench.evaluation import mteb_eval

    tmp = tmp_path_factory.mktemp("mteb")
    model = packaged_model_dir()
    tasks, pairs = local_tasks(tmp / "data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", tmp / "hf-datasets")  # the local tasks' arrow cache
        mp.setattr(mteb_eval, "resolve_tasks", lambda names: [t for t in tasks if t.metadata.name in names])
        out = tmp / "results" / "ci" / "runs" / "simcse" / "seed1" / "mteb"
        rc = main(["eval-mteb", "--model", str(model), "--tasks", "CsebenchLocalSTS", "CsebenchLocalClassification",
                   "--suite", "ci", "--run", "simcse", "--seed", "1", "--out", str(out), "--no-progress"])
    assert rc == 0
    return {"out": out, "model": model, "pairs": pairs, "results": tmp / "results"}


def test_eval_mteb_writes_mteb_result_files_from_the_real_loop(mteb_run):
    needs_mteb()
    from mteb import TaskResult

    from csebench.evaluation.embeddings import model_encoder, model_fingerprint
    from csebench.evaluation.mteb_eval import read_task_result

    out = mteb_run["out"]
    assert sorted(p.name for p in out.iterdir()) == ["CsebenchLocalClassification.json", "CsebenchLocalSTS.json",
                                                      "model_meta.json", "mteb.json"]
    for f in out.iterdir():  # strict JSON, as every csebench output
        json.loads(f.read_text(), parse_constant=lambda c: pytest.fail(f"{f}: bare {c}"))
    sts = TaskResult.from_disk(out / "CsebenchLocalSTS.json")  # mteb reads its own layout back
    assert sts.task_name == "CsebenchLocalSTS" and sts.dataset_revision == "local" and list(sts.scores) == ["test"]
    # the score is the model's: cosine Spearman of csebench's own embeddings of the pairs
    encode = model_encoder(str(mteb_run["model"]))
    a, b = (encode([p[k] for p in mteb_run["pairs"]]).float().numpy() for k in ("sentence1", "sentence2"))
    a, b = a.astype(np.float64), b.astype(np.float64)
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    expected = 100 * stats.spearmanr(cosine, [p["score"] for p in mteb_run["pairs"]])[0]
    assert 100 * sts.get_score() == pytest.approx(expected, abs=1e-3)
    summary = json.loads((out / "mteb.json").read_text())
    assert summary["protocol"] == "MTEB protocol" and summary["mteb"]
    assert summary["tasks"]["CsebenchLocalSTS"]["score"] == pytest.approx(expected, abs=1e-3)
    assert summary["tasks"]["CsebenchLocalSTS"]["main_score"] == "cosine_spearman"
    cls = summary["tasks"]["CsebenchLocalClassification"]
    assert cls["type"] == "Classification" and 0 <= cls["score"] <= 100
    assert read_task_result(out / "CsebenchLocalClassification.json") == pytest.approx(
        100 * TaskResult.from_disk(out / "CsebenchLocalClassification.json").get_score())
    assert summary["run_info"]["name"] == "simcse" and summary["model_fingerprint"] == model_fingerprint(mteb_run["model"])
    assert summary["provenance"]["torch"]
    meta = json.loads((out / "model_meta.json").read_text())
    assert meta["name"] == "csebench/ci__simcse__seed1" and meta["revision"] == summary["model_fingerprint"]


def test_mteb_rows_of_a_suite(mteb_run, tmp_path):
    from csebench.evaluation.mteb_eval import mteb_rows

    config = write_config(tmp_path / "over.yaml", {"suites": {"ci": {
        "runs": [{"name": "simcse", "backbone": "tiny", "method": "simcse"}], "mteb": {"tasks": ["STS12"]}}}})
    rows = mteb_rows(Params.load(PARAMS, [config]).suite("ci"), mteb_run["results"])
    summary = json.loads((mteb_run["out"] / "mteb.json").read_text())
    assert [(r["run"], r["seed"], r["task"]) for r in rows] == [("simcse", 1, "CsebenchLocalSTS"), ("simcse", 1, "CsebenchLocalClassification")]
    assert rows[0]["score"] == pytest.approx(summary["tasks"]["CsebenchLocalSTS"]["score"], abs=1e-3)
    assert rows[0]["label"] == "SimCSE" and rows[1]["metric"] == "accuracy"
    with pytest.raises(ConfigError, match=r"suites\.ci has no mteb: section"):
        mteb_rows(Params.load(PARAMS).suite("ci"), mteb_run["results"])
    with pytest.raises(Exception, match=r"MTEB result not found: .*/ci/runs/simcse/seed1/mteb/mteb\.json"):
        mteb_rows(Params.load(PARAMS, [config]).suite("ci"), tmp_path)


def write_mteb_results(results, suite, run, seed, scores):
    """What `csebench eval-mteb` leaves in a run's mteb/ folder, for ``scores`` {task: (type, metric, score x100)}:
    each task's result file (MTEB's TaskResult layout: main scores per split) and the mteb.json summary."""
    from csebench.core.io import write_json

    out = results / suite / "runs" / run / f"seed{seed}" / "mteb"
    for task, (_, _, score) in scores.items():
        write_json(out / f"{task}.json", {"task_name": task, "scores": {"test": [{"main_score": score / 100, "hf_subset": "default"}]}})
    write_json(out / "mteb.json", {"protocol": "MTEB protocol", "tasks": {
        t: {"type": kind, "main_score": metric, "score": score} for t, (kind, metric, score) in scores.items()}})


def test_the_mteb_table_of_a_suite_from_result_files(tmp_path, capsys):
    """The suite-level item mteb/<suite>, labelled "MTEB protocol" (not SentEval's "all"
    setting), one row per run, each task's main score as mean ± std over seeds; runs not yet scored named."""
    import csv

    from csebench.results.render import item_outputs, render_item
    from csebench.results.registry import load_registry

    config = write_config(tmp_path / "over.yaml", {"suites": {"ci": {"seeds": [1, 2], "mteb": {"tasks": ["STS12", "Banking77Classification"]}}}})
    params, results = load_params(PARAMS, [config]), tmp_path / "results"
    for seed, (sts, cls) in {1: (70.0, 80.0), 2: (72.0, 81.0)}.items():
        write_mteb_results(results, "ci", "simcse", seed, {"STS12": ("STS", "cosine_spearman", sts),
                                                           "Banking77Classification": ("Classification", "accuracy", cls)})
    item = load_registry().item("mteb/ci")
    written = render_item("mteb/ci", params, str(results))
    assert [str(p) for p in written] == item_outputs(item, str(results)) == [f"{results}/ci/tables/mteb.{e}" for e in ("md", "csv", "tex")]
    md = (results / "ci" / "tables" / "mteb.md").read_text()
    assert md.startswith("# MTEB protocol: suite `ci`") and "not in SentEval's \"all\" setting" in md
    assert "| Run | Method | Seeds | STS12 | Banking77Classification |" in md
    assert "| simcse | SimCSE | 2 | 71.00 ± 1.41 | 80.50 ± 0.71 |" in md
    assert "| STS12 | STS | cosine_spearman |" in md
    assert "Not yet run on MTEB: `distillcse/seed1`, `distillcse/seed2`, `backbone/seed1`, `backbone/seed2`." in md
    rows = list(csv.DictReader(open(results / "ci" / "tables" / "mteb.csv")))
    assert [(r["run"], r["task"], r["seeds"], r["protocol"]) for r in rows] == [
        ("simcse", "STS12", "2", "MTEB protocol"), ("simcse", "Banking77Classification", "2", "MTEB protocol")]
    assert float(rows[0]["mean"]) == 71.0 and float(rows[1]["std"]) == pytest.approx(0.7071, abs=1e-4)
    assert "MTEB protocol" in (results / "ci" / "tables" / "mteb.tex").read_text()
    # a suite that does not run MTEB has no such table: one line, exit 2
    assert main(["results", "render", "--item", "mteb/demo", "--results", str(results)]) == 2
    assert "suites.demo has no mteb: section" in capsys.readouterr().err


def test_the_mteb_table_from_the_real_loop(mteb_run, tmp_path):
    from csebench.results.render import render_item

    config = write_config(tmp_path / "over.yaml", {"suites": {"ci": {
        "runs": [{"name": "simcse", "backbone": "tiny", "method": "simcse"}], "mteb": {"tasks": ["STS12"]}}}})
    render_item("mteb/ci", load_params(PARAMS, [config]), str(mteb_run["results"]), out=tmp_path)
    score = json.loads((mteb_run["out"] / "mteb.json").read_text())["tasks"]["CsebenchLocalSTS"]["score"]
    assert f"| simcse | SimCSE | 1 | {score:.2f} |" in (tmp_path / "mteb.md").read_text()


def test_a_missing_dataset_offline_is_one_line(tmp_path, monkeypatch, capsys):
    needs_mteb()
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty-cache")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    assert main(["eval-mteb", "--model", "packaged:minilm", "--tasks", "STS12", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"csebench eval-mteb: error: MTEB task STS12 needs the dataset mteb/sts12-sts (revision a0d554a64d88), "
                   f"which is not in the Hugging Face datasets cache {tmp_path / 'empty-cache'} and cannot be downloaded "
                   "(ConnectionError): fetch it once with network (HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 csebench eval-mteb "
                   "--download-only --tasks STS12), or point HF_DATASETS_CACHE (or HF_HOME) at a cache that holds it")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv,message", [
    (["--tasks", "STS121", "--model", "packaged:minilm", "--out", "x"], "unknown MTEB task 'STS121' (did you mean 'STS12'?)"),
    (["--tasks", "STS12"], "eval-mteb: --model and --out are required (only --download-only runs without them)"),
])
def test_bad_eval_mteb_arguments(argv, message, capsys):
    needs_mteb()
    assert main(["eval-mteb", *argv]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"csebench eval-mteb: error: {message}"


def test_without_the_mteb_package_the_error_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mteb", None)  # import mteb raises ImportError
    assert main(["eval-mteb", "--tasks", "STS12", "--download-only"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "csebench eval-mteb: error: MTEB evaluation needs the mteb package: pip install -e '.[mteb]' (make setup installs it)")


def test_default_tasks_are_mtebs_english_sts_and_a_small_classification_and_retrieval_set():
    needs_mteb()
    from csebench.evaluation.mteb_eval import DEFAULT_TASKS, resolve_tasks

    tasks = {t.metadata.name: t for t in resolve_tasks(DEFAULT_TASKS)}
    kinds = {name: t.metadata.type for name, t in tasks.items()}
    assert sorted(n for n, k in kinds.items() if k == "STS") == sorted(
        ["BIOSSES", "SICK-R", "STS12", "STS13", "STS14", "STS15", "STS16", "STS17", "STS22.v2", "STSBenchmark"])
    assert sorted(k for k in kinds.values() if k != "STS") == ["Classification", "Classification", "Retrieval", "Retrieval"]
    assert tasks["STS17"].hf_subsets == ["en-en"] and tasks["STS22.v2"].hf_subsets == ["en"]  # English only
    assert tasks["AmazonCounterfactualClassification"].eval_splits == ["test"]


def test_suite_mteb_section_is_opt_in_and_checked(tmp_path):
    from csebench.evaluation.mteb_eval import DEFAULT_TASKS
    from csebench.study.jobs import suite_mteb_tasks

    params = load_params(PARAMS)
    assert all(suite_mteb_tasks(params, s) is None for s in params["suites"])  # no suite runs MTEB unless asked
    for section, tasks in (({}, DEFAULT_TASKS), (None, DEFAULT_TASKS), ({"tasks": ["STS12"]}, ["STS12"])):
        config = write_config(tmp_path / "over.yaml", {"suites": {"ci": {"mteb": section}}})
        assert suite_mteb_tasks(load_params(PARAMS, [config]), "ci") == tasks
    for section, message in (({"task": ["STS12"]}, r"over\.yaml: suites\.ci\.mteb: unknown key 'task'"),
                             ({"tasks": []}, r"over\.yaml: suites\.ci\.mteb\.tasks: .*"), ({"tasks": "STS12"}, r"expected a list")):
        config = write_config(tmp_path / "over.yaml", {"suites": {"ci": {"mteb": section}}})
        with pytest.raises(ConfigError, match=message):
            load_params(PARAMS, [config])


def test_an_mteb_suite_adds_one_eval_mteb_job_per_evaluated_run(tmp_path):
    from csebench.study.jobs import evaluated_jobs
    from csebench.results.plan import suite_plan

    config = write_config(tmp_path / "over.yaml", {"suites": {"ci": {"mteb": {"tasks": ["STS12", "SciFact"]}}}})
    params = load_params(PARAMS, [config])
    evaluated = len(evaluated_jobs(params, "ci"))
    assert suite_plan(Params.of(params).suite("ci")).jobs == suite_plan(Params.of(load_params(PARAMS)).suite("ci")).jobs + evaluated + 1  # + the MTEB table
    from runhelpers import run_snakemake

    proc = run_snakemake(["-n", "-p", "--forceall", "--config", "suites=[ci]", "reproduce=none", "plan=false",
                          f"params_overrides=[{config}]"], cwd=ROOT, timeout=600,
                         env=dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    commands = [line for line in (proc.stdout + proc.stderr).splitlines() if " eval-mteb " in line]
    assert len(commands) == evaluated
    assert any("--tasks STS12 SciFact --precision fp32 --suite ci --run simcse --seed 1 --out \"$(dirname "
               "results/ci/runs/simcse/seed1/mteb/mteb.json)\"" in c for c in commands), commands
    assert "--item mteb/ci" in proc.stdout + proc.stderr  # the suite's MTEB table, asked for by its README
