"""SentEval probing tasks: file format, label mapping, the evaluator on a toy encoder, data
preparation (local folder, download cache, offline) and the CLI on a tiny random model."""

from __future__ import annotations

import json
import random
import zlib

import pytest
import torch
import yaml

from csebench.core.errors import DataError
from csebench.evaluation import probing as P, transfer as T
from runhelpers import write

FILLER = [f"w{i}" for i in range(40)]
MARKERS = ["depth5", "depth6", "depth10", "orig", "inv"]
DEPTHS = ["5", "6", "10"]

pytestmark = pytest.mark.usefixtures("one_thread")


def make_probing(root, n=(200, 60, 60), seed=0):
    """SentLen (label = length bucket), TreeDepth (label = a marker word; labels 5/6/10 sort as
    strings) and CoordInv (O/I marker) files in SentEval's format, shuffled splits."""
    rng = random.Random(seed)
    lines = {t: [] for t in P.SSCL_TASKS}
    for code, size in zip(("tr", "va", "te"), n):
        for i in range(size):
            k = rng.randint(2, 9)
            words = rng.sample(FILLER, k)
            lines["SentLen"].append(f"{code}\t{(k - 2) // 2}\t{' '.join(words)}")
            d = DEPTHS[i % 3]
            lines["TreeDepth"].append(f"{code}\t{d}\t{' '.join(words[:-1] + [f'depth{d}'])}")
            ci = "OI"[i % 2]
            lines["CoordInv"].append(f"{code}\t{ci}\t{' '.join(words[:-1] + ['orig' if ci == 'O' else 'inv'])}")
    for t, ls in lines.items():
        rng.shuffle(ls)
        write(root / P.PROBING_FILES[t], "\n".join(ls) + "\n")
    return root


def toy_encode(sentences):
    """Deterministic features: one-hot token count, marker-word counts, hashed noise."""
    out = torch.zeros(len(sentences), 12 + len(MARKERS) + 4)
    for i, s in enumerate(sentences):
        tok = s.split()
        out[i, min(len(tok), 11)] = 10.0
        for j, m in enumerate(MARKERS):
            out[i, 12 + j] = 10.0 * tok.count(m)
        g = torch.Generator().manual_seed(zlib.crc32(s.encode()))
        out[i, -4:] = 0.1 * torch.randn(4, generator=g)
    return out


# ----------------------------------------------------------------------------- loading


def test_loader_splits_labels_and_senteval_order(tmp_path):
    path = write(tmp_path / "tree_depth.txt",
                 "tr\t5\ta b c\nva\t10\tx  y\nte\t6\tp q\ntr\t10\tone two\ntr\t6\tz\n"
                 "tr\t5\tm n\nte\t5\tk\t\nva\t6\tsome\textra\tlast col\n")
    task = P.load_probing_file(path, "TreeDepth")
    assert task.info["labels"] == ["10", "5", "6"]  # sorted as strings, like SentEval
    assert task.nclasses == 3
    tr = task.splits["train"]
    # sorted by (number of tokens, class id), stably
    assert tr.a == ["z", "one two", "m n", "a b c"] and tr.y.tolist() == [2, 0, 1, 1]
    assert task.splits["dev"].a == ["x y", "last col"]  # last column, whitespace re-joined; label 10 = id 0
    assert task.splits["test"].a == ["k", "p q"] and task.splits["test"].y.tolist() == [1, 2]


@pytest.mark.parametrize("text, match", [
    ("tr\t1\tok\nva\t1 no tabs here\n", r"tree_depth.txt:2: expected 'split<TAB>label<TAB>sentence'"),
    ("tr\t1\tok\nxx\t1\tbad split\n", r"tree_depth.txt:2: unknown split 'xx'"),
    ("tr\t1\tok\nva\t \tempty label\n", r"tree_depth.txt:2: empty label"),
    ("tr\t1\tok\nva\t1\tok\nte\t7\tunseen\n", r"tree_depth.txt:3: label '7' of the test split never occurs"),
    ("tr\t1\tok\nte\t1\tok\n", r"tree_depth.txt: no 'va' \(dev\) lines"),
    ("tr\t1\tok\n\nva\t1\tok\n", r"tree_depth.txt:2: expected"),
])
def test_malformed_files_name_file_and_line(tmp_path, text, match):
    write(tmp_path / "tree_depth.txt", text)
    with pytest.raises(DataError, match=match):
        P.load_probing_task(tmp_path, "TreeDepth")


