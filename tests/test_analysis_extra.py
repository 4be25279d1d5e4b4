"""DistillCSE Tables 5, 8, 9 and SSCL Fig. 5 analyses: known answers on hand-made embeddings, the
distillation loss against a naive implementation, and the CLI on tiny random models."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from csebench.analysis import distill
from csebench.evaluation.sts import PairSet


def _fixed_encoder(dim=16, seed=0, transform=None):
    """Random but fixed vector per sentence; ``transform(sentence, vector)`` alters it."""
    rng = np.random.default_rng(seed)
    table = {}

    def encode(sents):
        rows = [table.setdefault(s, rng.normal(size=dim)) for s in sents]
        if transform:
            rows = [transform(s, r) for s, r in zip(sents, rows)]
        return torch.tensor(np.stack(rows), dtype=torch.float32)

    return encode


def _pairs(n=40):
    return PairSet([f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)], np.linspace(0, 5, n), ["dev"] * n)


def _write_stsb(root, rows_by_split):
    d = root / "STS" / "STSBenchmark"
    d.mkdir(parents=True, exist_ok=True)
    for split, rows in rows_by_split.items():
        d.joinpath(f"sts-{split}.csv").write_text("".join(f"g\tx\t2012\t0\t{s}\t{a}\t{b}\n" for a, b, s in rows))


# ------------------------------------------------------------------ Table 8

def test_model_correlation_known_answers():
    dev = _pairs()
    student = _fixed_encoder()
    negated = lambda s: -student(s)  # noqa: E731  cosines unchanged
    flipped = lambda s: student(s) * torch.tensor([[-1.0 if x.startswith("b") else 1.0] for x in s])  # noqa: E731
    other = _fixed_encoder(seed=1)
    res = distill.model_correlation(student, {"self_teacher": [("same", student)], "other_teachers": [("neg", negated), ("flip", flipped)],
                                              "other_students": [("other", other)]}, dev)
    assert res["groups"]["self_teacher"]["mean"] == pytest.approx(100.0)
    assert res["groups"]["other_teachers"]["models"] == pytest.approx({"neg": 100.0, "flip": -100.0})
    assert res["groups"]["other_teachers"]["mean"] == pytest.approx(0.0, abs=1e-9) and res["groups"]["other_teachers"]["label"] == "O.T."
    assert abs(res["groups"]["other_students"]["mean"]) < 60  # independent random models
    from csebench.evaluation.sts import spearman100, sts_pair_similarities

    assert res["student_stsb"] == pytest.approx(spearman100(sts_pair_similarities(student, dev), dev.scores))
    assert res["models_stsb"]["flip"] == pytest.approx(-res["student_stsb"])
    assert distill.model_correlation(student, {"other_students": []}, dev)["groups"]["other_students"]["mean"] is None


# ------------------------------------------------------------------ Table 9

def _naive_loss(student, teachers, tau_s, tau_t, reduction="mean"):
    """Eq. 2 written out: cross entropy of softmax(t/tau_t) and softmax(s/tau_s) over j != i."""
    n = student.shape[0]
    s = F.normalize(student.double(), dim=-1)
    s = s @ s.T
    t = torch.stack([F.normalize(x.double(), dim=-1) @ F.normalize(x.double(), dim=-1).T for x in teachers]).mean(0)
    total = []
    for i in range(n):
        j = [k for k in range(n) if k != i]
        q = torch.softmax(t[i, j] / tau_t, 0)
        total.append(-(q * torch.log_softmax(s[i, j] / tau_s, 0)).sum())
    total = torch.stack(total)
    return float(total.mean() if reduction == "mean" else total.sum())


def test_batch_distill_loss_matches_naive_and_ignores_shuffle_and_weight():
    g = torch.Generator().manual_seed(0)
    z, t1, t2 = (torch.randn(12, d, generator=g) for d in (16, 8, 24))
    base = distill.DistillationSettings(teachers="x", student_temperature=0.05, teacher_temperature=0.02, weight=3.0, shuffle="group_p")
    for reduction in ("mean", "sum"):
        s = distill.measurement_settings(base, reduction=reduction)
        assert s.shuffle == "none" and s.weight == 1.0 and s.student_temperature == 0.05
        loss, ent = distill.batch_distill_loss(z, [t1, t2], s)
        assert loss == pytest.approx(_naive_loss(z, [t1, t2], 0.05, 0.02, reduction), rel=1e-4)
        assert loss - ent >= -1e-6  # KL >= 0
    cross = distill.measurement_settings(base, similarity="cross_view")
    assert distill.batch_distill_loss(z, [t1], cross)[0] == pytest.approx(distill.batch_distill_loss(z, [t1], base)[0], rel=1e-6)
    # student = its only teacher at equal temperatures: the loss is the teacher entropy, KL = 0
    same = distill.measurement_settings(base, student_temperature=0.05, teacher_temperature=0.05)
    loss, ent = distill.batch_distill_loss(t1, [t1], same)
    assert loss == pytest.approx(ent, rel=1e-4)


def test_distillation_loss_per_split_is_seeded_and_matches_naive():
    corpus = [f"c{i}" for i in range(50)]
    test = [f"t{i}" for i in range(30)]
    student, teacher = _fixed_encoder(seed=2), _fixed_encoder(seed=3)
    s = distill.measurement_settings(None)
    res = distill.distillation_loss(student, [teacher], {"train": corpus, "test": test}, s, batch_size=8, n_batches=3, seed=5)
    again = distill.distillation_loss(student, [teacher], {"train": corpus, "test": test}, s, batch_size=8, n_batches=3, seed=5)
    assert res["splits"] == again["splits"]
    for stream, (name, pool) in enumerate((("train", corpus), ("test", test))):
        batches = distill.sample_batches(len(pool), 8, 3, 5, stream)
        want = [_naive_loss(student([pool[i] for i in b]), [teacher([pool[i] for i in b])], 0.02, 0.01) for b in batches]
        np.testing.assert_allclose(res["splits"][name]["per_batch"], want, rtol=1e-4)
    assert res["gap"] == pytest.approx(res["splits"]["test"]["mean"] - res["splits"]["train"]["mean"])
    assert res["settings"]["shuffle"] == "none" and res["n_teachers"] == 1


def _save(enc, path):
    enc.save(path)
    return str(path)


def _run(argv):
    from csebench.cli import main

    return main(argv)


def test_distill_loss_cli_on_tiny_models(tmp_path, tiny_encoder):
    from csebench.training.data import tokenize_corpus

    student, t1, t2 = tiny_encoder("cls", seed=0), tiny_encoder("avg", seed=1), tiny_encoder("cls", seed=2)
    paths = [_save(e, tmp_path / n) for e, n in ((student, "student"), (t1, "t1"), (t2, "t2"))]
    cfg = {"objectives": {"distillation": {"teachers": {"run": "t"}, "student_temperature": 0.05, "teacher_temperature": 0.02,
                                           "shuffle": "group_p"}}, "training": {"max_seq_length": 16}}
    (tmp_path / "student" / "training_config.json").write_text(json.dumps(cfg))
    corpus = [f"sentence number {i} about {w} things ." for i, w in enumerate(["red", "blue", "odd", "new", "old"] * 8)]
    (tmp_path / "corpus.txt").write_text("\n".join(corpus) + "\n")
    _write_stsb(tmp_path / "se", {"test": [(f"a man plays {i}", f"a woman sings {i}", i % 5) for i in range(12)]})
    out = tmp_path / "dl.json"
    assert _run(["analyze", "distill_loss", "--model", paths[0], "--teacher", paths[1], "--teacher", paths[2], "--corpus",
                 str(tmp_path / "corpus.txt"), "--senteval", str(tmp_path / "se"), "--logit-batch-size", "16",
                 "--n-batches", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["settings"] == {"student_temperature": 0.05, "teacher_temperature": 0.02, "reduction": "mean",
                               "similarity": "anchors", "shuffle": "none"}
    assert res["max_seq_length"] == 16 and res["student_head"] is True and res["settings_source"] == "training_config.json"
    assert res["splits"]["test"]["n_sentences"] == 24 and len(res["splits"]["train"]["per_batch"]) == 2

    def embed(enc, sents, head):  # the in-memory models, as training embeds a batch (eval mode)
        ids, mask = (torch.from_numpy(a) for a in tokenize_corpus(sents, enc.tokenizer, 16).batch(np.arange(len(sents)), 0))
        enc.eval()
        with torch.no_grad():
            return enc(ids, mask, train_head=head)

    batch = [corpus[i] for i in distill.sample_batches(len(corpus), 16, 2, 0, 0)[0]]
    want = _naive_loss(embed(student, batch, True), [embed(t1, batch, False), embed(t2, batch, False)], 0.05, 0.02)
    assert res["splits"]["train"]["per_batch"][0] == pytest.approx(want, rel=1e-4)


# ------------------------------------------------------------------ SSCL Fig. 5

def test_token_matrix_on_tiny_encoders_and_cli_figure(tmp_path, tiny_encoder):
    from csebench.analysis import measures as M
    from csebench.analysis.core import token_similarity_matrix

    enc = tiny_encoder("avg")
    sent = "a man is playing a guitar ."
    res = token_similarity_matrix(enc, sent)
    m = np.array(res["matrix"])
    assert "[CLS]" not in res["tokens"] and len(res["tokens"]) == m.shape[0] == m.shape[1]
    np.testing.assert_allclose(np.diag(m), 1.0, atol=1e-6)
    np.testing.assert_allclose(m, m.T, atol=1e-6)
    assert res["layer"] == enc.num_layers
    e = enc.tokenizer([sent], return_special_tokens_mask=True, return_tensors="pt")
    enc.eval()  # as the analysis (no dropout)
    with torch.no_grad():
        h = enc.forward_hidden(e["input_ids"], e["attention_mask"], all_layers=True)[-1]
    assert res["toksim"] == pytest.approx(M.toksim(h, 1 - e["special_tokens_mask"])[0], rel=1e-5)
    with_special = token_similarity_matrix(enc, sent, exclude_special=False)
    assert with_special["tokens"][0] == "[CLS]" and len(with_special["tokens"]) == len(res["tokens"]) + 2

    a, b = (_save(tiny_encoder("cls", seed=s), tmp_path / n / "seed1" / "model") for s, n in ((0, "simcse"), (1, "sscl")))
    _write_stsb(tmp_path / "se", {"test": [("the first sentence here", "another one", 3.0)]})
    out, png = tmp_path / "tm.json", tmp_path / "tm.png"
    assert _run(["analyze", "token_matrix", "--models", a, b, "--senteval", str(tmp_path / "se"), "--out", str(out),
                 "--figure", str(png)]) == 0
    r = json.loads(out.read_text())
    assert r["sentence"] == "the first sentence here" and list(r["models"]) == ["simcse/seed1", "sscl/seed1"]
    assert r["models"]["sscl/seed1"]["tokens"] == ["the", "first", "sentence", "here"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _run(["analyze", "token_matrix", "--models", a, "--labels", "x", "y", "--sentence", "hi there", "--out", str(out)]) == 2


# ------------------------------------------------------------------ Table 5 and tables

def test_ensemble_encode_of_one_model_and_of_scaled_copies(tmp_path):
    from csebench.evaluation.sts import evaluate_sts

    rows = [(f"s{i}", f"t{i}", (i * 7) % 6) for i in range(30)]
    _write_stsb(tmp_path, {"test": rows})
    enc, other = _fixed_encoder(seed=0), _fixed_encoder(seed=1)
    one = evaluate_sts(enc, tmp_path, tasks=["STSBenchmark"])["tasks"]["STSBenchmark"]
    for members in ([enc], [enc, lambda s: 5 * enc(s)]):
        assert evaluate_sts(distill.ensemble_encode(members), tmp_path, tasks=["STSBenchmark"])["tasks"]["STSBenchmark"] == pytest.approx(one)
    mean = lambda s: F.normalize(enc(s).double(), dim=-1) + F.normalize(other(s).double(), dim=-1)  # noqa: E731
    both = evaluate_sts(distill.ensemble_encode([enc, other]), tmp_path, tasks=["STSBenchmark"])["tasks"]["STSBenchmark"]
    assert both == pytest.approx(evaluate_sts(mean, tmp_path, tasks=["STSBenchmark"])["tasks"]["STSBenchmark"])


def test_ensemble_sts_cli_writes_an_sts_json(tmp_path, shared_dir):
    from csebench.evaluation.embeddings import EmbeddingTable, evaluation_sentences, table_encode, write_embeddings
    from csebench.evaluation.sts import evaluate_sts

    root = shared_dir / "senteval" / "downstream"
    sents = evaluation_sentences(root, transfer=False)
    rng = np.random.default_rng(0)
    tables = []
    for k in range(2):
        tables.append(str(tmp_path / f"e{k}.npz"))
        write_embeddings(tables[-1], sents, rng.normal(size=(len(sents), 8)).astype(np.float32), {"model": None, "model_fingerprint": f"weights{k}"})
    out = tmp_path / "sts.json"
    assert _run(["analyze", "ensemble_sts", "--embeddings", tables[0], "--senteval", str(root), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    direct = evaluate_sts(table_encode(EmbeddingTable(tables[0]), None, None), root)
    # equal up to rounding (normalized float64 vs raw float32 rows: near-tied cosines may swap ranks)
    assert res["tasks"] == pytest.approx(direct["tasks"], abs=1e-2) and res["avg"] == pytest.approx(direct["avg"], abs=1e-3)
    assert set(res) >= {"tasks", "subsets", "n_pairs", "avg", "encoding", "run_info"}
    assert res["run_info"]["method"] == "ensemble" and res["encoding"]["missing_from_table"] == 0
    from csebench.results.runs import RunResult

    assert RunResult.from_disk(out, "sts").avg == pytest.approx(res["avg"])  # the report reads it
    assert _run(["analyze", "ensemble_sts", "--embeddings", *tables, "--senteval", str(root), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["avg"] != pytest.approx(direct["avg"])


def test_model_correlation_cli_with_and_without_tables(tmp_path, tiny_encoder):
    from csebench.evaluation.embeddings import model_fingerprint, write_embeddings

    encs = [tiny_encoder("avg", seed=s) for s in range(3)]
    paths = [_save(e, tmp_path / "runs" / n / "seed1" / "model") for e, n in zip(encs, ("student", "teacher", "other"))]
    rows = [(f"a man plays guitar {i}", f"someone plays {'music' if i % 2 else 'chess'} {i}", i % 6) for i in range(20)]
    _write_stsb(tmp_path / "se", {"dev": rows})
    sents = sorted({s for a, b, _ in rows for s in (a, b)})
    table = tmp_path / "teacher.npz"
    write_embeddings(table, sents, encs[1].encode(sents), {"model": "elsewhere", "model_fingerprint": model_fingerprint(paths[1])})
    common = ["analyze", "model_correlation", "--model", paths[0], "--self-teacher", paths[1], "--other-teachers", paths[2],
              "--other-students", paths[0], "--senteval", str(tmp_path / "se")]
    assert _run(common + ["--out", str(tmp_path / "a.json")]) == 0
    assert _run(common + ["--embeddings", str(table), "--out", str(tmp_path / "b.json")]) == 0
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert b["tables"][paths[1]] == str(table) and a["tables"][paths[1]] is None
    assert b["groups"]["self_teacher"]["mean"] == pytest.approx(a["groups"]["self_teacher"]["mean"], abs=1e-3)
    assert a["groups"]["other_students"]["models"] == {"student/seed1": pytest.approx(100.0)}  # the student itself
    assert list(a["groups"]["self_teacher"]["models"]) == ["teacher/seed1"] and a["data"] == "STS-B dev"
    stray = tmp_path / "stray.npz"
    write_embeddings(stray, sents, encs[1].encode(sents), {"model": "nowhere", "model_fingerprint": "0" * 24})
    assert _run(common + ["--embeddings", str(stray), "--out", str(tmp_path / "c.json")]) == 2
