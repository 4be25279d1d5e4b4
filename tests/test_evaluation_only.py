"""Evaluation-only runs (`train: false`, csebench.training.untrained_run): an untrained backbone saved as the run's model,
with its own pooler and any projection head, the dev scores of that model, no corpus read, no teacher jobs;
replaced only with --force and only when complete."""

from __future__ import annotations

import json

import pytest

from csebench.study.params import load_params
from csebench.study.typed import Params
from csebench.study.resolve import resolve_run
from runhelpers import PARAMS, write_config, write_mini_senteval

P = load_params(PARAMS)


# ----------------------------------------------------------------------------- evaluation-only runs (train: false)


def test_an_evaluation_only_run_saves_the_untrained_backbone(tmp_path):
    """`train: false` (the ci suite's run `backbone`): no corpus, model/ = the backbone as built from
    the run's seed, the dev scores of that model, empty training curves, train.json says so."""
    import torch

    from csebench.cli import main
    from csebench.model.encoder import build_encoder, load_encoder
    from csebench.results.runs import read_curve
    from csebench.training.trainer import DevEvaluator

    write_mini_senteval(tmp_path / "se", pairs=24)
    out = tmp_path / "run"
    argv = ["--threads", "1", "train", "--params", str(PARAMS), "--suite", "ci", "--run", "backbone", "--seed", "1",
            "--senteval", str(tmp_path / "se"), "--out", str(out), "--no-progress"]
    assert main(argv) == 0  # no --corpus: an evaluation-only run reads none
    cfg = resolve_run(P, "ci", "backbone", 1)
    assert cfg.train is False
    built = build_encoder(cfg.backbone, seed=1).backbone.state_dict()
    saved = load_encoder(out / "model").backbone.state_dict()
    assert built.keys() == saved.keys() and all(torch.equal(built[k], saved[k]) for k in built)
    summary = json.loads((out / "train.json").read_text())
    assert summary["trained"] is False and summary["steps"] == 0 and summary["method"] == "backbone"
    dev = DevEvaluator(tmp_path / "se", 8, precision="fp32")
    assert summary["stsb_dev_best"] == pytest.approx(dev(load_encoder(out / "model")), abs=1e-3)
    assert summary["sickr_dev"] == pytest.approx(dev.sickr(load_encoder(out / "model")), abs=1e-3)
    assert read_curve(out / "train_curve.csv") == {"step": pytest.approx([])}
    assert list(read_curve(out / "dev_curve.csv")["step"]) == [0]
    assert json.loads((out / "model" / "training_config.json").read_text())["train"] is False


