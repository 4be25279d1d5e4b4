"""The per-model embeddings table (`csebench embed`) and the evaluators that read it."""

import json
import time

import numpy as np
import pytest
import torch

from csebench.evaluation.embeddings import (EmbeddingTable, evaluation_sentences, model_fingerprint, table_encode,
    write_embeddings)
from csebench.core.errors import DataError
from runhelpers import STS_FAST, assert_fails, run_cli
from test_probing import make_probing


def _vectors(sents):
    return torch.tensor([[len(s), s.count("a"), s.count(" ")] for s in sents], dtype=torch.float32)


def _model(tmp_path, content=b"weights"):
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "model.safetensors").write_bytes(content)
    return d


def test_table_serves_rows_in_request_order_and_encodes_only_misses(tmp_path):
    model = _model(tmp_path)
    sents = ["a b", "aaa", "zz top"]
    write_embeddings(tmp_path / "e.npz", sents, _vectors(sents), {"model_fingerprint": model_fingerprint(model)})
    built, calls = [], []

    def fallback():
        built.append(1)
        return lambda s: (calls.append(list(s)), _vectors(s))[1]

    enc = table_encode(tmp_path / "e.npz", model, fallback)
    ask = ["zz top", "a b", "a b", "aaa"]
    assert torch.equal(enc(ask), _vectors(ask))
    assert built == [] and calls == []  # the model is never loaded when the table has everything
    ask = ["new one", "aaa", "another"]
    assert torch.equal(enc(ask), _vectors(ask))
    assert calls == [["new one", "another"]] and built == [1]


def test_digests_ending_in_nul_bytes_are_found(tmp_path):
    # 1 in 256 sentences has a sha1 ending in 0x00; byte-string arrays would strip it and lose them
    from csebench.evaluation.embeddings import sentence_key

    sents = [f"sentence {i}" for i in range(3000)]
    nul = [s for s in sents if sentence_key(s).endswith(b"\0")]
    assert nul
    write_embeddings(tmp_path / "e.npz", sents, _vectors(sents), {})
    idx, missing = EmbeddingTable(tmp_path / "e.npz").lookup(nul + sents[:5])
    assert missing == [] and idx.tolist() == [sents.index(s) for s in nul + sents[:5]]


def test_table_from_other_weights_or_settings_is_refused(tmp_path):
    model = _model(tmp_path)
    write_embeddings(tmp_path / "e.npz", ["x"], _vectors(["x"]),
                     {"model_fingerprint": model_fingerprint(model), "precision": "bf16"})
    time.sleep(0.01)
    (model / "model.safetensors").write_bytes(b"retrained")
    with pytest.raises(DataError, match="other weights"):
        table_encode(tmp_path / "e.npz", model, lambda: _vectors)
    with pytest.raises(DataError, match="precision"):
        table_encode(tmp_path / "e.npz", None, lambda: _vectors, settings={"precision": "fp32"})


def test_missing_or_corrupt_table_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="csebench embed"):
        EmbeddingTable(tmp_path / "none.npz")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="bad.npz is damaged or not an embeddings table"):
        EmbeddingTable(tmp_path / "bad.npz")


def test_evaluation_sentences_cover_sts_and_capped_transfer(shared_dir):
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import TEST_TASKS, load_task
    from csebench.evaluation.transfer import prepared_tasks, task_sentences

    root = senteval_root(shared_dir / "senteval")
    sts_only = set(evaluation_sentences(root, transfer=False))
    sts = {s for t in TEST_TASKS for ps in [load_task(root, t)] for s in (*ps.sent1, *ps.sent2)}
    assert sts <= sts_only
    capped = set(evaluation_sentences(root, max_train_sentences=300))
    assert set(task_sentences(prepared_tasks(root, None, 300, 1111))) <= capped
    assert sts_only < capped


