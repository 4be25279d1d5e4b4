"""SentEval transfer tasks: loaders on hand-made files, folds, the batched classifier, the driver."""

from __future__ import annotations

import copy
import json
import logging

import numpy as np
import pytest
import torch
from torch import nn

from csebench.core.errors import DataError
from csebench.evaluation import transfer as T
from runhelpers import make_senteval, run_cli, write

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one thread avoids oversubscription


# ----------------------------------------------------------------------------- helpers


def keyword_encode(sentences):
    """Deterministic features: a sentiment/label axis from keywords plus hashed noise dimensions."""
    out = []
    for s in sentences:
        g = torch.Generator().manual_seed(abs(hash(s)) % (2**31))
        v = 0.1 * torch.randn(8, generator=g)
        v[0] += 10.0 if ("good" in s or "same" in s) else (-10.0 if ("bad" in s) else 0.0)
        for j, c in enumerate(T.TREC_CLASSES):
            if f" {c.lower()} " in f" {s} ":
                v[1 + j] += 10.0
        out.append(v)
    return torch.stack(out) if out else torch.zeros(0, 8)


# ----------------------------------------------------------------------------- loaders


def test_binary_loader_labels_order_and_empty_lines(tmp_path):
    write(tmp_path / "CR" / "custrev.pos", "a  great   phone\n\nok\n", "latin-1")
    write(tmp_path / "CR" / "custrev.neg", "bad\nreally bad one\n", "latin-1")
    data = T.load_binary(tmp_path, "CR")
    sp = data.splits["all"]
    # 3 + 2 lines; SentEval keeps the empty line as an empty sentence; label 1 = the .pos file
    assert len(sp) == 5
    # sorted by (number of tokens, label), stably; tokens re-joined with single spaces
    assert sp.a == ["", "bad", "ok", "really bad one", "a great phone"]
    assert sp.y.tolist() == [1, 0, 1, 0, 1]  # ties on length: label 0 before label 1


def test_binary_loader_reads_latin1_and_subj_label_convention(tmp_path):
    write(tmp_path / "SUBJ" / "subj.objective", "caf\u00e9 facts\n", "latin-1")
    write(tmp_path / "SUBJ" / "subj.subjective", "i feel\n", "latin-1")
    sp = T.load_binary(tmp_path, "SUBJ").splits["all"]
    assert dict(zip(sp.a, sp.y.tolist())) == {"caf\u00e9 facts": 1, "i feel": 0}


def test_sst_loader(tmp_path):
    folder = tmp_path / "SST" / "binary"
    write(folder / "sentiment-train", "a fine  film \t1\nawful \t0\n")
    write(folder / "sentiment-dev", "ok \t1\n")
    write(folder / "sentiment-test", "meh \t0\n")
    data = T.load_sst2(tmp_path)
    assert data.splits["train"].a == ["awful", "a fine film"]
    assert data.splits["train"].y.tolist() == [0, 1]
    assert len(data.splits["dev"]) == len(data.splits["test"]) == 1


def test_trec_loader_drops_fine_label(tmp_path):
    write(tmp_path / "TREC" / "train_5500.label", "DESC:manner How did it  happen ?\nNUM:date When ?\n", "latin-1")
    write(tmp_path / "TREC" / "TREC_10.label", "LOC:city Where is it ?\n", "latin-1")
    data = T.load_trec(tmp_path)
    tr = data.splits["train"]
    assert tr.a == ["When ?", "How did it happen ?"]
    assert tr.y.tolist() == [T.TREC_CLASSES.index("NUM"), T.TREC_CLASSES.index("DESC")]
    assert data.splits["test"].y.tolist() == [T.TREC_CLASSES.index("LOC")]


