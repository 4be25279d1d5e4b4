"""Your own STS data (`sts_pairs`) as the development set and as extra test sets."""

import json
import os
import re
import sys

import numpy as np
import pytest
import yaml
from scipy.stats import spearmanr

from csebench.cli import main
from csebench.study.params import load_params
from csebench.study.resolve import resolve_run
from csebench.core.errors import ConfigError, DataError
from csebench.evaluation.sts import load_sts_pairs, load_stsb
from runhelpers import PARAMS, ROOT, STS_FAST, assert_fails, needs_pipeline, run_cli, write_corpus, write_mini_senteval

HEADER = "sentence1\tsentence2\tscore\tsplit\n"


def write_pairs(path, rows, header=HEADER, encoding="utf-8"):
    path.write_bytes((header + "".join(rows)).encode(encoding))
    return path


def test_splits_columns_quoting_and_normalisation(tmp_path):
    tsv = write_pairs(tmp_path / "mine.tsv", ["A  man\tsings.\t4.5\tdev\n", "\n", 'He said "hi"\tquote\t1\tvalidation\n',
                                              "x\ty\t2\ttest\n", "x y\tz\t0.5\tTEST\n", "p\tq\t3\ttrain\n"])
    dev = load_sts_pairs(tsv, "dev", min_pairs=2)  # dev and validation rows; blank lines skipped; quotes are text in a .tsv
    assert dev.sent1 == ["A man", 'He said "hi"'] and list(dev.scores) == [4.5, 1.0]
    assert len(load_sts_pairs(tsv, "test", min_pairs=2).scores) == 2 and len(load_sts_pairs(tsv, min_pairs=2).scores) == 5
    csv = tmp_path / "mine.csv"
    csv.write_text('\ufeffid,score,sentence2,sentence1\n1,0.5,"b, c",a\n2,3,d,"e ""f"""\n', encoding="utf-8")
    both = load_sts_pairs(csv, "dev", min_pairs=2)  # no split column: every row, whatever the role; column order free
    assert both.sent1 == ["a", 'e "f"'] and both.sent2 == ["b, c", "d"] and list(both.scores) == [0.5, 3.0]


BAD = [  # (file name, content bytes, message)
    ("e.tsv", b"", "is empty: expected a header line (sentence1, sentence2, score[, split])"),
    ("h.tsv", HEADER.encode(), "has no sentence pairs (only a header)"),
    ("c.tsv", b"sentence1\tsentence2\tgold\nA\tB\t1\n", "h.tsv:1: the header lacks score (found: sentence1, sentence2, gold)"),
    ("f.tsv", HEADER.encode() + b"a\tb\t1\tdev\na\tb\t2\n", "f.tsv:3: expected 4 tab-separated fields (sentence1, sentence2, score, split), found 3"),
    ("n.tsv", HEADER.encode() + b"a\tb\tnan\tdev\n", "n.tsv:2: score 'nan' is not a finite number"),
    ("i.csv", b"sentence1,sentence2,score\na,b,inf\n", "i.csv:2: score 'inf' is not a finite number"),
    ("t.tsv", HEADER.encode() + b"a\tb\thigh\tdev\n", "t.tsv:2: score 'high' is not a number"),
    ("u.tsv", HEADER.encode() + b"a\tb\t1\tdev\nna\xefve\tb\t2\tdev\n", "u.tsv is not UTF-8: invalid byte at line 3"),
    ("s.tsv", HEADER.encode() + b"a\tb\t1\tdvd\n", "s.tsv:2: split 'dvd' is not one of train, dev, validation, test"),
    ("d.tsv", HEADER.encode() + b"a\tb\t1\tdev\nc\td\t2\ttrain\n", "d.tsv has no rows with split test (its splits: dev, train)"),
    ("k.tsv", HEADER.encode() + b"".join(b"a%d\tb\t1\ttest\n" % i for i in range(10)),
     "k.tsv: 10 test pairs, all scored 1: a Spearman correlation needs pairs with different scores"),
    ("m.tsv", HEADER.encode() + b" \tb\t1\tdev\n", "m.tsv:2: sentence1 is empty"),
    ("x.txt", HEADER.encode(), "x.txt: name an STS pairs file .tsv (tab-separated) or .csv (comma-separated)"),
]