def test_evaluation_sentences_follow_the_sts_pair_cap(shared_dir):
    """The table holds what a capped eval-sts scores (same subsets) and STS-B test whole (the analyses'
    split), and STS-B dev whole when asked for."""
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import load_stsb, load_test_tasks

    root = senteval_root(shared_dir / "senteval")
    table = set(evaluation_sentences(root, transfer=False, max_sts_pairs=200))
    scored = {s for ps in load_test_tasks(root, max_pairs=200).values() for s in (*ps.sent1, *ps.sent2)}
    whole = {split: {s for ps in [load_stsb(root, split)] for s in (*ps.sent1, *ps.sent2)} for split in ("dev", "test")}
    assert table == scored | whole["test"]
    assert not whole["dev"] <= table
    both = set(evaluation_sentences(root, transfer=False, max_sts_pairs=200, stsb_whole=("dev", "test")))
    assert both == scored | whole["test"] | whole["dev"]
    assert len(table) < len(evaluation_sentences(root, transfer=False)) / 2


def _cli(*argv):
    """A command in this process (seven of them: a second of imports each saved, and the same numbers)."""
    from csebench.cli import main

    assert main(["--threads", "1", *map(str, argv)]) == 0


@pytest.mark.slow(seconds=10)
def test_evaluators_from_the_table_match_direct_encoding(tiny_encoder, tmp_path, shared_dir):
    """eval-sts / eval-transfer / align-uniform with --embeddings give the numbers of encoding directly,
    and the table is written atomically with its provenance."""
    from csebench.evaluation.embeddings import sentence_key
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import cap_pairs, load_stsb

    enc = tiny_encoder("avg")
    enc.save(tmp_path / "model")
    se = shared_dir / "senteval"
    # capped sets (the demo's options): the table must cover exactly what the capped evaluators read
    cap, sts_cap = ["--max-train-sentences", "200", "--max-test-sentences", "200"], ["--max-sts-pairs", "300"]
    _cli("embed", "--model", tmp_path / "model", "--senteval", se, *cap, *sts_cap, "--out", tmp_path / "emb.npz", "--no-progress")
    meta = EmbeddingTable(tmp_path / "emb.npz").meta
    assert meta["precision"] == "fp32" and meta["model_fingerprint"] == model_fingerprint(tmp_path / "model")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind
    for name, extra in (("eval-sts", sts_cap), ("eval-transfer", cap)):
        for tag, emb in (("direct", []), ("table", ["--embeddings", tmp_path / "emb.npz"])):
            _cli(name, "--model", tmp_path / "model", "--senteval", se, *extra, *emb, "--no-progress",
                 "--out", tmp_path / f"{name}-{tag}.json")
        direct, table = (json.loads((tmp_path / f"{name}-{t}.json").read_text()) for t in ("direct", "table"))
        assert table["encoding"]["embeddings"] and not direct["encoding"]["embeddings"]
        assert table["encoding"]["missing_from_table"] == 0
        for task, value in direct["tasks"].items():
            tol = 1e-3 if name == "eval-sts" else 0.5  # fp32 batch neighbours; a classifier may flip a test item
            assert abs(table["tasks"][task] - value) <= tol, (name, task, value, table["tasks"][task])
    # an analysis of STS-B sentences at the same cap reads the capped STS-B test pairs, all of them in the table
    # (which holds no STS-B split whole at a cap); without the cap it reads the whole split, the table's misses encoded
    for tag, extra in (("capped", sts_cap), ("whole", [])):
        _cli("analyze", "align_uniform", "--model", tmp_path / "model", "--senteval", se, *extra, "--embeddings",
             tmp_path / "emb.npz", "--out", tmp_path / f"au-{tag}.json")
        _cli("analyze", "align_uniform", "--model", tmp_path / "model", "--senteval", se, *extra,
             "--out", tmp_path / f"au-{tag}-direct.json")
        au, au_direct = (json.loads((tmp_path / f).read_text()) for f in (f"au-{tag}.json", f"au-{tag}-direct.json"))
        assert au["alignment"] == pytest.approx(au_direct["alignment"], rel=1e-4)
        assert au["uniformity"] == pytest.approx(au_direct["uniformity"], rel=1e-4)
        stsb = cap_pairs(load_stsb(senteval_root(se), "test"), 300 if extra else None)
        assert au["n_sentences"] == len(set(stsb.sent1) | set(stsb.sent2))
        assert ("seeded subset of about 300 pairs" in au["data"]) == bool(extra)
    assert json.loads((tmp_path / "au-capped.json").read_text())["n_sentences"] < au["n_sentences"]
    assert not meta["stsb_whole"]
    table = EmbeddingTable(tmp_path / "emb.npz")
    assert any(sentence_key(s) not in table.row for s in (*stsb.sent1, *stsb.sent2))  # STS-B test is not whole in it