def test_mrpc_loader_skips_header(tmp_path):
    head = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    write(tmp_path / "MRPC" / "msr_paraphrase_train.txt", head + "1\t1\t2\tA b .\tA  c .\n0\t3\t4\tx\ty z\n")
    write(tmp_path / "MRPC" / "msr_paraphrase_test.txt", head + "0\t5\t6\tq\tr\n")
    data = T.load_mrpc(tmp_path)
    tr = data.splits["train"]
    assert tr.a == ["x", "A b ."] and tr.b == ["y z", "A c ."] and tr.y.tolist() == [0, 1]
    assert len(data.splits["test"]) == 1


@pytest.mark.parametrize("task,path,text,match", [
    ("TREC", "TREC/train_5500.label", "DESC manner no colon\n", "COARSE:fine"),
    ("TREC", "TREC/train_5500.label", "FOO:bar What ?\n", "unknown TREC class"),
    ("SST2", "SST/binary/sentiment-train", "no tab here\n", "no tab"),
    ("SST2", "SST/binary/sentiment-train", "text\tpositive\n", "not an integer"),
    ("SST2", "SST/binary/sentiment-train", "text\t3\n", "must be 0 or 1"),
    ("MRPC", "MRPC/msr_paraphrase_train.txt", "header\n1\tonly\tthree\n", "5 tab-separated"),
    ("MRPC", "MRPC/msr_paraphrase_train.txt", "header\nyes\t1\t2\ta\tb\n", "not an integer"),
])
def test_malformed_files_name_file_and_line(tmp_path, task, path, text, match):
    root = make_senteval(tmp_path / "se")
    write(root / path, text)
    with pytest.raises(DataError, match=match) as exc:
        T.load_transfer_task(root, task)
    assert path.split("/")[-1] in str(exc.value)
    assert ":1:" in str(exc.value) or ":2:" in str(exc.value)


def test_missing_file_and_unknown_task(tmp_path):
    root = make_senteval(tmp_path / "se")
    (root / "MR" / "rt-polarity.neg").unlink()
    with pytest.raises(DataError, match="rt-polarity.neg"):
        T.load_transfer_task(root, "MR")
    with pytest.raises(DataError, match="unknown transfer task"):
        T.evaluate_transfer(keyword_encode, root, tasks=["SST5"])


def test_cli_exit_code_for_bad_data(tmp_path, capsys):
    from csebench.cli import main

    root = make_senteval(tmp_path / "se")
    write(root / "TREC" / "TREC_10.label", "XYZ:abc What ?\n")
    out = tmp_path / "o.json"
    rc = main(["eval-transfer", "--model", str(tmp_path / "unused"), "--senteval", str(root), "--out", str(out),
               "--tasks", "TREC"])
    assert rc == 2 and not out.exists()
    assert "TREC_10.label:1" in capsys.readouterr().err


# ----------------------------------------------------------------------------- folds and features


def test_stratified_folds_partition_and_balance():
    y = np.array([0] * 30 + [1] * 20)
    folds = T._stratified_folds(y, 10, 1111)
    assert len(folds) == 10
    tests = np.concatenate([te for _, te in folds])
    assert sorted(tests.tolist()) == list(range(50))  # each example tested exactly once
    for tr, te in folds:
        assert set(tr).isdisjoint(te) and len(tr) + len(te) == 50
        assert (y[te] == 0).sum() == 3 and (y[te] == 1).sum() == 2  # stratified
    assert [te.tolist() for _, te in T._stratified_folds(y, 10, 1111)] == [te.tolist() for _, te in folds]
    assert [te.tolist() for _, te in T._stratified_folds(y, 10, 7)] != [te.tolist() for _, te in folds]
    with pytest.raises(DataError, match="at least 10 examples"):
        T._stratified_folds(np.array([0] * 30 + [1] * 5), 10, 1111)


def test_split_job_holds_out_five_percent():
    rows = np.arange(100, 200)
    job = T.split_job(rows, 1111)
    assert len(job.dev) == 5 and len(job.train) == 95
    assert sorted(np.concatenate([job.train, job.dev]).tolist()) == rows.tolist()


