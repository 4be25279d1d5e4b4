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