def test_bf16_evaluation_is_close_to_fp32(tiny_encoder):
    from csebench.model.encoder import eval_autocast_dtype
    from csebench.core.errors import ConfigError

    enc = tiny_encoder("avg")
    sents = ["a b c d e f", "x", "hello there world", "the cat sat on the mat"]
    fp32, bf16 = enc.encode(sents, precision="fp32"), enc.encode(sents, precision="bf16")
    assert not torch.equal(fp32, bf16)  # bf16 really ran
    cos = torch.nn.functional.cosine_similarity(fp32, bf16)
    assert cos.min() > 0.99
    assert eval_autocast_dtype("auto", torch.device("cpu")) is None  # CPU default stays fp32
    with pytest.raises(ConfigError, match="precision"):
        eval_autocast_dtype("fp8", torch.device("cpu"))


# --------------------------------------------------------------------------------------- tables bound to their model


@pytest.fixture()
def fake_encoders(monkeypatch):
    """`embed` without the encoding time: 384-d vectors for packaged:minilm, 32-d for anything else."""
    from csebench.evaluation import embeddings

    def model_encoder(model, *args, **kwargs):
        dim = 384 if model == "packaged:minilm" else 32
        return lambda s: torch.stack([torch.full((dim,), float(len(x))) + torch.arange(dim) * (x.count("a") + 1) for x in s])

    monkeypatch.setattr(embeddings, "model_encoder", model_encoder)


def _embed(capsys, model, out, se, *extra):
    """`csebench embed` of the STS sets (20 pairs each) with the options ``extra``: the table's metadata."""
    rc, err = run_cli(capsys, ["embed", "--model", str(model), "--senteval", str(se), "--no-transfer", *STS_FAST,
                               "--out", str(out), *extra])
    assert rc == 0, err
    return EmbeddingTable(out).meta


def test_a_table_is_refused_for_another_model_also_packaged_or_hub(tmp_path, capsys, shared_dir, tiny_encoder, fake_encoders):
    """MiniLM's table scored as the tiny model's (and the other way round) was accepted with exit 0:
    a packaged or hub model's table had a null fingerprint, and the check skipped --model ids."""
    from runhelpers import assert_fails, run_cli

    tiny = tmp_path / "tiny" / "model"
    tiny_encoder("avg").save(tiny)
    se = shared_dir / "senteval"
    minilm_meta = _embed(capsys, "packaged:minilm", tmp_path / "minilm.npz", se)
    assert minilm_meta["model_fingerprint"] == model_fingerprint("packaged:minilm") and minilm_meta["dim"] == 384
    assert minilm_meta["model"] == "packaged:minilm" and minilm_meta["provenance"]["autocast"] == "fp32"
    _embed(capsys, tiny, tmp_path / "tiny.npz", se)

    def sts(model, table):
        return ["eval-sts", "--model", str(model), "--senteval", str(se), "--max-sts-pairs", "20", "--embeddings", str(table),
                "--out", str(tmp_path / "out" / "sts.json"), "--no-progress"]

    assert_fails(capsys, sts(tiny, tmp_path / "minilm.npz"),
                 f"minilm.npz was made from other weights than {tiny}: the table's model is packaged:minilm (dim 384, "
                 f"fingerprint {minilm_meta['model_fingerprint']}), {tiny} has dim 32, fingerprint {model_fingerprint(tiny)}",
                 "rerun `csebench embed --model", outputs=[tmp_path / "out"])
    assert_fails(capsys, sts("packaged:minilm", tmp_path / "tiny.npz"),
                 f"tiny.npz was made from other weights than packaged:minilm: the table's model is {tiny} (dim 32",
                 "packaged:minilm has dim 384", outputs=[tmp_path / "out"])
    rc, err = run_cli(capsys, sts("packaged:minilm", tmp_path / "minilm.npz"))
    assert rc == 0, err
    res = json.loads((tmp_path / "out" / "sts.json").read_text())
    assert res["provenance"]["embeddings"] == [minilm_meta["provenance"]]


