"""`csebench plan` (csebench.results.plan): the runs, jobs, FLOPs and GPU-hours of each suite, the padded tokens per
sentence a batch trains on, the packaged length histogram, the measured GPU throughput."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest

from csebench.study.params import load_params
from csebench.study.typed import Params
from csebench.core.errors import ConfigError
from csebench.results.registry import default_suites
from runhelpers import ROOT

PARAMS = load_params(ROOT / "params.yaml")


def test_plan_counts_runs_and_gpu_hours():
    from csebench.results.plan import plan, render_plan

    plans = {p.suite: p for p in plan(PARAMS, ["paper", "demo", "ablation-iscse-buffer"])}
    assert plans["paper"].training_runs == 4 and plans["paper"].total_flops > 0
    assert plans["demo"].total_flops == 0  # CPU suite
    # BERT-base, 1 epoch of 10^6 sentences, 6 runs, batch 64 padded to its longest sentence (capped at
    # 32; about 3 in 10 sentences are longer): 6 x 6 x 86M x 2e6 x 32 tokens
    assert 6 * 6 * 85e6 * 2e6 * 31.9 < plans["ablation-iscse-buffer"].flops_small < 6 * 6 * 86e6 * 2e6 * 32
    assert plans["ablation-iscse-buffer"].total_flops < 1.3 * plans["ablation-iscse-buffer"].flops_small
    text = render_plan(list(plans.values()))
    assert "sum of the 3 suites built alone" in text and "GPU-hours" in text


def test_padded_tokens_per_sentence_is_the_expected_longest_of_the_batch():
    from csebench.results.plan import mean_tokens, padded_tokens

    lengths, counts = np.array([1, 2]), np.array([1.0, 1.0])  # E[max of B] = 2 - 2^-B
    for b in (1, 2, 5):
        assert padded_tokens(b, 10, lengths, counts) == pytest.approx(2 - 0.5**b)
    assert padded_tokens(5, 1, lengths, counts) == pytest.approx(1.0)  # capped
    # against a direct simulation: draw batches of sentence lengths, cap them, average each batch's longest
    lengths, counts = np.arange(3, 40), np.random.default_rng(0).integers(1, 50, 37).astype(float)
    rng = np.random.default_rng(1)
    for b, cap in ((1, 32), (4, 16), (16, 32), (64, 64)):
        draws = np.minimum(rng.choice(lengths, size=(40_000, b), p=counts / counts.sum()), cap)
        sim = draws.max(axis=1)
        assert padded_tokens(b, cap, lengths, counts) == pytest.approx(sim.mean(), abs=4 * sim.std() / 200 + 1e-9)
    # the packaged histogram: a batch of 64 nearly always holds a sentence of 32+ tokens
    assert 31.9 < padded_tokens(64, 32) <= 32 and 20 < mean_tokens(32) < padded_tokens(2, 32) < padded_tokens(64, 32)


def test_packaged_length_histogram_is_what_the_script_computes(shared_dir):
    import importlib.resources
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import length_histogram

    packaged = json.loads(importlib.resources.files("csebench").joinpath("resources/sentence_lengths.json").read_text())
    assert length_histogram.histogram(shared_dir / "senteval") == packaged
    assert len(json.dumps(packaged)) < 4000  # counts per length only, no sentences


def test_plan_cli_prints_every_default_suite(capsys):
    from csebench.cli import main

    assert main(["plan"]) == 0
    out = capsys.readouterr().out
    for s in default_suites(PARAMS):
        assert re.search(rf"^{re.escape(s)}\s", out, re.M), s
    rows = [float(m) for m in re.findall(r"^\S+\s+wiki1m\s+\d+\s+\d+\s+\d+\s+\d+\s+([\d.]+)", out, re.M)]
    total = float(re.search(r"^sum of the .*?([\d.]+)$", out, re.M).group(1))
    assert total > 10 and abs(total - sum(rows)) < 0.1 * len(rows)


def test_plan_uses_the_measured_gpu_throughput(tmp_path):
    from csebench.results.plan import plan, render_plan

    plans = plan(PARAMS, ["ablation-iscse-buffer"])
    assumed = float(re.search(r"^the suite built alone.*?([\d.]+)$", render_plan(plans, tmp_path), re.M).group(1))
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "gpu_results.json").write_text(json.dumps({"info": {"name": "NVIDIA H100 80GB HBM3"}, "training": {"rows": [
        {"batch": 64, "mfu": 0.06, "peak": 989e12}, {"batch": 512, "mfu": 0.3, "peak": 989e12}]}}))
    text = render_plan(plans, tmp_path)
    measured = float(re.search(r"^the suite built alone.*?([\d.]+)$", text, re.M).group(1))
    assert "NVIDIA H100 80GB HBM3 at the training utilisation measured there" in text
    assert measured == pytest.approx(assumed / 2, rel=0.1)  # batch-64 training at 6% instead of 3% MFU
    # benchmarks/device.sh's results: BERT-base batch 64 padded tokens/s, RoBERTa-large batch 512's MFU
    tokens_per_s = 0.06 * 989e12 / (6 * 85e6)
    (tmp_path / "benchmarks" / "gpu_results.json").write_text(json.dumps({
        "versions": {"device": "NVIDIA H200", "peak_bf16_flops": 989e12},
        "sections": {"training": {"ours": {"tokens_per_s": tokens_per_s, "nonemb_params": 85e6}}, "large": {"mfu": 0.3}}}))
    text = render_plan(plans, tmp_path)
    assert "NVIDIA H200 at the training utilisation measured there (6.0% at batch <= 128, 30.0% above" in text
    assert float(re.search(r"^the suite built alone.*?([\d.]+)$", text, re.M).group(1)) == pytest.approx(measured, rel=1e-3)


def test_training_only_runs_are_trained_not_evaluated():
    """`evaluate: false` (a training-only run: curves read, model a teacher): trained, never embedded.
    The demo evaluates every run (its tables have DistillCSE's "+Teacher Components" row)."""
    from csebench.study.jobs import evaluated_jobs, suite_jobs
    from csebench.results.plan import suite_plan

    assert set(evaluated_jobs(PARAMS, "demo")) == set(suite_jobs(PARAMS, "demo"))
    assert ("teacher-components", 42) in evaluated_jobs(PARAMS, "demo")
    training_only = copy.deepcopy(PARAMS)
    run = next(r for r in training_only["suites"]["demo"]["runs"] if r["name"] == "teacher-components")
    run["evaluate"] = False
    assert ("teacher-components", 42) in suite_jobs(training_only, "demo")
    assert ("teacher-components", 42) not in evaluated_jobs(training_only, "demo")
    assert ("distillcse", 42) in evaluated_jobs(training_only, "demo")
    assert suite_plan(Params.of(PARAMS).suite("demo")).jobs - suite_plan(Params.of(training_only).suite("demo")).jobs == 4  # embed, eval_sts, eval_transfer, its view
    run["evaluate"] = "no"
    with pytest.raises(ConfigError, match="evaluate: give true or false"):
        evaluated_jobs(training_only, "demo")