def test_non_utf8_missing_file_and_unknown_task(tmp_path):
    (tmp_path / "tree_depth.txt").write_bytes(b"tr\t1\tok\nva\t1\tcaf\xe9\n")
    with pytest.raises(DataError, match=r"tree_depth.txt:2: not valid UTF-8"):
        P.load_probing_task(tmp_path, "Depth")  # SentEval's name is an alias
    with pytest.raises(DataError, match="missing probing-task file.*sentence_length.txt"):
        P.load_probing_task(tmp_path, "SentLen")
    with pytest.raises(DataError, match="unknown probing task 'Lenght'"):
        P.resolve_tasks(["Lenght"])
    assert P.resolve_tasks(["Length", "SentLen", "CoordinationInversion"]) == ["SentLen", "CoordInv"]


# ----------------------------------------------------------------------------- evaluator


def test_evaluate_probing_toy_encoder(tmp_path):
    root = make_probing(tmp_path / "probing")
    calls = []

    def enc(s):
        calls.append(list(s))
        return toy_encode(s)

    res = P.evaluate_probing(enc, root, cfg=T.ClassifierConfig(batch_size=16))
    assert len(calls) == 1 and len(calls[0]) == len(set(calls[0]))  # one call, distinct sentences
    assert list(res["tasks"]) == list(P.SSCL_TASKS)
    for t, acc in res["tasks"].items():
        assert acc >= 95.0, (t, acc)
        d = res["details"][t]
        assert d["ndev"] == 60 and d["ntest"] == 60 and d["classifiers_trained"] == 4
        assert d["l2"] in T.L2_GRID and res["devacc"][t] == d["devacc"]
    assert res["details"]["TreeDepth"]["labels"] == ["10", "5", "6"]
    assert res["details"]["CoordInv"]["labels"] == ["I", "O"]
    assert res["protocol"] == "senteval" and "warning" not in res
    json.dumps(res)


def test_random_features_and_cap(tmp_path):
    root = make_probing(tmp_path / "probing")
    rand = lambda s: torch.randn(len(s), 8, generator=torch.Generator().manual_seed(0))
    res = P.evaluate_probing(rand, root, tasks=["CoordInv"], max_train_sentences=50,
                             cfg=T.ClassifierConfig(max_epoch=8))
    assert 25.0 <= res["tasks"]["CoordInv"] <= 75.0  # binary task, no signal
    d = res["details"]["CoordInv"]
    assert res["protocol"] == "capped" and "NOT SentEval-protocol" in res["warning"]
    assert d["capped"] and d["n_train_used"] == 50 and d["n_train_full"] == 200 and d["ntest"] == 60


# ----------------------------------------------------------------------------- data preparation


def _params_with(tmp_path, project_root, probing: dict):
    over = write(tmp_path / "over.yaml", yaml.safe_dump({"data": {"ci": {"probing": probing}}}))
    return ["--params", str(project_root / "params.yaml"), "--config", str(over)]


def test_prepare_probing_local_folder(tmp_path, project_root):
    from csebench.cli import main
    from csebench.evaluation.locate import probing_root

    src = make_probing(tmp_path / "SentEval" / "data" / "probing")
    out = tmp_path / "prepared"
    assert main(["prepare-probing", *_params_with(tmp_path, project_root, {"path": str(tmp_path / "SentEval")}),
                 "--data", "ci", "--out", str(out)]) == 0
    assert probing_root(out) == src.resolve()


