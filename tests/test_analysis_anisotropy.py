"""The anisotropy analysis (an analysis added as one file): known answers, the command on a
tiny model, its suite table, and that the pipeline and the config know it without being told."""

import json

import numpy as np
import pytest
import torch

from csebench.analysis.analyses.anisotropy import mean_pair_cosine
from csebench.cli import main


def test_mean_pair_cosine_known_answers():
    assert mean_pair_cosine(torch.ones(5, 3) * 2.0)["mean_cosine"] == pytest.approx(1.0)  # one direction
    assert mean_pair_cosine(torch.eye(6))["mean_cosine"] == pytest.approx(0.0, abs=1e-12)  # orthogonal
    assert mean_pair_cosine(torch.tensor([[1.0, 0.0], [-3.0, 0.0]]))["mean_cosine"] == pytest.approx(-1.0)
    x = torch.randn(40, 8, generator=torch.Generator().manual_seed(0)) + 0.5
    u = torch.nn.functional.normalize(x.double(), dim=-1)
    c = u @ u.T
    got = mean_pair_cosine(x)
    assert got["mean_cosine"] == pytest.approx(float(c[~torch.eye(40, dtype=torch.bool)].mean()))
    assert got["mean_cosine_to_centroid"] == pytest.approx(float((u @ torch.nn.functional.normalize(u.sum(0), dim=0)).mean()))
    assert got["n_sentences"] == 40 and 0 < got["mean_cosine"] < got["mean_cosine_to_centroid"] ** 2 + 1e-9


def _stsb(root, pairs):
    d = root / "STS" / "STSBenchmark"
    d.mkdir(parents=True, exist_ok=True)
    d.joinpath("sts-test.csv").write_text("".join(f"g\tx\t2012\t0\t{s}\t{a}\t{b}\n" for a, b, s in pairs))


def test_the_command_and_the_suite_table(tmp_path, tiny_encoder, monkeypatch, capsys):
    from csebench.evaluation.embeddings import model_fingerprint, write_embeddings

    enc = tiny_encoder("avg")
    enc.save(tmp_path / "runs" / "simcse" / "seed1" / "model")
    model = str(tmp_path / "runs" / "simcse" / "seed1" / "model")
    pairs = [(f"a man plays guitar {i}", f"someone sings song {i}", i % 5) for i in range(12)]
    _stsb(tmp_path / "se", pairs)
    out = tmp_path / "a.json"
    assert main(["analyze", "anisotropy", "--model", model, "--senteval", str(tmp_path / "se"), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    sentences = sorted({s for a, b, _ in pairs for s in (a, b)})
    assert res["analysis"] == "anisotropy" and res["data"] == "STS-B test" and res["n_sentences"] == len(sentences)
    assert res["mean_cosine"] == pytest.approx(mean_pair_cosine(enc.encode(sentences))["mean_cosine"], abs=1e-5)
    assert res["label"] == "seed1" and res["pooler"] == "avg" and res["provenance"]["precision"] == "auto"  # the envelope
    # served by the model's embeddings table: the same number, the table's provenance under the result's
    table = tmp_path / "emb.npz"
    write_embeddings(table, sentences, enc.encode(sentences).numpy(), {"model": model, "model_fingerprint": model_fingerprint(model), "pooler": "avg", "precision": "fp32"})
    assert main(["analyze", "anisotropy", "--model", model, "--senteval", str(tmp_path / "se"), "--embeddings", str(table),
                 "--label", "tabled", "--out", str(tmp_path / "b.json")]) == 0
    tabled = json.loads((tmp_path / "b.json").read_text())
    assert tabled["mean_cosine"] == pytest.approx(res["mean_cosine"], abs=1e-5) and "embeddings" in tabled["provenance"]
    md, csv = tmp_path / "t.md", tmp_path / "t.csv"
    assert main(["analyze-figure", "anisotropy", "--inputs", str(out), str(tmp_path / "b.json"), "--out", str(md),
                 "--csv", str(csv)]) == 0
    text = md.read_text()
    assert "| seed1 | 24 |" in text and "| tabled | 24 |" in text and text.rstrip().splitlines()[-1].startswith("Provenance")
    assert csv.read_text().splitlines()[0].startswith("model,sentences,mean_pair_cosine")
    monkeypatch.setenv("CSEBENCH_SHARED", str(tmp_path / "no-shared"))  # no --senteval: the shared data, absent here
    assert main(["analyze", "anisotropy", "--model", model, "--out", str(out)]) == 2
    assert "no --senteval given and the shared SentEval data are not at" in capsys.readouterr().err


def test_the_pipeline_and_the_config_know_it():
    from csebench.analysis.selection import selected, settings
    from csebench.analysis.pipeline import AnalysisPipeline
    from csebench.study.params import load_params
    from csebench.study.jobs import Runs
    from runhelpers import PARAMS

    assert "anisotropy" in [a.name for a in AnalysisPipeline.combined()]
    config = {"analyses": ["anisotropy"], "analysis": {"anisotropy": {"split": "dev"}}}
    assert selected(config) == ["anisotropy"] and settings(config)["anisotropy"].split == "dev"
    params = load_params(PARAMS)
    pipe = AnalysisPipeline(params, config, Runs(params))
    assert pipe.targets("ci") == ["results/ci/tables/anisotropy.md"]
    assert pipe.outputs(pipe.built()[[a.name for a in pipe.built()].index("anisotropy")]) == {
        "json": "results/runs/{key}/seed{seed}/{ev}/analysis/anisotropy.json"}
    assert "anisotropy" in pipe.viewed().split("|")
    assert np.isnan(mean_pair_cosine(torch.ones(1, 3))["mean_cosine"])