@pytest.mark.parametrize("name, content, message", BAD, ids=[b[0] for b in BAD])
def test_bad_sts_pairs_file_is_one_line_and_exit_2(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    message = message.replace("h.tsv:1", f"{name}:1")
    with pytest.raises(DataError) as err:
        load_sts_pairs(path, "test")  # the rows eval-sts scores
    assert message in str(err.value)
    # the same line from the CLI, before any model is loaded or data folder read
    assert main(["eval-sts", "--model", str(tmp_path / "no-model"), "--senteval", str(tmp_path), "--out",
                 str(tmp_path / "sts.json"), "--sts-pairs", f"mine={path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("csebench eval-sts: error: ") and message in err and "\n" not in err
    assert not (tmp_path / "sts.json").exists()


def test_missing_sts_pairs_file(tmp_path):
    with pytest.raises(DataError, match="STS pairs file not found: .*nope.tsv"):
        load_sts_pairs(tmp_path / "nope.tsv")


def _override(tmp_path, data=None, training=None, evaluation=None):
    over = {"data": {"ci": {"sts_pairs": data}}} if data is not None else {}
    suite = {k: v for k, v in (("training", training), ("evaluation", evaluation)) if v is not None}
    if suite:
        over["suites"] = {"ci": suite}
    path = tmp_path / "over.yaml"
    path.write_text(yaml.safe_dump(over))
    return path


def test_settings_name_a_set_of_the_data_source(tmp_path):
    from csebench.study.jobs import suite_evaluation

    with pytest.raises(ConfigError, match=r"training \(suite ci, run simcse\).dev_set: data source 'ci' has no STS set "
                                          r"'mine' in data.ci.sts_pairs \(it has none: add data.ci.sts_pairs: \{mine: \{path: FILE\}\}\)"):
        resolve_run(load_params(PARAMS, [_override(tmp_path, training={"dev_set": "mine"})]), "ci", "simcse", 1)
    params = load_params(PARAMS, [_override(tmp_path, data={"mine": {"path": "m.tsv"}}, evaluation={"sts_pairs": ["mien"]})])
    with pytest.raises(ConfigError, match=r"suites.ci.evaluation.sts_pairs: .*no STS set 'mien'.*\(did you mean 'mine'\?\)"):
        suite_evaluation(params, "ci")
    with pytest.raises(ConfigError, match=r"over.yaml: data.ci.sts_pairs.mine: unknown key 'file' \(valid: path\)"):
        load_params(PARAMS, [_override(tmp_path, data={"mine": {"file": "m.tsv"}})])
    with pytest.raises(ConfigError, match=r"over.yaml: suites.ci.evaluation.sts_pairs: expected a list, got 'mine'"):
        load_params(PARAMS, [_override(tmp_path, data={"mine": {"path": "m.tsv"}}, evaluation={"sts_pairs": "mine"})])


def test_fingerprints_are_unchanged_while_the_feature_is_unused(tmp_path, monkeypatch):
    """The run fingerprints and keys, and the evaluation folder names, of main before sts_pairs existed
    (Snakemake's run folders, checkpoints and evaluation folders are named by them)."""
    from csebench.study.jobs import eval_name, suite_evaluation

    monkeypatch.delenv("CSEBENCH_SHARED", raising=False)
    # the keys since checkpoint_steps and num_workers were left out of every key and an evaluation-only run
    # (demo/minilm) was given a key of what it reads: every key moved once then, on purpose; the demo's moved
    # again when its STS-B dev and transfer caps shrank to fit its 12-minute budget (its settings changed), and
    # again when the packaged MiniLM took its own mean pooling (backbones.minilm.pooler: avg, not cls), and again
    # when the demo was cut to fit 15 minutes on an AVX2-only CPU (21 steps of batch 16, its caps shrank); the ci
    # suite's evaluation folder moved when it took the demo's evaluation caps (its runs' keys did not)
    before = {("ci", "simcse", 1): ("3c6acf85c51a0403", "0de7b91bca553ce5"),
              ("demo", "simcse", 42): ("b6b1a54ae926d623", "d2500a78792de33a"),
              ("demo", "distillcse", 42): ("b91e9cd76079a389", "0d97eaa022e2350d"),
              ("demo", "minilm", 42): ("d8bf6f8fcf2bb117", "ee1e972d8828fbc4"),
              ("paper", "bert-base-simcse", 42): ("ddb51c02270e19f0", "e2b958b95e81630f")}
    folders = {"ci": "eval-fp32-capped-2e662556", "demo": "eval-fast-capped-2e662556", "paper": "eval-fp32"}
    params = load_params(PARAMS)
    for (suite, run, seed), (fp, key) in before.items():
        cfg = resolve_run(params, suite, run, seed)
        assert (cfg.fingerprint(), cfg.key()) == (fp, key)
    assert {s: eval_name(suite_evaluation(params, s)) for s in folders} == folders
    # a set declared but selected on by no run and scored by no suite: nothing changes
    declared = load_params(PARAMS, [_override(tmp_path, data={"mine": {"path": "m.tsv"}})])
    assert resolve_run(declared, "ci", "simcse", 1).key() == before[("ci", "simcse", 1)][1]
    assert eval_name(suite_evaluation(declared, "ci")) == folders["ci"]
    # scored at evaluation: the training is the same run, evaluated in a folder of its own
    scored = load_params(PARAMS, [_override(tmp_path, data={"mine": {"path": "m.tsv"}}, evaluation={"sts_pairs": ["mine"]})])
    assert resolve_run(scored, "ci", "simcse", 1).key() == before[("ci", "simcse", 1)][1]
    assert eval_name(suite_evaluation(scored, "ci")).startswith(folders["ci"] + "-sts-")
    selected = load_params(PARAMS, [_override(tmp_path, data={"mine": {"path": "m.tsv"}}, training={"dev_set": "mine"})])
    assert resolve_run(selected, "ci", "simcse", 1).key() != before[("ci", "simcse", 1)][1]


def test_a_dev_set_is_its_file_not_its_name(tmp_path, monkeypatch):
    """A run is its configuration, not its names: the dev set enters the key as the file's path as
    params.yaml writes it ({shared} unexpanded), whatever the data source calls the set."""
    def key(sets, dev_set, shared="/somewhere"):
        monkeypatch.setenv("CSEBENCH_SHARED", shared)
        return resolve_run(load_params(PARAMS, [_override(tmp_path, data=sets, training={"dev_set": dev_set})]), "ci",
                           "simcse", 1).key()

    mine = key({"mine": {"path": "{shared}/sts/de.tsv"}}, "mine")
    assert key({"german": {"path": "{shared}/sts/de.tsv"}}, "german") == mine  # renamed: the same run
    assert key({"mine": {"path": "{shared}/sts/de.tsv"}}, "mine", shared="/elsewhere") == mine  # shared folder moved
    assert key({"mine": {"path": "{shared}/sts/fr.tsv"}}, "mine") != mine  # another file: another run
    assert key({"mine": {"path": "{shared}/sts/de.tsv"}, "other": {"path": "o.tsv"}}, "mine") == mine  # an unused set


def test_own_test_sets_name_their_evaluation_folder(tmp_path):
    """`evaluation.sts_pairs` is an evaluation setting: its names and files name the folder, whose
    settings give the rules the files back (Runs.eval_settings, sts_sets)."""
    from csebench.study.params import shared_dir
    from csebench.study.jobs import Runs, eval_name, sts_sets, suite_evaluation

    def settings(sets, names):
        return suite_evaluation(load_params(PARAMS, [_override(tmp_path, data=sets, evaluation={"sts_pairs": names})]), "ci")

    one = settings({"a": {"path": "{shared}/a.tsv"}, "b": {"path": "b.tsv"}}, ["a"])
    assert one["sts_pairs"] == {"a": "{shared}/a.tsv"}
    assert eval_name(settings({"a": {"path": "{shared}/a.tsv"}}, ["a"])) == eval_name(one)  # an unused set: the same
    assert eval_name(settings({"a": {"path": "{shared}/b.tsv"}}, ["a"])) != eval_name(one)  # another file
    assert eval_name(settings({"c": {"path": "{shared}/a.tsv"}}, ["c"])) != eval_name(one)  # another name in sts.json
    params = load_params(PARAMS, [_override(tmp_path, data={"a": {"path": "{shared}/a.tsv"}}, evaluation={"sts_pairs": ["a"]})])
    back = Runs(params).eval_settings(eval_name(one))
    assert sts_sets(params, back) == {"a": f"{shared_dir(params)}/a.tsv"}


# ----------------------------------------------------------------------------- selection and evaluation

def _train(tmp_path, name, config, se):
    out = tmp_path / name
    argv = ["train", "--params", str(PARAMS), "--suite", "ci", "--run", "simcse", "--seed", "1", "--corpus",
            str(tmp_path / "corpus.txt"), "--senteval", str(se), "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
            "--no-progress"] + (["--config", str(config)] if config else [])
    assert main(argv) == 0
    curve = np.genfromtxt(out / "dev_curve.csv", delimiter=",", names=True)
    return out, json.loads((out / "train.json").read_text()), curve


def test_own_dev_set_selects_the_checkpoint(tmp_path, shared_dir):
    """STS-B dev's own pairs with negated scores as `training.dev_set`: every dev score is the negative of
    STS-B dev's at that step, and the checkpoint kept is the one STS-B dev would rank worst."""
    write_corpus(tmp_path / "corpus.txt", 160)
    se = write_mini_senteval(tmp_path / "se", pairs=60)
    stsb = load_stsb(se, "dev")
    rows = [f"{a}\t{b}\t{-g}\tdev\n" for a, b, g in zip(stsb.sent1, stsb.sent2, stsb.scores)]
    mine = write_pairs(tmp_path / "negated.tsv", rows + ["held\tout\t1\ttest\n"])
    training = {"max_steps": 10, "eval_steps": 2, "checkpoint_steps": 100}
    _, ref, ref_curve = _train(tmp_path, "stsb", _override(tmp_path, training=training), se)
    config = _override(tmp_path, data={"negated": {"path": str(mine)}}, training={**training, "dev_set": "negated"})
    out, summary, curve = _train(tmp_path, "own", config, se)
    assert curve.dtype.names == ("step", "dev_spearman") and ref_curve.dtype.names == ("step", "stsb_dev")
    assert np.allclose(curve["dev_spearman"], -ref_curve["stsb_dev"], atol=2e-4)  # same run, same steps
    assert len(set(np.round(ref_curve["stsb_dev"], 2))) > 1  # the choice means something
    assert summary["best_step"] == int(curve["step"][np.argmax(curve["dev_spearman"])])
    assert summary["best_step"] == int(ref_curve["step"][np.argmin(ref_curve["stsb_dev"])]) != ref["best_step"]
    assert summary["dev_set"] == "negated" and summary["dev_pairs"] == len(rows) and "stsb_dev_best" not in summary
    assert summary["dev_best"] == pytest.approx(curve["dev_spearman"].max(), abs=1e-4)
    assert json.loads((out / "model" / "training_config.json").read_text())["training"]["dev_set"] == "negated"
    assert any(k.endswith("negated.tsv") for k in summary["provenance"]["data"])  # its sha256 recorded
    assert main(["model-card", "--run", str(out)]) == 0
    assert "the best Spearman on the development set `negated`" in (out / "model_card.md").read_text()


def test_own_sets_are_scored_beside_the_seven_tasks(tmp_path, tiny_encoder, shared_dir, capsys):
    from runhelpers import write_small_shared

    se = write_small_shared(tmp_path / "shared") / "senteval"
    enc = tiny_encoder("avg")
    enc.save(tmp_path / "model")
    rows = [f"sentence {i} about cats\tanother {i % 5} on dogs\t{i % 7}\t{'test' if i % 3 else 'dev'}\n" for i in range(30)]
    mine = write_pairs(tmp_path / "mine.tsv", rows)
    common = ["--model", str(tmp_path / "model"), "--senteval", str(se), "--no-progress"]
    assert main(["embed", *common, "--no-transfer", "--out", str(tmp_path / "emb.npz"), "--sts-pairs", f"cats={mine}"]) == 0
    assert main(["eval-sts", *common, "--embeddings", str(tmp_path / "emb.npz"), "--out", str(tmp_path / "sts.json"),
                 "--pairs-out", str(tmp_path / "pairs.npz"), "--sts-pairs", f"cats={mine}"]) == 0
    res = json.loads((tmp_path / "sts.json").read_text())
    assert res["encoding"]["missing_from_table"] == 0  # embed encoded the set's sentences too
    assert len(res["tasks"]) == 7 and res["avg"] == pytest.approx(np.mean(list(res["tasks"].values())))
    test = load_sts_pairs(mine, "test")
    e1, e2 = enc.encode(test.sent1).double(), enc.encode(test.sent2).double()
    cos = ((e1 * e2).sum(1) / (e1.norm(dim=1) * e2.norm(dim=1))).numpy()
    assert res["extra_sets"] == {"cats": {"spearman": pytest.approx(100 * spearmanr(cos, test.scores)[0], abs=1e-6),
                                          "n_pairs": 20, "split": "test", "duplicates_dropped": 0}}
    assert sorted(np.load(tmp_path / "pairs.npz").files) == sorted(f"{t}.{k}" for t in res["tasks"] for k in ("sim", "gold"))
    # printed (no --out): the JSON holds the set's score too, not only the log line
    capsys.readouterr()
    assert main(["eval-sts", *common, "--embeddings", str(tmp_path / "emb.npz"), "--sts-pairs", f"cats={mine}"]) == 0
    assert json.loads(capsys.readouterr().out)["extra_sets"] == res["extra_sets"]


@needs_pipeline
def test_snakemake_passes_the_sets_to_train_embed_and_eval_sts(tmp_path):
    mine = write_pairs(tmp_path / "mine.tsv", ["a\tb\t1\tdev\n", "c\td\t2\ttest\n"])
    over = _override(tmp_path, data={"mine": {"path": str(mine)}}, training={"dev_set": "mine"}, evaluation={"sts_pairs": ["mine"]})
    target = "results/ci/runs/simcse/seed1/sts.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    from runhelpers import run_snakemake

    proc = run_snakemake(["-n", "--forceall", "-p", "--configfile", "config/ci.yaml", "--config", "plan=false",
                          f"params_overrides=[{over}]", "--", target], cwd=ROOT, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    train = out[out.index("rule train:"):out.index("rule train:") + 600]
    assert str(mine) in train.split("output:")[0]  # an input of the train job: reruns when the file changes
    assert out.count(f"--sts-pairs mine={mine}") == 2  # embed and eval_sts
    # of the run's evaluation folder that the sets name: the other suites' evaluations are not it
    assert re.search(r"output: results/runs/[0-9a-f]{16}/seed1/eval-fp32-capped-[0-9a-f]{8}-sts-[0-9a-f]{8}/sts.json", out)


# ---------------------------------------------------------------------------------- too small, contradicting, repeating


def _rows(n: int, split: str = "test", start: int = 0) -> list[str]:
    return [f"sentence {i} about cats\tanother {i} on dogs\t{i % 6}\t{split}\n" for i in range(start, start + n)]


def test_own_sts_set_too_small_or_contradicting_itself_is_refused(tmp_path, capsys):
    """A 2-pair file scored Spearman 100.0 and a pair given twice with two scores was counted twice, exit 0."""
    argv = ["eval-sts", "--model", str(tmp_path / "no-model"), "--senteval", str(tmp_path), "--out", str(tmp_path / "sts.json")]
    two = write_pairs(tmp_path / "two.tsv", ["a b\tc d\t1\ttest\n", "e f\tg h\t4\ttest\n"])
    assert_fails(capsys, [*argv, "--sts-pairs", f"mine={two}"],
                 f"{two}: 2 test pairs, fewer than the 10 a Spearman correlation is scored on (with 2 pairs it is always "
                 "100 or -100): add pairs", outputs=[tmp_path / "sts.json"])
    clash = write_pairs(tmp_path / "clash.tsv", _rows(12) + ["another 3 on dogs\tsentence 3 about cats\t5\ttest\n"])  # line 14
    assert_fails(capsys, [*argv, "--sts-pairs", f"mine={clash}"],
                 f"{clash}:14: the pair of line 5 again, with score 5 (line 5: 3): one pair has one gold score; keep the "
                 "right row", outputs=[tmp_path / "sts.json"])
    # training.dev_set reads the same way (its dev rows)
    from csebench.core.errors import DataError
    from csebench.evaluation.sts import load_sts_pairs

    with pytest.raises(DataError, match=r"dev.tsv: 9 dev pairs, fewer than the 10"):
        load_sts_pairs(write_pairs(tmp_path / "dev.tsv", _rows(9, "dev") + _rows(20, "test", 9)), "dev")


def test_own_sts_set_duplicates_dropped_and_far_scores_named(tmp_path, capsys, caplog, tiny_encoder, small):
    """Exact duplicates were counted (12 pairs reported), scores of -50 and 1e6 accepted, without a word."""
    import logging

    rows = _rows(10)
    rows[4] = rows[4].replace("\t4\t", "\t-50\t")  # line 6
    rows[7] = rows[7].replace("\t1\t", "\t1e6\t")  # line 9
    mine = write_pairs(tmp_path / "mine.tsv", rows + [rows[2], rows[3].replace("sentence 3 about cats\tanother 3 on dogs",
                                                                             "another 3 on dogs\tsentence 3 about cats")])
    tiny_encoder("avg").save(tmp_path / "model")
    out = tmp_path / "sts.json"
    with caplog.at_level(logging.WARNING, logger="csebench"):
        rc, err = run_cli(capsys, ["eval-sts", "--model", str(tmp_path / "model"), "--senteval", str(small), *STS_FAST,
                                   "--sts-pairs", f"cats={mine}", "--out", str(out)])
    assert rc == 0, err
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and str(mine) in r.getMessage()]
    assert warnings == [f"{mine}: lines 12, 13 repeat the pair and score of lines 4, 5: dropped, each pair is scored once",
                        f"{mine}: the scores of lines 6, 9 (-50, 1e+06) lie far outside the range of the file's other rows "
                        "(0 to 5): a typo, or another scale?"]
    assert json.loads(out.read_text())["extra_sets"]["cats"] | {"spearman": 0} == {
        "spearman": 0, "n_pairs": 10, "split": "test", "duplicates_dropped": 2}


def test_far_out_scores():
    from csebench.evaluation.sts import far_out_scores

    assert far_out_scores(np.array([0, 1, 2, 3, 4, 5.0])) == []
    assert far_out_scores(np.array([1e6, 0, 1, 2, 3, 4, 5, -50.0])) == [0, 7]  # neither hides the other
    assert far_out_scores(np.array([0, 0, 0, 5.0])) == []  # too few others to tell
    assert far_out_scores(np.array([-5, -4.2, -1, 0, 0.0])) == []  # STS-B negated: its own scale
