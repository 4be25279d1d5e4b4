"""Saved models load cleanly, carry a model card, and `csebench push` uploads them."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from csebench.study.params import BackboneConfig
from csebench.model.encoder import build_encoder
from runhelpers import assert_fails, copy_run, needs_pipeline

SENTS = ["a sentence", "another longer sentence here"]

LOAD = textwrap.dedent("""
    import sys, torch
    from transformers import AutoModel
    from sentence_transformers import SentenceTransformer
    SENTS = sys.argv[2:]
    for i, folder in enumerate(sys.argv[1].split(",")):
        print(f"== FOLDER {i}", flush=True)
        model, info = AutoModel.from_pretrained(folder, output_loading_info=True)
        print("INFO", sorted((k, sorted(v)) for k, v in info.items() if k != "error_msgs"), flush=True)
        st = SentenceTransformer(folder, device="cpu")
        torch.save({"st": torch.as_tensor(st.encode(SENTS)), "pooler": model.pooler.dense.weight.detach()},
                   f"{folder}.out.pt")
""")

SAVED = {"packaged:minilm-cls": ("packaged:minilm", "cls", None), "random-avg-8": ("random", "avg", 8)}


@pytest.fixture(scope="module")
def loaded_like_a_user(tmp_path_factory) -> dict:
    """Each of SAVED built, saved, then loaded with AutoModel and SentenceTransformer in one fresh interpreter at the
    libraries' default verbosity, as a user runs them (the CLI silences transformers' load reports in its own
    process): name -> (the encoder, everything printed while its folder loaded, what it loaded)."""
    tmp = tmp_path_factory.mktemp("saved")
    encoders = {}
    for name, (backbone, pooler, projection) in SAVED.items():
        torch.manual_seed(0)
        encoders[name] = build_encoder(BackboneConfig(model=backbone, pooler=pooler), projection_dim=projection)
        encoders[name].save(tmp / name)
    script = tmp / "load.py"
    script.write_text(LOAD)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="warning")
    proc = subprocess.run([sys.executable, "-u", str(script), ",".join(str(tmp / n) for n in SAVED), *SENTS], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    printed = re.split(r"^== FOLDER \d+\n", proc.stdout, flags=re.M)[1:]
    assert len(printed) == len(SAVED), proc.stdout[-3000:]
    return {name: (encoders[name], text, torch.load(f"{tmp / name}.out.pt")) for name, text in zip(SAVED, printed)}


@pytest.mark.parametrize("name", list(SAVED))
def test_saved_model_loads_without_missing_or_unexpected_weights(loaded_like_a_user, name):
    enc, printed, out = loaded_like_a_user[name]
    assert "INFO [('mismatched_keys', []), ('missing_keys', []), ('unexpected_keys', [])]" in printed, printed
    for word in ("MISSING", "UNEXPECTED", "newly initialized", "not initialized", "not used"):
        assert word not in printed, printed
    # SentenceTransformer gives the evaluated embedding (with the projection head: its Dense module)
    assert torch.allclose(out["st"], enc.encode(SENTS), atol=1e-4)
    if SAVED[name][1] == "cls":  # pooler_output is the trained MLP head, as in SimCSE's released checkpoints
        assert torch.equal(out["pooler"], enc.head.dense.weight.detach())
    else:  # the backbone's own pooler (a random BERT's: drawn from the seed)
        assert torch.equal(out["pooler"], enc.backbone.pooler_weights["pooler.dense.weight"])


def test_the_kept_pooler_changes_neither_the_encoder_state_nor_the_rng(tokenizer):
    from csebench.model.encoder import build_backbone

    torch.manual_seed(3)
    before = torch.get_rng_state()
    model = build_backbone(BackboneConfig(model="packaged:minilm"), tokenizer)
    assert torch.equal(before, torch.get_rng_state())
    assert model.pooler is None and not any(k.startswith("pooler.") for k in model.state_dict())
    assert set(model.pooler_weights) == {"pooler.dense.weight", "pooler.dense.bias"}


# ----------------------------------------------------------------------------- the card, through Snakemake

@pytest.fixture(scope="module")
def small_shared(tmp_path_factory, shared_dir):
    from runhelpers import write_small_shared

    return write_small_shared(tmp_path_factory.mktemp("shared"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, small_shared):
    """Finished ci runs, made in process: SimCSE with sts.json and transfer.json (SST-2 only), the untrained
    backbone with sts.json."""
    from csebench.cli import main

    tmp = tmp_path_factory.mktemp("runs")
    se, corpus = small_shared / "senteval", small_shared / "corpus" / "demo-sentences.txt"
    out = {}
    for name in ("simcse", "backbone"):
        run = tmp / name / "seed1"
        common = ["--suite", "ci", "--run", name, "--seed", "1"]
        assert main(["train", *common, "--corpus", str(corpus), "--senteval", str(se), "--out", str(run),
                     "--cache-dir", str(tmp / "cache"), "--no-progress"]) == 0
        evals = [("eval-sts", [])] + [("eval-transfer", ["--tasks", "SST2"])] * (name == "simcse")  # one task: fast
        for cmd, extra in evals:
            assert main([cmd, "--model", str(run / "model"), "--senteval", str(se), *common, "--out",
                         str(run / f"{cmd[5:]}.json"), "--no-progress", *extra]) == 0
        assert main(["model-card", "--run", str(run)]) == 0
        out[name] = run
    return out


def test_card_holds_the_runs_results_settings_and_loading(runs):
    import json

    from huggingface_hub import ModelCard

    run = runs["simcse"]
    assert (run / "model" / "README.md").read_text() == (run / "model_card.md").read_text()
    card = ModelCard.load(run / "model" / "README.md")  # the hub's own parser reads the metadata block
    sts = json.loads((run / "sts.json").read_text())
    data = card.data
    assert data.library_name == "sentence-transformers" and data.pipeline_tag == "sentence-similarity"
    assert {"sentence-transformers", "csebench", "simcse"} <= set(data.tags)
    scores = {r.dataset_config: r.metric_value for r in data.eval_results}
    assert scores == {t: round(v, 2) for t, v in sts["tasks"].items()}
    text = card.text
    training = json.loads((run / "model" / "training_config.json").read_text())["training"]
    for key in training:  # every resolved hyperparameter
        assert f"`training.{key}`" in text
    for needle in ("## Results", "### STS (SentEval)", "### Transfer (SentEval)", f"{sts['avg']:.2f}",
                   "SentenceTransformer(", "AutoModel.from_pretrained(", "out.last_hidden_state[:, 0]",
                   "`pooler_output` is the MLP head", "## Provenance", "git ", "@inproceedings{gao2021simcse"):
        assert needle in text, needle
    untrained = (runs["backbone"] / "model" / "README.md").read_text()
    assert "**not trained**" in untrained and "@inproceedings" not in untrained and "unsupervised" not in untrained


def test_card_cites_each_term_and_reads_mteb_results(runs, tmp_path):
    import json
    import shutil

    from csebench.sharing.modelcard import render_card

    run = tmp_path / "run"
    shutil.copytree(runs["simcse"], run)
    cfg = json.loads((run / "model" / "training_config.json").read_text())
    cfg["objectives"] = {"gaussian_negatives": {"num_negatives": 192}, "distillation": {"p": 0.1}}
    (run / "model" / "training_config.json").write_text(json.dumps(cfg))
    (run / "mteb" / "model" / "rev").mkdir(parents=True)
    (run / "mteb" / "model" / "rev" / "STS12.json").write_text(json.dumps(
        {"task_name": "STS12", "scores": {"test": [{"main_score": 0.6123, "hf_subset": "default"}]}}))
    text = render_card(run, repo_id="org/name")
    for key in ("gao2021simcse", "wu2022smoothed", "xu2023distillcse", "- gs-infonce", "- distillcse",
                "`objectives.gaussian_negatives.num_negatives` | `192`", "| STS12 | test | default | 61.23 |",
                'SentenceTransformer("org/name")', "name: name"):
        assert key in text, key
    assert "is-cse" not in text and "he2023instance" not in text
    # what the run used, said once: InfoNCE and these terms (no "(none: SimCSE alone)" after them)
    assert "Objective: SimCSE's InfoNCE plus the terms `gaussian_negatives`, `distillation`, resolved settings" in text
    assert "none: SimCSE alone" not in text and "SimCSE's InfoNCE alone" not in text


def test_a_run_of_your_own_s_card_holds_its_closing_comparison(runs, tmp_path):
    """`csebench model-card --run` on a run no suite has evaluated (a run of your own: sts_vs_untrained.json beside its
    model, no sts.json): the card shows the trained model beside the untrained backbone, their difference and the
    protocol, and its model-index carries the trained side; not "Not evaluated"."""
    import json
    import shutil

    from huggingface_hub import ModelCard

    from csebench.cli import main
    from csebench.evaluation.sts import TEST_TASKS

    run = tmp_path / "run"
    shutil.copytree(runs["simcse"], run)
    for f in ("sts.json", "transfer.json"):
        (run / f).unlink()
    trained = {t: 70.0 + i for i, t in enumerate(TEST_TASKS)}
    untrained = {t: 60.0 + 2 * i for i, t in enumerate(TEST_TASKS)}
    (run / "sts_vs_untrained.json").write_text(json.dumps({
        "run": "simcse/seed1", "backbone": "tiny", "backbone_model": "random", "pooler": "cls_before_pooler",
        "precision": "fp32", "protocol": "capped", "max_sts_pairs": 40,
        "trained": {"tasks": trained, "avg": float(np.mean(list(trained.values())))},
        "untrained": {"tasks": untrained, "avg": float(np.mean(list(untrained.values())))}}))
    assert main(["model-card", "--run", str(run)]) == 0
    text = (run / "model_card.md").read_text()
    assert "Not evaluated" not in text and "### STS (SentEval): the closing comparison of `csebench train`" in text
    assert "| untrained `tiny` | 60.00 | 62.00 | 64.00 | 66.00 | 68.00 | 70.00 | 72.00 | 66.00 |" in text
    assert "| this model | 70.00 | 71.00 | 72.00 | 73.00 | 74.00 | 75.00 | 76.00 | 73.00 |" in text
    assert "| difference | +10.00 | +9.00 | +8.00 | +7.00 | +6.00 | +5.00 | +4.00 | +7.00 |" in text
    assert "protocol `capped`: each task on a seeded subset of about 40 pairs" in text
    card = ModelCard.load(run / "model" / "README.md")
    assert {r.dataset_config: r.metric_value for r in card.data.eval_results} == trained


def test_push_dry_run_writes_the_card_and_lists_the_folder(runs, capsys, monkeypatch):
    from csebench.cli import main

    run = runs["simcse"]
    (run / "model" / ".README.md.x.tmp").write_text("an interrupted write")  # hidden: never uploaded
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a dry run needs no network
    assert main(["push", "--run", str(run), "--repo-id", "org/tiny-simcse", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    files = sorted(p.relative_to(run / "model").as_posix() for p in (run / "model").rglob("*")
                   if p.is_file() and not p.name.startswith("."))
    assert [line.strip() for line in out[1:]] == files and {"README.md", "model.safetensors"} <= set(files)
    assert "(private)" in out[0]
    assert 'SentenceTransformer("org/tiny-simcse")' in (run / "model" / "README.md").read_text()
    assert 'SentenceTransformer("org/tiny-simcse")' not in (run / "model_card.md").read_text()


def test_push_offline_or_without_token_or_network_is_one_line(runs, monkeypatch, capsys):
    from csebench.cli import main

    run = str(runs["simcse"])
    argv = ["push", "--run", run, "--repo-id", "org/tiny-simcse"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("csebench push: error: offline") and "\n" not in err
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    assert main(argv) == 2
    assert "no Hugging Face token" in capsys.readouterr().err
    monkeypatch.setattr("huggingface_hub.get_token", lambda: "hf_x")

    def no_network(self, *a, **k):
        raise OSError("[Errno -2] Name or service not known")

    monkeypatch.setattr("huggingface_hub.HfApi.create_repo", no_network)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "could not reach the Hugging Face hub" in err and "\n" not in err
    assert main(["push", "--run", run, "--repo-id", "not a repo!", "--dry-run"]) == 2
    assert "is not a hub repo id (ORG/NAME or NAME)" in capsys.readouterr().err

    from types import SimpleNamespace

    from huggingface_hub.errors import HfHubHTTPError

    def forbidden(self, *a, **k):
        raise HfHubHTTPError("403 Forbidden", response=SimpleNamespace(status_code=403, headers={}, request=None))

    monkeypatch.setattr("huggingface_hub.HfApi.create_repo", forbidden)
    assert main(argv) == 2
    assert "the Hugging Face token cannot write to org/tiny-simcse (HTTP 403)" in capsys.readouterr().err
    assert main(["model-card", "--run", str(ci_dir := runs["simcse"].parent)]) == 2
    assert f"{ci_dir} has no train.json: not a finished csebench run folder" in capsys.readouterr().err


def test_push_creates_a_private_repo_and_uploads_the_model_folder(runs, monkeypatch):
    from csebench.cli import main

    calls = []
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.get_token", lambda: "hf_x")
    monkeypatch.setattr("huggingface_hub.HfApi.create_repo", lambda self, repo_id, **k: calls.append(("create", repo_id, k)))
    monkeypatch.setattr("huggingface_hub.HfApi.upload_folder", lambda self, **k: calls.append(("upload", k)))
    run = runs["simcse"]
    assert main(["push", "--run", str(run), "--repo-id", "org/tiny-simcse"]) == 0
    assert calls[0] == ("create", "org/tiny-simcse", {"private": True, "repo_type": "model", "exist_ok": True})
    assert calls[1][1]["folder_path"] == str(run / "model") and calls[1][1]["repo_id"] == "org/tiny-simcse"
    assert main(["push", "--run", str(run), "--repo-id", "org/tiny-simcse", "--public"]) == 0
    assert calls[2][2]["private"] is False


@pytest.mark.slow(seconds=3)
@needs_pipeline
def test_snakemake_makes_the_cards_and_a_second_run_plans_nothing(tmp_path, ci_build):
    """The model_card rule writes model/README.md after the train rule's model/ output is done: nothing reruns.
    One card per run, in its own folder; the suite's view shows it through its model/ link. (A copy of the session's
    build of the ci suite, which made every run's card.)"""
    from csebench.study.params import load_params
    from csebench.study.jobs import run_folder
    from runhelpers import run_snakemake

    assert ci_build.returncode == 0, ci_build.stderr[-4000:]
    proj = ci_build.copy(tmp_path / "proj")
    run = run_folder(load_params(proj / "params.yaml"), "ci", "simcse", 1)
    card = f"{run}/model_card.md"

    def snakemake(*args):
        return run_snakemake(["--cores", "2", "--configfile", "config/ci.yaml", "--config", "threads=1", *args, "--", card],
                             cwd=proj, env=ci_build.env, timeout=900)

    view = proj / "results/ci/runs/simcse/seed1"
    assert (view / "model" / "README.md").read_text() == (proj / card).read_text()
    assert "suite `ci`, run `simcse`" in (proj / card).read_text() and "### STS (SentEval)" in (proj / card).read_text()
    for folder in (view, proj / run, None):  # after push --dry-run rewrote the README from the view, the run, then not
        again = snakemake("-n")
        assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout + again.stderr
        if folder is not None:
            from csebench.cli import main  # in this process: a fresh one is 4 CPU-s of imports

            assert main(["push", "--run", str(folder), "--repo-id", "org/x", "--dry-run"]) == 0
            assert 'SentenceTransformer("org/x")' in (view / "model" / "README.md").read_text()