def test_a_table_without_fingerprint_is_refused(tmp_path, capsys, shared_dir, tiny_encoder):
    from runhelpers import assert_fails

    tiny_encoder("avg").save(tmp_path / "model")
    write_embeddings(tmp_path / "old.npz", ["x"], _vectors(["x"]), {"model": str(tmp_path / "model")})
    for argv in (["eval-sts", "--senteval", str(shared_dir / "senteval")],
                 ["analyze", "align_uniform", "--senteval", str(shared_dir / "senteval")]):
        assert_fails(capsys, [*argv, "--model", str(tmp_path / "model"), "--embeddings", str(tmp_path / "old.npz"),
                              "--out", str(tmp_path / "out" / "r.json")],
                     f"old.npz records no fingerprint of the weights it was made from ({tmp_path / 'model'}), so nothing "
                     "shows it belongs to this model: rerun `csebench embed`", outputs=[tmp_path / "out"])


def test_hub_model_fingerprint_is_that_of_its_cached_snapshot(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from csebench.core.errors import ConfigError

    repo = tmp_path / "hub" / "models--org--tiny"
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    (snap / "config.json").write_text('{"hidden_size": 32}')
    (snap / "model.safetensors").write_bytes(b"weights")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert model_fingerprint("org/tiny") == model_fingerprint(snap)
    with pytest.raises(ConfigError, match="cannot fingerprint the weights of org/other: not a model folder and not in "
                                          "the local Hugging Face cache"):
        model_fingerprint("org/other")


def test_damaged_npz_is_one_line_naming_it(tmp_path, capsys, shared_dir, tiny_encoder):
    """A truncated table gave a zipfile.BadZipFile traceback; a text file said it held pickled data."""
    from csebench.evaluation.sts import save_pairs
    from runhelpers import assert_fails

    tiny_encoder("avg").save(tmp_path / "model")
    write_embeddings(tmp_path / "good.npz", [f"s{i}" for i in range(500)], torch.randn(500, 32),
                     {"model_fingerprint": model_fingerprint(tmp_path / "model")})
    data = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.npz").write_text("these are not embeddings\n")
    for bad in ("cut.npz", "text.npz"):
        line = assert_fails(capsys, ["eval-sts", "--model", str(tmp_path / "model"), "--senteval", str(shared_dir / "senteval"),
                                     "--embeddings", str(tmp_path / bad), "--out", str(tmp_path / "out" / "sts.json")],
                            f"{tmp_path / bad} is damaged or not an embeddings table (`csebench embed`): delete it and rerun "
                            "`csebench embed`", outputs=[tmp_path / "out"])
        assert "pickled" not in line
    # the STS pairs of the paired bootstrap (the suite tables)
    for method in ("simcse", "iscse"):
        d = tmp_path / "s" / "runs" / method / "seed1"
        d.mkdir(parents=True)
        tasks = {t: 70.0 for t in ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]}
        (d / "sts.json").write_text(json.dumps({"tasks": tasks, "avg": 70.0, "run_info": {"method": method, "backbone": "b"}}))
        save_pairs(d / "sts_pairs.npz", {t: (np.arange(5.0), np.arange(5.0)) for t in tasks})
    data = (tmp_path / "s" / "runs" / "iscse" / "seed1" / "sts_pairs.npz").read_bytes()
    (tmp_path / "s" / "runs" / "iscse" / "seed1" / "sts_pairs.npz").write_bytes(data[:-40])
    from test_report import ROOT, suite_config

    cfg = suite_config(tmp_path / "suite.yaml", "s", {"simcse": ("simcse", "bert-base"), "iscse": ("iscse", "bert-base")})
    assert_fails(capsys, ["results", "render", "--params", str(ROOT / "params.yaml"), "--config", str(cfg), "--item", "suite/s",
                          "--results", str(tmp_path)],
                 "iscse/seed1/sts_pairs.npz is damaged or not an STS pairs file (`eval-sts --pairs-out`): delete it and "
                 "rerun `csebench eval-sts --pairs-out`")


