"""Every result says what made it (csebench.core.provenance), and the evaluation data is
SentEval's published data (the shipped manifest), or the result says it is not."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from csebench.core import provenance as P
from csebench.core.errors import DataError
from runhelpers import train_argv, write_config, write_corpus, write_mini_senteval
from runhelpers import assert_fails, run_cli

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"csebench", "git", "python", "torch", "transformers", "cuda", "cudnn", "device_type", "device", "world_size",
          "precision", "autocast", "data", "data_check"}


@pytest.fixture()
def published_check(monkeypatch):
    """The manifest check as users get it (conftest turns it off for the synthetic SentEval files)."""
    monkeypatch.delenv("CSEBENCH_DATA_CHECK", raising=False)
    P.reset()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- the manifest


def test_manifest_is_the_published_senteval(shared_dir):
    root = shared_dir / "senteval" / "downstream"
    files = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}
    assert set(P.manifest()) == set(files)
    for name, p in files.items():
        want = P.manifest()[name]
        assert want["sha256"] == _sha(p), name
        assert want["lines"] == len(p.read_bytes().splitlines()), name


def test_published_files_pass_and_are_hashed_once(shared_dir, published_check):
    from csebench.evaluation.sts import STS_SUBSETS, load_test_tasks
    from csebench.evaluation.transfer import TASKS, load_transfer_task

    root = shared_dir / "senteval" / "downstream"
    P._HASHES.clear()
    t0 = time.perf_counter()
    load_test_tasks(root)
    for t in TASKS:
        load_transfer_task(root, t)
    first = time.perf_counter() - t0
    n = len(P._HASHES)
    subsets = sum(len(v) for v in STS_SUBSETS.values())
    assert n == len(P.collect()["data"]) == 2 * subsets + 2 + 8 + 3 + 2 + 2  # STS, STS-B + SICK-R, MR..MRPC
    t0 = time.perf_counter()
    load_test_tasks(root)
    again = time.perf_counter() - t0
    assert len(P._HASHES) == n  # cached by (path, size, mtime): read again, hashed once
    block = P.collect()
    assert block["data_check"] == "published" and "data_not_published" not in block
    assert block["data"]["STS/STS12-en-test/STS.gs.MSRpar.txt"] == P.manifest()["STS/STS12-en-test/STS.gs.MSRpar.txt"]["sha256"]
    print(f"STS + transfer read with hashing {first:.2f} s, STS again {again:.2f} s")


def _senteval_copy(shared_dir: Path, tmp: Path) -> Path:
    root = tmp / "senteval"
    shutil.copytree(shared_dir / "senteval" / "downstream" / "STS" / "STSBenchmark", root / "STS" / "STSBenchmark")
    return root


def test_truncated_or_modified_published_file_is_refused(shared_dir, tmp_path, published_check):
    from csebench.evaluation.sts import load_stsb

    root = _senteval_copy(shared_dir, tmp_path)
    dev = root / "STS" / "STSBenchmark" / "sts-dev.csv"
    lines = dev.read_text(encoding="utf-8").splitlines(keepends=True)
    dev.write_text("".join(lines[:-2]), encoding="utf-8")
    with pytest.raises(DataError, match=r"sts-dev.csv has 1498 lines, SentEval's published STS/STSBenchmark/sts-dev.csv "
                                        r"has 1500 \(truncated or another version\?\): restore it from senteval.tar, or "
                                        r"set CSEBENCH_DATA_CHECK=0"):
        load_stsb(root, "dev")
    cols = lines[5].split("\t")
    cols[4] = "0.123"
    dev.write_text("".join(lines[:5] + ["\t".join(cols)] + lines[6:]), encoding="utf-8")
    with pytest.raises(DataError, match=r"sts-dev.csv differs from SentEval's published STS/STSBenchmark/sts-dev.csv "
                                        r"\(same 1500 lines, sha256 "):
        load_stsb(root, "dev")


def test_modified_data_is_named_in_the_provenance_when_the_check_is_off(shared_dir, tmp_path, monkeypatch):
    from csebench.evaluation.sts import load_stsb

    root = _senteval_copy(shared_dir, tmp_path)
    dev = root / "STS" / "STSBenchmark" / "sts-dev.csv"
    dev.write_text("".join(dev.read_text(encoding="utf-8").splitlines(keepends=True)[:100]), encoding="utf-8")
    monkeypatch.setenv("CSEBENCH_DATA_CHECK", "0")
    P.reset()
    load_stsb(root, "dev")
    load_stsb(root, "test")
    block = P.collect()
    assert block["data_check"] == "off" and block["data_not_published"] == ["STS/STSBenchmark/sts-dev.csv"]
    assert block["data"]["STS/STSBenchmark/sts-dev.csv"] == _sha(dev)
    assert "data NOT as published: STS/STSBenchmark/sts-dev.csv" in P.summary_line([block])


def test_train_refuses_a_truncated_published_file(tmp_path, capsys, published_check):
    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=24)
    assert_fails(capsys, train_argv(tmp_path, tmp_path / "run", None),
                 "sts-dev.csv has 24 lines, SentEval's published STS/STSBenchmark/sts-dev.csv has 1500",
                 outputs=[tmp_path / "run"])


# ----------------------------------------------------------------------------- what the block holds


def test_git_commit_and_dirty_flag_of_this_checkout_or_null(tmp_path):
    pkg = ROOT / "src" / "csebench"
    info = P.git_info()  # what every result records: this checkout's, found from the module's own place
    assert info == P.package_git_info(pkg)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode:
        pytest.skip("not a git checkout")
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout.strip())
    assert info == {"commit": head.stdout.strip(), "dirty": dirty}
    copy = tmp_path / "site-packages" / "csebench"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert P.package_git_info(copy) is None  # an installed copy: no commit to name
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert P.package_git_info(copy) is None  # inside another repository: not csebench's commit


def test_train_json_records_provenance_and_stays_byte_identical(tmp_path, capsys):
    write_corpus(tmp_path / "corpus.txt", n=48)
    write_mini_senteval(tmp_path / "se", pairs=24)
    cfg = write_config(tmp_path / "over.yaml", {"suites": {"ci": {"training": {"max_steps": 2, "eval_steps": 2}}}})
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        rc, err = run_cli(capsys, train_argv(tmp_path, out, cfg))
        assert rc == 0, err
    assert (outs[0] / "train.json").read_bytes() == (outs[1] / "train.json").read_bytes()
    block = json.loads((outs[0] / "train.json").read_text())["provenance"]
    assert FIELDS <= set(block) and block["world_size"] == 1 and block["device_type"] == "cpu"
    assert block["device"] == P.cpu_name() and block["precision"] == "auto" and block["autocast"] == "fp32"
    import torch
    import transformers

    assert block["torch"] == torch.__version__ and block["transformers"] == transformers.__version__
    assert block["corpus"] == {"file": "corpus.txt", "sha256": _sha(tmp_path / "corpus.txt")}
    dev = tmp_path / "se" / "STS" / "STSBenchmark" / "sts-dev.csv"
    sick_dev = tmp_path / "se" / "SICK" / "SICK_trial.txt"  # SICK-R dev, scored at the selected checkpoint
    assert block["data"] == {"STS/STSBenchmark/sts-dev.csv": _sha(dev), "SICK/SICK_trial.txt": _sha(sick_dev)}
    # 24 of their 1500 / 500 pairs (the check is off here)
    assert sorted(block["data_not_published"]) == ["SICK/SICK_trial.txt", "STS/STSBenchmark/sts-dev.csv"]
    assert str(tmp_path) not in json.dumps(block)  # no paths: the same bytes from any folder


def test_evaluation_and_analysis_results_record_provenance(tmp_path, capsys, shared_dir, tiny_encoder, published_check):
    from runhelpers import make_senteval

    model = tmp_path / "model"
    tiny_encoder("avg").save(model)
    se = str(shared_dir / "senteval")
    rc, err = run_cli(capsys, ["eval-sts", "--model", str(model), "--senteval", se, "--max-sts-pairs", "20",
                               "--out", str(tmp_path / "sts.json"), "--no-progress"])
    assert rc == 0, err
    block = json.loads((tmp_path / "sts.json").read_text())["provenance"]
    assert FIELDS <= set(block) and block["data_check"] == "published" and "data_not_published" not in block
    assert len(block["data"]) == 2 * 24 + 1 + 1 and "corpus" not in block  # STS12-16 pairs and scores, STS-B test, SICK-R
    rc, err = run_cli(capsys, ["analyze", "align_uniform", "--model", str(model), "--senteval", se,
                               "--out", str(tmp_path / "au.json")])
    assert rc == 0, err
    block = json.loads((tmp_path / "au.json").read_text())["provenance"]
    assert list(block["data"]) == ["STS/STSBenchmark/sts-test.csv"] and block["autocast"] == "fp32"
    small = make_senteval(tmp_path / "small", n=20)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CSEBENCH_DATA_CHECK", "0")
        rc, err = run_cli(capsys, ["eval-transfer", "--model", str(model), "--senteval", str(small), "--tasks", "TREC",
                                   "--out", str(tmp_path / "transfer.json"), "--no-progress"])
    assert rc == 0, err
    block = json.loads((tmp_path / "transfer.json").read_text())["provenance"]
    assert sorted(block["data"]) == ["TREC/TREC_10.label", "TREC/train_5500.label"]
    assert block["data_not_published"] == ["TREC/TREC_10.label", "TREC/train_5500.label"]


# ----------------------------------------------------------------------------- footers


def _block(**kw) -> dict:
    b = {"csebench": "0.1.0", "git": {"commit": "0123456789abcdef", "dirty": False}, "python": "3.12.3",
         "torch": "2.13.0", "transformers": "4.57.1", "cuda": None, "cudnn": None, "device_type": "cpu",
         "device": "Intel(R) Xeon(R) Processor", "world_size": 1, "precision": "fp32", "autocast": "fp32",
         "data": {"STS/STSBenchmark/sts-test.csv": "ab"}, "data_check": "published"}
    b.update(kw)
    return b


def test_summary_line_says_what_is_common_and_what_differs():
    same = P.summary_line([_block(), _block()])
    assert same == ("Provenance (2 result files): csebench 0.1.0 git 0123456789 · Python 3.12.3 · torch 2.13.0 · "
                    "transformers 4.57.1 · CUDA none · cuDNN none · device Intel(R) Xeon(R) Processor · 1 process · "
                    "autocast fp32 · SentEval data sha256-checked.")
    mixed = P.summary_line([_block(), _block(torch="2.12.0", device="NVIDIA H100 80GB HBM3", cuda="12.4"), None])
    assert "Made with DIFFERENT torch 2.13.0 (1) / 2.12.0 (1); CUDA none (1) / 12.4 (1); device " in mixed
    assert "1 file(s) record no provenance" in mixed
    assert P.mixed_note(mixed).startswith(" Made with DIFFERENT torch") and P.mixed_note(same) == ""
    assert P.summary_line([None]) == "Provenance: not recorded in the 1 result file(s) this was made from."


def test_report_tables_readme_and_figures_carry_the_footer(tmp_path, monkeypatch):
    from csebench.results import plotting
    from csebench.results.renderers import suite as rp
    from test_report import render_suite, suite_params

    for i, (method, torch_version) in enumerate([("simcse", "2.13.0"), ("iscse", "2.12.0")]):
        d = tmp_path / "s" / "runs" / method / "seed1"
        d.mkdir(parents=True)
        tasks = {t: 70.0 + i for t in ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]}
        (d / "sts.json").write_text(json.dumps({"tasks": tasks, "avg": 70.0 + i, "provenance": _block(torch=torch_version),
                                                "run_info": {"method": method, "backbone": "bert-base", "seed": 1}}))
        (d / "train.json").write_text(json.dumps({"method": method, "provenance": _block(torch=torch_version)}))
    stamped = []
    real = rp.save_png

    def spy(fig, path, dpi=130, footer="", caveat=""):
        stamped.append(footer)
        real(fig, path, dpi, footer, caveat)
        assert any(footer.split(" · ")[0] in t.get_text() for t in fig.texts)

    monkeypatch.setattr(rp, "save_png", spy)
    monkeypatch.setattr(plotting, "save_png", spy)
    render_suite(tmp_path, suite_params("s", {m: (m, "bert-base") for m in ("simcse", "iscse")}), "s")
    md = (tmp_path / "s" / "tables" / "sts.md").read_text()
    footer = md.rstrip().splitlines()[-1]
    assert footer.startswith("Provenance (4 result files):") and "Made with DIFFERENT torch 2.13.0 (2) / 2.12.0 (2)" in footer
    rows = list(csv.DictReader(open(tmp_path / "s" / "tables" / "sts.csv", encoding="utf-8")))
    assert rows and all(r["provenance"] == footer for r in rows) and {r["method"] for r in rows} == {"simcse", "iscse"}
    tex = (tmp_path / "s" / "tables" / "sts.tex").read_text()
    assert tex.splitlines()[1] == "% " + footer and r"Made with DIFFERENT torch" in tex.split(r"\caption{")[1]
    assert f"- {footer}" in (tmp_path / "s" / "README.md").read_text()
    assert stamped == [footer, footer]  # the STS average figure, the training curves' placeholder


def test_reproduce_item_and_analysis_table_carry_the_footer(tmp_path):
    from csebench.results import analysis_plots
    from csebench.results.render import context, get
    from test_reproduce import _item, _params_with_suite, _write_run

    results = tmp_path / "results"
    _write_run(results, "a", 1, 80.0, 70.0)
    sts = results / "t" / "runs" / "a" / "seed1" / "sts.json"
    sts.write_text(json.dumps({**json.loads(sts.read_text()), "provenance": _block()}))
    it = _item(layout={"corner": "x", "columns": [{"name": "Avg.", "metric": "sts:Avg"}], "rows": [{"label": "A", "run": "a"}]})
    ctx = context(it, _params_with_suite(), str(results), "paper", tmp_path / "out")
    get("grid").render(ctx)
    md = (tmp_path / "out" / "table-99.md").read_text()
    assert "Provenance (1 result file): csebench 0.1.0 git 0123456789" in md and "1 file(s) record no provenance" not in md
    assert [r["provenance"] for r in csv.DictReader(open(tmp_path / "out" / "table-99.csv"))] == [ctx.provenance]
    assert (tmp_path / "out" / "table-99.tex").read_text().splitlines()[1] == "% " + ctx.provenance
    res = {"full_dim": 32, "full": {"avg": 50.0}, "projected": {}, "provenance": _block()}
    analysis_plots.embed_dim_table({"m": res}, tmp_path / "t.md", tmp_path / "t.csv", footer=P.summary_line([_block()]))
    assert P.summary_line([_block()]) in (tmp_path / "t.md").read_text()
    assert next(csv.DictReader(open(tmp_path / "t.csv")))["provenance"] == P.summary_line([_block()])


def test_every_json_output_goes_through_the_strict_writer():
    """Only csebench.core.io serialises JSON for output (allow_nan=False); the two other json.dumps hash or
    search a config in memory."""
    allowed = {"core/io.py", "study/params.py", "results/plan.py"}
    src = ROOT / "src" / "csebench"
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in src.rglob("*.py") if str(p.relative_to(src)) not in allowed
            for n, line in enumerate(p.read_text().splitlines(), 1) if "json.dump" in line]
    assert hits == []
    for name in ("study/params.py", "results/plan.py"):
        lines = [line for line in (ROOT / "src" / "csebench" / name).read_text().splitlines() if "json.dump" in line]
        assert len(lines) == 1 and ("hashlib" in lines[0] or "in json.dumps(it.layout)" in lines[0]), lines


def test_json_writer_is_strict_and_names_the_key(tmp_path, caplog):
    from csebench.core.io import write_json

    with pytest.raises(ValueError, match=r"non-finite number at tasks.STS12, x.1: not valid JSON"):
        write_json(tmp_path / "a.json", {"tasks": {"STS12": float("nan"), "STS13": 1.0}, "x": [0.0, float("-inf")]})
    assert not (tmp_path / "a.json").exists()
    write_json(tmp_path / "b.json", {"tasks": {"STS12": float("nan")}, "avg": float("inf")}, undefined_ok=True)
    assert json.loads((tmp_path / "b.json").read_text(), parse_constant=pytest.fail) == {"tasks": {"STS12": None}, "avg": None}
    assert sum("is undefined (not a finite number): written as null" in r.getMessage() for r in caplog.records) == 2


def test_sts_of_a_constant_model_is_an_error_not_a_null_result(tmp_path, capsys, shared_dir, tiny_encoder, monkeypatch):
    """A model whose embeddings are all equal has undefined Spearman correlations: sts.json once held bare NaN
    (which strict JSON parsers reject), then an all-null file with exit 0; an undefined average is an error,
    and nothing is written."""
    import torch

    from csebench.evaluation import embeddings

    tiny_encoder("avg").save(tmp_path / "model")
    monkeypatch.setattr(embeddings, "model_encoder", lambda *a, **k: lambda s: torch.ones(len(s), 4))
    rc, err = run_cli(capsys, ["eval-sts", "--model", str(tmp_path / "model"), "--senteval", str(shared_dir / "senteval"),
                               "--max-sts-pairs", "20", "--out", str(tmp_path / "sts.json"), "--no-progress"])
    assert rc == 2 and "the STS average of" in err and "is undefined (STS12, " in err, err
    assert not (tmp_path / "sts.json").exists()