def test_the_card_leaves_the_weights_fingerprint_alone(runs, tmp_path):
    """eval-sts and the analyses check their embeddings table against the model folder's fingerprint:
    a card written after `csebench embed` must not make the table look like another model's."""
    import shutil

    from csebench.evaluation.embeddings import model_fingerprint

    model = tmp_path / "model"
    shutil.copytree(runs["simcse"] / "model", model)
    before = model_fingerprint(model)
    (model / "README.md").write_text("another card")
    assert model_fingerprint(model) == before


@needs_pipeline
def test_card_waits_for_the_mteb_results_where_the_suite_asks_for_them(tmp_path):
    """A suite with `mteb:` (mteb.smk): the run's model_card job reads the suite's VIEW/mteb/ after eval_mteb
    has written it."""
    from csebench.study.params import load_params
    from csebench.study.jobs import run_folder
    from runhelpers import PARAMS, ROOT, run_snakemake

    over = tmp_path / "over.yaml"
    over.write_text("suites:\n  ci:\n    mteb: {}\n")
    card = f"{run_folder(load_params(PARAMS, [over]), 'ci', 'simcse', 1)}/model_card.md"
    proc = run_snakemake(["-n", "--forceall", "--configfile", "config/ci.yaml", "--config", "plan=false",
                          f"params_overrides=[{over}]", "--", card], cwd=ROOT, env=dict(os.environ, HF_HUB_OFFLINE="1"),
                         timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    job = out[out.index("rule model_card:"):]
    assert "results/ci/runs/simcse/seed1/mteb/mteb.json" in job.split("output:")[0]


def test_one_card_per_run_from_a_view_or_the_runs_own_folder(runs, tmp_path, capsys, monkeypatch):
    """A run trained once for several suites has one model/, so one card: made from a suite's view (that
    suite's names and results) it lands in the run's own folder and shows in every view; made from the
    run's own folder it reports the papers' evaluation folder (eval-fp32). push takes either."""
    import json
    import shutil

    from csebench.cli import main
    from csebench.workflow.runviews import write_view

    run = tmp_path / "results" / "runs" / "0123456789abcdef" / "seed1"
    run.mkdir(parents=True)
    for name in ("train.json", "model"):
        (shutil.copytree if name == "model" else shutil.copy)(runs["simcse"] / name, run / name)
    sts = json.loads((runs["simcse"] / "sts.json").read_text())
    for ev, avg in (("eval-fp32", 11.0), ("eval-fast-capped-00000000", 22.0)):
        (run / ev).mkdir()
        (run / ev / "sts.json").write_text(json.dumps({**sts, "tasks": {t: avg for t in sts["tasks"]}, "avg": avg}))
    info = {"suite": "other", "name": "same", "seed": 1, "method": "simcse", "method_label": "SimCSE (again)",
            "backbone": "minilm", "backbone_label": "MiniLM"}
    views = [tmp_path / "results" / s / "runs" / "same" / "seed1" for s in ("other", "third")]
    for view, suite in zip(views, ("other", "third")):
        write_view({**info, "suite": suite}, "ci/simcse", run, view, ["train.json", "model"])
        write_view({**info, "suite": suite}, "ci/simcse", run / "eval-fp32", view, ["sts.json"])
    assert main(["model-card", "--run", str(views[0])]) == 0
    text = (run / "model_card.md").read_text()
    assert not (views[0] / "model_card.md").exists()
    assert all((v / "model" / "README.md").read_text() == text for v in views)
    assert "**SimCSE (again)**" in text and "(suite `other`, run `same`, seed 1)" in text
    assert "the same run as `ci/simcse`" in text and "`runs/" in text
    assert main(["model-card", "--run", str(run)]) == 0  # the run's own folder: its train.json's names, eval-fp32
    text = (run / "model_card.md").read_text()
    assert "| 11.00 |" in text and "22.00" not in text and "(suite `ci`, run `simcse`" in text
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for folder in (views[1], run):
        assert main(["push", "--run", str(folder), "--repo-id", "org/same", "--dry-run"]) == 0
        assert "README.md" in capsys.readouterr().out
        assert 'SentenceTransformer("org/same")' in (views[0] / "model" / "README.md").read_text()


def test_a_runs_card_comes_from_the_first_suite_that_evaluates_it(tmp_path):
    """Runs.card_source: the first suite of params.yaml listing the run and evaluating it (its results
    in the card); a run no suite evaluates, from the first that lists it."""
    from csebench.study.params import load_params
    from csebench.study.jobs import Runs
    from runhelpers import PARAMS, write_config

    simcse = {"name": "simcse", "backbone": "minilm", "method": "simcse"}
    suite = {"data": "ci", "seeds": [1], "training": {"max_steps": 4}}
    over = write_config(tmp_path / "over.yaml", {"suites": {
        "a": {**suite, "runs": [{**simcse, "evaluate": False}, {**simcse, "name": "alone", "evaluate": False,
                                                                "training": {"max_steps": 5}}]},
        "b": {**suite, "runs": [{**simcse, "name": "copy"}]}}})
    runs = Runs(load_params(PARAMS, [over]))
    assert runs.key("a", "simcse") == runs.key("b", "copy") and runs.first(runs.key("a", "simcse"), 1) == ("a", "simcse")
    assert runs.card_source(runs.key("a", "simcse"), 1) == ("b", "copy")
    assert runs.card_source(runs.key("a", "alone"), 1) == ("a", "alone")


@needs_pipeline
def test_the_demo_carries_a_card_for_every_model_and_evaluates_nothing_more_for_it():
    """make demo's DAG: a card for every model it trains, those of the suites only its paper items read
    included (demo-iscse-beta, demo-combinations, demo-zoo); a card waits for no evaluation the items do not read
    (demo-iscse-beta's runs are trained only: IS-CSE Table 7 reads their train.json)."""
    import re

    from csebench.study.jobs import Runs, evaluated_jobs
    from csebench.study.params import load_params
    from runhelpers import PARAMS, ROOT, run_snakemake

    proc = run_snakemake(["-n", "--forceall", "--quiet", "rules", "--configfile", "config/demo.yaml", "--config", "plan=false"],
                         cwd=ROOT, env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    params = load_params(PARAMS)
    runs = Runs(params)
    evaluated = {runs.key(s, r) for s in ("demo", "demo-combinations", "demo-zoo") for r, _ in evaluated_jobs(params, s)}
    assert int(counts["model_card"]) == int(counts["train"]) and int(counts["embed"]) == len(evaluated)


# ----------------------------------------------------------------------------- push sends only the run's own files


def test_push_never_follows_a_link_nor_sends_a_stranger(trained, tmp_path, capsys, monkeypatch):
    """`ln -s ~/secret.txt RUN/model/notes.txt; csebench push --dry-run` listed notes.txt for upload."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = copy_run(trained, tmp_path / "run")
    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("token=hf_abc\n")
    argv = ["push", "--run", str(run), "--repo-id", "org/name", "--dry-run"]
    (run / "model" / "notes.txt").symlink_to(secret)
    assert_fails(capsys, argv, f"{run / 'model' / 'notes.txt'} is a symbolic link (to {secret}): push uploads only the "
                               "files csebench wrote in the run's model/, never what a link points to; remove the link")
    (run / "model" / "notes.txt").unlink()
    (run / "model" / "1_Pooling" / "extra.bin").write_bytes(b"not csebench's")
    assert_fails(capsys, argv, f"{run / 'model' / '1_Pooling' / 'extra.bin'} was not written by csebench "
                               f"({run / 'train.json'} lists the files of model/ under model_files): push uploads only "
                               "the run's own files; move it out of model/")
    (run / "model" / "1_Pooling" / "extra.bin").unlink()
    # model/ itself a link out of the run: refused before the card is written through it
    outside = tmp_path / "elsewhere"
    (run / "model").rename(outside)
    (run / "model").symlink_to(outside)
    assert_fails(capsys, argv, f"{run / 'model'} is a symbolic link to {outside}, which is no csebench run's model folder")
    assert not (outside / "README.md").exists()
    # a suite's view: its model/ link into the run's folder is the run's own
    (run / "model").unlink()
    outside.rename(run / "model")
    view = tmp_path / "suite" / "runs" / "simcse" / "seed1"
    view.mkdir(parents=True)
    (view / "model").symlink_to(run / "model")
    (view / "train.json").write_text((run / "train.json").read_text())
    from csebench.cli import main

    capsys.readouterr()
    assert main(argv[:2] + [str(view)] + argv[3:]) == 0
    listed = [line.strip() for line in capsys.readouterr().out.splitlines()[1:]]
    assert "README.md" in listed and "model.safetensors" in listed and "notes.txt" not in listed


def test_push_sends_a_listed_file_only_with_the_content_the_run_recorded(trained, tmp_path, capsys, monkeypatch):
    """A listed file of model/ replaced by a hard link to a secret outside the run (the name is the run's,
    the bytes are not) was listed for upload (`--dry-run` exit 0): push checks each file against the
    sha256 train.json recorded, and a run that recorded none is not pushed."""
    import json

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = copy_run(trained, tmp_path / "run")
    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text('{"token": "hf_abc"}\n')
    argv = ["push", "--run", str(run), "--repo-id", "org/name", "--dry-run"]
    config = run / "model" / "config.json"
    want = json.loads((run / "train.json").read_text())["model_files"]["config.json"]
    kept = config.read_bytes()
    config.unlink()
    os.link(secret, config)
    import hashlib

    have = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert_fails(capsys, argv, f"{config} has sha256 {have[:12]}…, not the {want[:12]}… that {run / 'train.json'} "
                               "recorded when the run was trained: push uploads only the files the run wrote, as it "
                               "wrote them; restore the file (or train the run again)")
    config.unlink()
    assert_fails(capsys, argv, f"{config} is missing: {run / 'train.json'} lists it among the files the run wrote in "
                               "model/; restore it (or train the run again) before pushing")
    config.write_bytes(kept)
    from csebench.cli import main

    assert main(argv) == 0  # the run's own bytes again
    capsys.readouterr()
    train = json.loads((run / "train.json").read_text())
    del train["model_files"]
    (run / "train.json").write_text(json.dumps(train))
    assert_fails(capsys, argv, f"{run / 'train.json'} records no sha256 of the files of {run / 'model'} (model_files: a "
                               "run of an older csebench, or not a run): push uploads only files it can check against "
                               "what the run wrote; train the run again")
