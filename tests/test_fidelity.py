"""Issue 20 (fidelity): the setting behind every published value. SICK-R dev beside STS-B dev in
train.json (IS-CSE Table 4's "Avg. STS development"), evaluation-only runs of untrained backbones,
the released-code settings as selectable variants, and each registry row in the setting its printed
number comes from."""

from __future__ import annotations

import json

import pytest

from csebench.config import load_params, resolve_run
from csebench.reproduce import metrics as M

from runhelpers import PARAMS, ci_training, train_argv, write_config, write_corpus, write_mini_senteval

P = load_params(PARAMS)


def test_train_json_records_sickr_dev_and_the_dev_average_of_the_selected_checkpoint(tmp_path):
    from csebench.cli import main
    from csebench.encoder import load_encoder
    from csebench.trainer import DevEvaluator

    write_corpus(tmp_path / "corpus.txt", n=32)
    write_mini_senteval(tmp_path / "se", pairs=24)
    cfg = write_config(tmp_path / "over.yaml", ci_training(max_steps=3, eval_steps=1, batch_size=8, log_steps=1))
    out = tmp_path / "run"
    assert main(["--threads", "1", *train_argv(tmp_path, out, cfg)]) == 0
    summary = json.loads((out / "train.json").read_text())
    dev = DevEvaluator(tmp_path / "se", 8, precision="fp32")
    model = load_encoder(out / "model")  # the best STS-B dev checkpoint
    assert summary["stsb_dev_best"] == pytest.approx(dev(model), abs=1e-3)
    assert summary["sickr_dev"] == pytest.approx(dev.sickr(model), abs=1e-3)
    assert summary["avg_sts_dev"] == pytest.approx((summary["stsb_dev_best"] + summary["sickr_dev"]) / 2, abs=1e-4)
    ref = M.RunRef("ci", "simcse")
    results = tmp_path / "results"
    (results / "ci" / "runs" / "simcse").mkdir(parents=True)
    (out).rename(results / "ci" / "runs" / "simcse" / "seed1")
    assert M.value("avg_sts_dev", str(results), ref, 1) == summary["avg_sts_dev"]
    assert M.value("sickr_dev", str(results), ref, 1) == summary["sickr_dev"]
    assert M.files_for("avg_sts_dev", "r", ref, 1) == ["r/ci/runs/simcse/seed1/train.json"]


def test_dev_summary_leaves_out_scores_that_are_not_finite():
    from csebench.trainer import dev_summary

    assert dev_summary(80.0, 70.0) == {"sickr_dev": 70.0, "avg_sts_dev": 75.0}
    assert dev_summary(float("-inf"), 70.0) == {"sickr_dev": 70.0, "avg_sts_dev": None}
    assert dev_summary(80.0, float("nan")) == {"sickr_dev": None, "avg_sts_dev": None}


def test_iscse_table_4_avg_sts_is_the_development_average():
    from csebench.reproduce.registry import load_registry

    it = load_registry().item("is-cse/table-4")
    cols = {c["name"]: c["metric"] for c in it.layout["columns"]}
    assert cols == {"STS-B": "stsb_dev", "Avg. STS": "avg_sts_dev"}


# ------------------------------------------------------------------- evaluation-only runs (train: false)

def test_an_evaluation_only_run_saves_the_untrained_backbone(tmp_path):
    """`train: false` (the ci suite's run `backbone`): no corpus, model/ = the backbone as built from
    the run's seed, the dev scores of that model, empty training curves, train.json says so."""
    import torch

    from csebench.cli import main
    from csebench.encoder import build_encoder, load_encoder
    from csebench.report import read_curve
    from csebench.trainer import DevEvaluator

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


def test_an_evaluation_only_run_keeps_its_projection_head(tmp_path):
    """SSCL Table 5's BERT rows: an untrained backbone with an (untrained, seeded) linear head to 8 dims."""
    import copy

    from csebench.cli import main
    from csebench.encoder import load_encoder

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

    from csebench import workflow as wf
    from csebench.cli import main
    from csebench.errors import ConfigError
    from csebench.plan import suite_plan

    params = copy.deepcopy(P)
    runs = params["suites"]["ci"]["runs"]
    trained = copy.deepcopy(params)
    next(r for r in trained["suites"]["ci"]["runs"] if r["name"] == "backbone")["train"] = True
    assert resolve_run(trained, "ci", "backbone", 1).fingerprint() != resolve_run(P, "ci", "backbone", 1).fingerprint()
    # an untrained DistillCSE run distils from nothing: no teacher jobs, no corpus
    runs.append({"name": "frozen", "backbone": "tiny", "method": "distillcse", "train": False,
                 "objectives": {"distillation": {"teachers": {"run": "simcse", "seeds": [1]}}}})
    assert wf.teacher_jobs(params, "ci", "frozen", 1) == [] and not wf.trains(params, "ci", "frozen")
    assert wf.teacher_jobs(params, "ci", "distillcse", 1)
    assert suite_plan(params, "ci").training_runs == suite_plan(P, "ci").training_runs
    runs[-1]["train"] = "no"
    with pytest.raises(ConfigError, match=r"suites.ci.runs\[3\].train: give true or false, got 'no'"):
        wf.jobs(params, "ci")
    # a trained run without --corpus: one clear line, exit 2
    argv = ["train", "--params", str(PARAMS), "--suite", "ci", "--run", "simcse", "--seed", "1", "--senteval",
            str(tmp_path), "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    assert "train: --corpus is required for run ci/simcse (only runs with train: false read none)" in capsys.readouterr().err