def test_an_evaluation_only_cls_run_saves_the_backbones_own_pooler(tmp_path):
    """The saved folder's ``pooler.*`` of an untrained [CLS] run is the backbone's own pooler
    (a random BERT's: drawn from the seed), not the randomly initialised training head, so ``pooler_output``
    of "the backbone itself" is the backbone's. A trained [CLS] run still saves its trained head there."""
    import torch
    from safetensors.torch import load_file

    from csebench.cli import main
    from csebench.model.encoder import build_encoder

    write_mini_senteval(tmp_path / "se", pairs=16)
    out = tmp_path / "run"
    argv = ["--threads", "1", "train", "--params", str(PARAMS), "--suite", "ci", "--run", "backbone", "--seed", "1",
            "--senteval", str(tmp_path / "se"), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    cfg = resolve_run(P, "ci", "backbone", 1)
    assert cfg.backbone.pooler == "cls"
    saved = load_file(str(out / "model" / "model.safetensors"))
    built = build_encoder(cfg.backbone, seed=1)
    own = built.backbone.pooler_weights
    assert torch.equal(saved["pooler.dense.weight"], own["pooler.dense.weight"])
    assert torch.equal(saved["pooler.dense.bias"], own["pooler.dense.bias"])
    head = load_file(str(out / "model" / "mlp_head.safetensors"))["dense.weight"]
    assert not torch.equal(saved["pooler.dense.weight"], head)
    # a trained encoder (the trainer's save) keeps SimCSE's convention: the trained head is the pooler
    built.save(tmp_path / "trained")
    assert torch.equal(load_file(str(tmp_path / "trained" / "model.safetensors"))["pooler.dense.weight"], built.head.dense.weight)


def test_an_evaluation_only_run_keeps_its_projection_head(tmp_path):
    """SSCL Table 5's BERT rows: an untrained backbone with an (untrained, seeded) linear head to 8 dims."""
    import copy

    from csebench.cli import main
    from csebench.model.encoder import load_encoder

    params = copy.deepcopy(P)
    params["suites"]["ci"]["runs"].append({"name": "backbone-8", "backbone": "tiny", "method": "backbone", "train": False,
                                           "training": {"projection_dim": 8}})
    over = write_config(tmp_path / "over.yaml", {"suites": {"ci": {"runs": params["suites"]["ci"]["runs"]}}})
    write_mini_senteval(tmp_path / "se", pairs=16)
    argv = ["--threads", "1", "train", "--params", str(PARAMS), "--config", str(over), "--suite", "ci", "--run",
            "backbone-8", "--seed", "1", "--senteval", str(tmp_path / "se"), "--out", str(tmp_path / "run"), "--no-progress"]
    assert main(argv) == 0
    enc = load_encoder(tmp_path / "run" / "model")
    assert enc.out_dim == 8 and enc.projection_head == "linear" and not enc.head.tanh
    assert enc.encode(["a sentence"]).shape == (1, 8)


def test_train_flag_fingerprint_teachers_plan_and_bad_values(tmp_path, capsys):
    import copy

    from csebench.study.jobs import suite_jobs, teacher_jobs, trains
    from csebench.cli import main
    from csebench.core.errors import ConfigError
    from csebench.results.plan import suite_plan

    params = copy.deepcopy(P)
    runs = params["suites"]["ci"]["runs"]
    trained = copy.deepcopy(params)
    next(r for r in trained["suites"]["ci"]["runs"] if r["name"] == "backbone")["train"] = True
    assert resolve_run(trained, "ci", "backbone", 1).fingerprint() != resolve_run(P, "ci", "backbone", 1).fingerprint()
    # an untrained DistillCSE run distils from nothing: no teacher jobs, no corpus
    runs.append({"name": "frozen", "backbone": "tiny", "method": "distillcse", "train": False,
                 "objectives": {"distillation": {"teachers": {"run": "simcse", "seeds": [1]}}}})
    assert teacher_jobs(params, "ci", "frozen", 1) == [] and not trains(params, "ci", "frozen")
    assert teacher_jobs(params, "ci", "distillcse", 1)
    assert suite_plan(Params.of(params).suite("ci")).training_runs == suite_plan(Params.of(P).suite("ci")).training_runs
    runs[-1]["train"] = "no"
    with pytest.raises(ConfigError, match=r"suites.ci.runs\[3\].train: give true or false, got 'no'"):
        suite_jobs(params, "ci")
    over = write_config(tmp_path / "over.yaml", {"suites": {"ci": {"runs": [
        {"name": "backbone", "backbone": "tiny", "method": "backbone", "train": "no"}]}}})
    assert main(["show-config", "--params", str(PARAMS), "--config", str(over), "--suite", "ci", "--run", "backbone",
                 "--seed", "1"]) == 2
    assert "over.yaml: suites.ci.runs[0].train: expected true or false, got 'no'" in capsys.readouterr().err
    # a trained run without --corpus: one clear line, exit 2
    argv = ["train", "--params", str(PARAMS), "--suite", "ci", "--run", "simcse", "--seed", "1", "--senteval",
            str(tmp_path), "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    assert "train: --corpus is required for run ci/simcse (only runs with train: false read none)" in capsys.readouterr().err


def test_an_evaluation_only_run_is_replaced_only_with_force_and_only_when_complete(tmp_path, monkeypatch):
    """As a trained run: a finished folder needs --force, and a failed rewrite leaves the old one whole."""
    from csebench.cli import main

    write_mini_senteval(tmp_path / "se", pairs=16)
    out = tmp_path / "run"
    argv = ["--threads", "1", "train", "--params", str(PARAMS), "--suite", "ci", "--run", "backbone", "--seed", "1",
            "--senteval", str(tmp_path / "se"), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    before = (out / "train.json").read_text()
    assert main(argv) == 2  # finished: not overwritten without --force
    import csebench.training.untrained_run as ev

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(ev, "write_json", broken)
    with pytest.raises(OSError, match="disk full"):
        main([*argv, "--force"])
    assert (out / "train.json").read_text() == before and (out / "model" / "config.json").is_file()
    assert not (out / "model.partial").exists()