def test_prepare_probing_download_cache_and_offline(tmp_path, project_root, monkeypatch, capsys):
    from csebench.cli import main

    src = make_probing(tmp_path / "remote")
    monkeypatch.setenv("CSEBENCH_CACHE", str(tmp_path / "cache"))
    args = ["prepare-probing", *_params_with(tmp_path, project_root, {"url": src.as_uri()}), "--data", "ci"]
    # offline with an empty cache: a clear error, nothing written
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main([*args, "--out", str(tmp_path / "p0")]) == 2
    err = capsys.readouterr().err
    assert "not in the download cache" in err and "sentence_length.txt" in err and "probing" in err
    assert not (tmp_path / "p0" / "ROOT").exists()
    # online: downloads into the cache (a file:// URL stands in for GitHub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("CSEBENCH_OFFLINE", "0")
    assert main([*args, "--out", str(tmp_path / "p1")]) == 0
    root = (tmp_path / "p1" / "ROOT").read_text().strip()
    assert root.startswith(str(tmp_path / "cache"))
    # offline again: served from the cache
    monkeypatch.setenv("CSEBENCH_OFFLINE", "1")
    for f in src.iterdir():
        f.unlink()
    assert main([*args, "--out", str(tmp_path / "p2")]) == 0
    assert (tmp_path / "p2" / "ROOT").read_text().strip() == root
    # a data source without a probing entry
    assert main(["prepare-probing", "--params", str(project_root / "params.yaml"), "--data", "ci",
                 "--out", str(tmp_path / "p3")]) == 2
    assert "data.ci has no 'probing' source" in capsys.readouterr().err


def test_prepare_probing_rejects_malformed_download(tmp_path, project_root, monkeypatch, capsys):
    from csebench.cli import main

    src = make_probing(tmp_path / "remote")
    write(src / "tree_depth.txt", "<html>404: Not Found</html>\n")
    monkeypatch.setenv("CSEBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("CSEBENCH_OFFLINE", "0")
    assert main(["prepare-probing", *_params_with(tmp_path, project_root, {"url": src.as_uri()}), "--data", "ci",
                 "--out", str(tmp_path / "p")]) == 2
    assert "tree_depth.txt:1: expected 'split<TAB>label<TAB>sentence'" in capsys.readouterr().err


# ----------------------------------------------------------------------------- CLI


def test_cli_eval_probing_tiny_model(tmp_path, tiny_encoder):
    from csebench.cli import main

    root = make_probing(tmp_path / "probing", n=(120, 40, 40))
    tiny_encoder("avg").save(tmp_path / "model")
    out = tmp_path / "probing.json"
    rc = main(["eval-probing", "--model", str(tmp_path / "model"), "--probing", str(root), "--out", str(out),
               "--tasks", "Length", "CoordInv", "--precision", "fp32", "--no-progress"])
    assert rc == 0
    res = json.loads(out.read_text())
    assert list(res["tasks"]) == ["SentLen", "CoordInv"]
    assert all(0.0 <= v <= 100.0 for v in res["tasks"].values())
    assert res["protocol"] == "senteval" and res["classifier"]["batch_size"] == 64
    assert res["details"]["SentLen"]["ntest"] == 40 and res["run_info"]["name"] == "model"
    assert res["encoding"] == {"pooler": "avg", "embeddings": None, "precision": "fp32"}  # the pooler used
    assert sorted(res["provenance"]["data"]) == ["probing/coordination_inversion.txt", "probing/sentence_length.txt"]


def test_cli_bad_probing_file_exits_2(tmp_path, capsys):
    from csebench.cli import main

    root = make_probing(tmp_path / "probing")
    with open(root / "coordination_inversion.txt", "a", encoding="utf-8") as fh:
        fh.write("te\tO\n")
    out = tmp_path / "o.json"
    rc = main(["eval-probing", "--model", str(tmp_path / "no-model"), "--probing", str(root), "--out", str(out)])
    assert rc == 2 and not out.exists()
    assert "coordination_inversion.txt:321:" in capsys.readouterr().err
    rc = main(["eval-probing", "--model", str(tmp_path / "no-model"), "--probing", str(tmp_path / "nowhere"),
               "--out", str(out)])
    assert rc == 2 and "probing data folder not found" in capsys.readouterr().err