def test_mrpc_pair_features():
    u = torch.tensor([[1.0, -2.0]])
    v = torch.tensor([[3.0, 4.0]])
    assert T.pair_features(u, v).tolist() == [[2.0, 6.0, 3.0, -8.0]]
    # symmetric in (u, v), as SentEval's |u - v| and u * v are
    assert torch.equal(T.pair_features(u, v), T.pair_features(v, u))


# ----------------------------------------------------------------------------- classifier


def _oracle_fit(X, y, train, dev, l2, nclasses, cfg, seed):
    """One classifier trained the way SentEval's PyTorchClassifier.fit does, sequentially, with
    torch.optim.Adam and autograd: the reference the batched trainer must reproduce."""
    np.random.seed(seed)
    torch.manual_seed(seed)
    model = nn.Linear(X.shape[1] - 1, nclasses)
    opt = torch.optim.Adam(model.parameters(), weight_decay=l2)
    Xr = X[:, :-1]
    trX, trY, dX, dY = Xr[train], y[train], Xr[dev], y[dev]
    best, fails, stop, nepoch = -1.0, 0, False, 0
    while not stop and nepoch <= cfg.max_epoch:
        for _ in range(cfg.epoch_size):
            perm = np.random.permutation(len(trX))
            for i in range(0, len(trX), cfg.batch_size):
                idx = torch.as_tensor(perm[i:i + cfg.batch_size])
                loss = nn.functional.cross_entropy(model(trX[idx]), trY[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        nepoch += cfg.epoch_size
        with torch.no_grad():
            acc = (model(dX).argmax(1) == dY).double().mean().item()
        if acc > best:
            best, kept = acc, copy.deepcopy(model)
        else:
            if fails >= cfg.tenacity:
                stop = True
            fails += 1
    return best, torch.cat([kept.weight.T, kept.bias[None]]).detach(), nepoch


def test_batched_trainer_matches_sequential_senteval_semantics():
    torch.manual_seed(0)
    n, d, c = 200, 6, 3
    Xr = torch.randn(n, d)
    y = (Xr @ torch.randn(d, c) + torch.randn(n, c)).argmax(1)
    X = T._with_bias(Xr)
    cfg = T.ClassifierConfig(batch_size=32, tenacity=2, epoch_size=2, max_epoch=16)
    # jobs of different sizes (6 vs 5 minibatches per pass) exercise the ragged last step
    splits = [(np.arange(0, 170), np.arange(170, 200)), (np.arange(40, 190), np.arange(0, 40))]
    jobs = [T.Job(tr, te, np.random.RandomState(5)) for tr, te in splits]
    l2 = np.array([[1e-5, 1e-2], [1e-3, 1e-1]])
    fit = T.fit_logreg_batched(X, y, jobs, l2, c, cfg, seed=5)
    for f, (tr, te) in enumerate(splits):
        for r in range(2):
            best, w, nepoch = _oracle_fit(X, y, torch.as_tensor(tr), torch.as_tensor(te), l2[f, r], c, cfg, 5)
            assert fit.dev_acc[f, r] == pytest.approx(best)
            assert fit.passes[f, r] == nepoch
            assert torch.allclose(fit.weights[f, r], w, atol=1e-5)


def test_classifier_learns_linearly_separable_problem():
    g = torch.Generator().manual_seed(1)
    Xr = torch.randn(1500, 5, generator=g)
    margin = Xr[:, 0] - 0.5 * Xr[:, 1]
    Xr, margin = Xr[margin.abs() > 0.3][:1000], margin[margin.abs() > 0.3][:1000]
    y = (margin > 0).long()
    X = T._with_bias(3 * Xr)
    jobs = [T.Job(np.arange(800), np.arange(800, 1000), np.random.RandomState(1111))]
    fit = T.fit_logreg_batched(X, y, jobs, np.array([T.L2_GRID]), 2, T.SIMCSE_TEST_MODE, 1111)
    assert fit.dev_acc.min() >= 0.97
    # early stopping (tenacity 5: six non-improving checks of 4 passes) ends training long before
    # max_epoch once the dev accuracy saturates
    assert 24 <= fit.passes.max() < 100


def test_initial_weights_match_senteval_and_leave_rng_alone():
    state = torch.random.get_rng_state()
    w = T.initial_weights(4, 3, 1111)
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(1111)
    lin = nn.Linear(4, 3)
    assert torch.equal(w[:4], lin.weight.detach().T) and torch.equal(w[4], lin.bias.detach())


# ----------------------------------------------------------------------------- driver


@pytest.mark.slow(seconds=1)  # ~10 s on an idle 2-core machine, about a minute when it is shared
def test_evaluate_transfer_end_to_end(tmp_path):
    root = make_senteval(tmp_path / "se")
    seen = []

    def enc(s):
        seen.append(list(s))
        return keyword_encode(s)

    # tiny sets: small minibatches give Adam (lr 1e-3) enough steps before early stopping
    res = T.evaluate_transfer(enc, root, cfg=T.ClassifierConfig(kfold=3, batch_size=4))
    assert len(seen) == 1 and len(seen[0]) == len(set(seen[0]))  # one call, distinct sentences
    assert set(res["tasks"]) == set(T.TASKS)
    for t in ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC"):
        assert res["tasks"][t] >= 95.0, (t, res["tasks"][t])
    # MRPC pairs: paraphrase pairs are identical sentences (|u-v| = 0); others differ in polarity
    assert res["tasks"]["MRPC"] >= 95.0
    assert res["avg"] == pytest.approx(np.mean([res["tasks"][t] for t in T.TASKS]))
    assert res["protocol"] == "senteval" and res["max_train_sentences"] is None
    assert res["details"]["MR"]["classifiers_trained"] == 3 * 3 * 4 + 3
    json.dumps(res)  # serialisable


def test_random_features_give_chance_accuracy(tmp_path):
    root = make_senteval(tmp_path / "se", n=60)
    rand = lambda s: torch.randn(len(s), 8, generator=torch.Generator().manual_seed(0))
    res = T.evaluate_transfer(rand, root, tasks=["MR"], cfg=T.ClassifierConfig(kfold=3, max_epoch=8))
    assert 25.0 <= res["tasks"]["MR"] <= 75.0
    assert "avg" not in res


def test_max_train_sentences_is_recorded(tmp_path):
    root = make_senteval(tmp_path / "se")
    res = T.evaluate_transfer(keyword_encode, root, tasks=["SST2", "MR"], max_train_sentences=30,
                              cfg=T.ClassifierConfig(kfold=3, max_epoch=8))
    assert res["protocol"] == "capped" and "NOT SentEval-protocol" in res["warning"]
    sst = res["details"]["SST2"]
    assert sst["capped"] and sst["n_train_used"] == 30 and sst["n_train_full"] == 40
    assert res["details"]["MR"]["n_train_used"] == 30 and res["details"]["MR"]["ndev"] == 30
    # dev/test sets are never capped
    assert sst["ndev"] == 40 and sst["ntest"] == 40


def test_max_test_sentences_caps_only_held_out_splits(tmp_path):
    root = make_senteval(tmp_path / "se")
    seen = []

    def enc(s):
        seen.extend(s)
        return keyword_encode(s)

    res = T.evaluate_transfer(enc, root, tasks=["SST2", "MR", "TREC"], max_test_sentences=24,
                              cfg=T.ClassifierConfig(kfold=3, max_epoch=8))
    assert res["protocol"] == "capped" and res["max_test_sentences"] == 24
    assert "max_test_sentences=24" in res["warning"] and "max_train_sentences" not in res["warning"]
    sst, trec, mr = (res["details"][t] for t in ("SST2", "TREC", "MR"))
    assert sst["n_eval_full"] == {"dev": 40, "test": 40} and sst["n_eval_used"] == {"dev": 24, "test": 24}
    assert sst["ndev"] == 24 and sst["ntest"] == 24 and sst["n_train_used"] == 40  # the fitted set is whole
    assert trec["n_eval_used"]["test"] == 6 * 10  # every class keeps its minimum of 10 (stratified)
    assert mr["n_eval_full"] == {} and mr["n_train_used"] == 80  # cross-validated: nothing held out to cap
    # the embeddings table of a suite with the cap holds exactly what the classifiers see
    data = T.prepared_tasks(root, ["SST2", "MR", "TREC"], None, 1111, max_test_sentences=24)
    assert set(seen) == set(T.task_sentences(data))
    with pytest.raises(Exception, match="max_test_sentences must be positive"):
        T.prepared_tasks(root, ["SST2"], max_test_sentences=0)


def test_suite_transfer_caps_are_validated():
    from csebench.study.params import load_params
    from csebench.core.errors import ConfigError
    from csebench.study.jobs import suite_evaluation

    from runhelpers import PARAMS

    params = load_params(PARAMS)
    ev = suite_evaluation(params, "demo")
    assert ev["max_train_sentences"] == 120 and ev["max_test_sentences"] == 120
    params["suites"]["demo"]["transfer"]["max_test_sentnces"] = 3
    with pytest.raises(ConfigError, match="unknown key 'max_test_sentnces'"):
        suite_evaluation(params, "demo")


# ---------------------------------------------------------------------------- the transfer average of a subset of tasks


def test_eval_transfer_subset_has_no_seven_task_average(tmp_path, capsys, caplog, tiny_encoder):
    tiny_encoder().save(tmp_path / "model")
    se = make_senteval(tmp_path / "se", n=20)
    out = tmp_path / "transfer.json"
    with caplog.at_level(logging.INFO, logger="csebench"):
        rc, err = run_cli(capsys, ["eval-transfer", "--model", str(tmp_path / "model"), "--senteval", str(se),
                                   "--tasks", "TREC", "MRPC", "CR", "SST2", "--out", str(out), "--no-progress"])
    assert rc == 0, err
    res = json.loads(out.read_text())
    assert "avg" not in res and res["avg_tasks"] == ["TREC", "MRPC", "CR", "SST2"]
    assert res["avg_subset"] == pytest.approx(np.mean([res["tasks"][t] for t in res["avg_tasks"]]))
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("transfer "))
    assert "nan" not in line
    assert line.startswith(f"transfer avg of 4 tasks {res['avg_subset']:.2f}, not the 7-task average (senteval, pooler cls_before_pooler): TREC ")


def test_a_suite_can_switch_the_transfer_tasks_off(tmp_path, capsys):
    """`transfer: false`: the suite's evaluation folder says so (every other suite keeps its name), embed gets
    --no-transfer, and eval-transfer writes a result that says "off" without loading a model."""
    import copy

    from csebench.study.jobs import eval_name, suite_evaluation
    from csebench.study.params import load_params
    from csebench.core.errors import ConfigError
    from runhelpers import ROOT, run_cli

    params = load_params(str(ROOT / "params.yaml"))
    sweep = suite_evaluation(params, "demo-sweep")
    assert sweep["transfer"] is False and suite_evaluation(params, "demo")["transfer"] is None
    demo = suite_evaluation(params, "demo")  # its folder's name is what it was before the switch existed
    assert eval_name(demo) == eval_name({k: v for k, v in demo.items() if k != "transfer"})
    assert eval_name(sweep) != eval_name({**sweep, "transfer": None})
    bad = copy.deepcopy(params)
    bad["suites"]["demo-sweep"]["transfer"] = {"max_train": 3}
    with pytest.raises(ConfigError, match="unknown key 'max_train'"):
        suite_evaluation(bad, "demo-sweep")
    out = tmp_path / "transfer.json"
    rc, err = run_cli(capsys, ["eval-transfer", "--model", str(tmp_path / "no-model-needed"), "--no-transfer", "--out", str(out)])
    assert rc == 0, err
    res = json.loads(out.read_text())
    assert res["tasks"] == {} and res["protocol"] == "off" and "transfer: false" in res["warning"] and "avg" not in res