# -------------------------------------------------------------------------- the pooler of a table, recorded and checked


def test_pooler_is_recorded_and_checked_against_the_table(tmp_path, capsys, tiny_encoder, small):
    """`eval-sts --pooler avg --embeddings T` scored T's cls vectors (the table said pooler: null), and an avg
    table read without --pooler scored avg as the model's cls numbers; sts.json named no pooler."""
    model = tmp_path / "run" / "model"
    tiny_encoder("cls").save(model)  # its evaluation pooler: cls_before_pooler
    assert _embed(capsys, model, tmp_path / "cls.npz", small)["pooler"] == "cls_before_pooler"
    assert _embed(capsys, model, tmp_path / "avg.npz", small, "--pooler", "avg")["pooler"] == "avg"
    out = tmp_path / "out" / "r.json"

    def sts(table, *pooler):
        return ["eval-sts", "--model", str(model), "--senteval", str(small), *STS_FAST, "--embeddings", str(tmp_path / table),
                *pooler, "--out", str(out)]

    assert_fails(capsys, sts("cls.npz", "--pooler", "avg"),
                 f"{tmp_path / 'cls.npz'} holds vectors pooled with cls_before_pooler, this evaluation asks for avg "
                 "(--pooler avg): pass --pooler cls_before_pooler, or make a table with avg (`csebench embed --pooler avg`), "
                 "or drop --embeddings", outputs=[out.parent])
    assert_fails(capsys, sts("avg.npz"),
                 f"{tmp_path / 'avg.npz'} holds vectors pooled with avg, this evaluation uses cls_before_pooler (the "
                 "model's own evaluation pooler: no --pooler given): pass --pooler avg", outputs=[out.parent])
    # every consumer checks it: transfer, probing, the analyses
    for argv in (["eval-transfer", "--tasks", "TREC", "--senteval", str(small)],
                 ["eval-probing", "--probing", str(make_probing(tmp_path / "probing", n=(20, 10, 10)))],
                 ["analyze", "align_uniform", "--senteval", str(small)],
                 ["analyze", "model_correlation", "--senteval", str(small), "--other-students", "packaged:minilm"]):
        assert_fails(capsys, [*argv, "--model", str(model), "--embeddings", str(tmp_path / "avg.npz"), "--out", str(out)],
                     "holds vectors pooled with avg, this evaluation uses cls_before_pooler", outputs=[out.parent])
    # a table of an older csebench (pooler: null) was made with the model's own pooler
    from csebench.evaluation.embeddings import EmbeddingTable, write_embeddings

    old = EmbeddingTable(tmp_path / "cls.npz")
    write_embeddings(tmp_path / "old.npz", [""] * 0, np.zeros((0, 32), np.float32), {**old.meta, "pooler": None})
    assert_fails(capsys, sts("old.npz", "--pooler", "avg"), "old.npz holds vectors pooled with cls_before_pooler")
    # the result names the pooler, with a table and without
    for tag, argv in (("table", sts("avg.npz", "--pooler", "avg")),
                      ("direct", ["eval-sts", "--model", str(model), "--senteval", str(small), *STS_FAST, "--out", str(out)])):
        rc, err = run_cli(capsys, argv)
        assert rc == 0, err
        assert json.loads(out.read_text())["encoding"]["pooler"] == ("avg" if tag == "table" else "cls_before_pooler")
