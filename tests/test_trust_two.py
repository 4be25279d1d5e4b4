"""Issue 31, "Trust, round two": no option silently ignored, your own data checked, weights verified,
nothing outside a run folder touched or uploaded, one line where a traceback was. Each test failed
before the fix it names (docs/reliability.md lists every case with its message)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from runhelpers import write_small_shared
from runhelpers import assert_fails, run_cli
from test_probing import make_probing

STS_FAST = ["--max-sts-pairs", "20", "--no-progress"]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """The first 40 lines of every STS file, a synthetic transfer set: seconds per evaluation."""
    return write_small_shared(tmp_path_factory.mktemp("small"), lines=40) / "senteval"


# ----------------------------------------------------------------------------- 1. --pooler and the embeddings table


def _embed(capsys, model: Path, out: Path, se: Path, *extra: str) -> dict:
    from csebench.embeddings import EmbeddingTable

    rc, err = run_cli(capsys, ["embed", "--model", str(model), "--senteval", str(se), "--no-transfer", *STS_FAST,
                               "--out", str(out), *extra])
    assert rc == 0, err
    return EmbeddingTable(out).meta


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
    from csebench.embeddings import EmbeddingTable, write_embeddings

    old = EmbeddingTable(tmp_path / "cls.npz")
    write_embeddings(tmp_path / "old.npz", [""] * 0, np.zeros((0, 32), np.float32), {**old.meta, "pooler": None})
    assert_fails(capsys, sts("old.npz", "--pooler", "avg"), "old.npz holds vectors pooled with cls_before_pooler")
    # the result names the pooler, with a table and without
    for tag, argv in (("table", sts("avg.npz", "--pooler", "avg")),
                      ("direct", ["eval-sts", "--model", str(model), "--senteval", str(small), *STS_FAST, "--out", str(out)])):
        rc, err = run_cli(capsys, argv)
        assert rc == 0, err
        assert json.loads(out.read_text())["encoding"]["pooler"] == ("avg" if tag == "table" else "cls_before_pooler")


# ----------------------------------------------------------------------------- 1. your own STS data (sts_pairs)


def _pairs(path: Path, rows: list[str]) -> Path:
    path.write_text("sentence1\tsentence2\tscore\tsplit\n" + "".join(rows), encoding="utf-8")
    return path


def _rows(n: int, split: str = "test", start: int = 0) -> list[str]:
    return [f"sentence {i} about cats\tanother {i} on dogs\t{i % 6}\t{split}\n" for i in range(start, start + n)]


def test_own_sts_set_too_small_or_contradicting_itself_is_refused(tmp_path, capsys):
    """A 2-pair file scored Spearman 100.0 and a pair given twice with two scores was counted twice, exit 0."""
    argv = ["eval-sts", "--model", str(tmp_path / "no-model"), "--senteval", str(tmp_path), "--out", str(tmp_path / "sts.json")]
    two = _pairs(tmp_path / "two.tsv", ["a b\tc d\t1\ttest\n", "e f\tg h\t4\ttest\n"])
    assert_fails(capsys, [*argv, "--sts-pairs", f"mine={two}"],
                 f"{two}: 2 test pairs, fewer than the 10 a Spearman correlation is scored on (with 2 pairs it is always "
                 "100 or -100): add pairs", outputs=[tmp_path / "sts.json"])
    clash = _pairs(tmp_path / "clash.tsv", _rows(12) + ["another 3 on dogs\tsentence 3 about cats\t5\ttest\n"])  # line 14
    assert_fails(capsys, [*argv, "--sts-pairs", f"mine={clash}"],
                 f"{clash}:14: the pair of line 5 again, with score 5 (line 5: 3): one pair has one gold score; keep the "
                 "right row", outputs=[tmp_path / "sts.json"])
    # training.dev_set reads the same way (its dev rows)
    from csebench.errors import DataError
    from csebench.evaluation.sts import load_sts_pairs

    with pytest.raises(DataError, match=r"dev.tsv: 9 dev pairs, fewer than the 10"):
        load_sts_pairs(_pairs(tmp_path / "dev.tsv", _rows(9, "dev") + _rows(20, "test", 9)), "dev")


def test_own_sts_set_duplicates_dropped_and_far_scores_named(tmp_path, capsys, caplog, tiny_encoder, small):
    """Exact duplicates were counted (12 pairs reported), scores of -50 and 1e6 accepted, without a word."""
    import logging

    rows = _rows(10)
    rows[4] = rows[4].replace("\t4\t", "\t-50\t")  # line 6
    rows[7] = rows[7].replace("\t1\t", "\t1e6\t")  # line 9
    mine = _pairs(tmp_path / "mine.tsv", rows + [rows[2], rows[3].replace("sentence 3 about cats\tanother 3 on dogs",
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


# ----------------------------------------------------------------------------- 1. damaged weights


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished ci run (1 step on 5 sentences), trained once for the module: copy it before damaging it."""
    from csebench.cli import main
    from runhelpers import train_argv, write_corpus, write_mini_senteval

    tmp = tmp_path_factory.mktemp("trained")
    write_corpus(tmp / "corpus.txt", n=5)
    write_mini_senteval(tmp / "se", pairs=24)
    assert main(train_argv(tmp, tmp / "run", None)) == 0
    return tmp / "run"


def _copy_run(run: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(run, dst, ignore=shutil.ignore_patterns(".lock"))
    return dst


def test_damaged_weights_are_refused_naming_the_file(trained, tmp_path, capsys, small):
    """Bits flipped in model.safetensors moved STS13 from 43.40 to 43.42 with exit 0; NaN weights gave an
    all-null sts.json and `STS avg nan`, exit 0."""
    from csebench.encoder import model_files

    recorded = json.loads((trained / "train.json").read_text())["model_files"]
    assert recorded == model_files(trained / "model") and {"model.safetensors", "mlp_head.safetensors", "config.json",
                                                           "training_config.json"} <= set(recorded)
    run = _copy_run(trained, tmp_path / "run")
    weights = run / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x10  # one bit of the last tensor
    weights.write_bytes(bytes(data))
    out = tmp_path / "out" / "sts.json"
    sts = ["eval-sts", "--senteval", str(small), *STS_FAST, "--out", str(out)]
    view = tmp_path / "suite" / "runs" / "simcse" / "seed1"
    view.mkdir(parents=True)
    (view / "model").symlink_to(run / "model")  # a suite's view of the run: its link is followed to train.json
    for model in (run / "model", view / "model"):
        assert_fails(capsys, [*sts, "--model", str(model)],
                     f"{model / 'model.safetensors'} has sha256 {model_files(run / 'model')['model.safetensors'][:12]}…, "
                     f"not the {recorded['model.safetensors'][:12]}… that {run / 'train.json'} recorded when the run was "
                     "trained: the model is damaged or was changed since; restore it or train the run again, or pass "
                     "--no-verify to use it anyway", outputs=[out.parent])
    for argv in (["embed", "--senteval", str(small), "--no-transfer", *STS_FAST, "--out", str(out)],
                 ["analyze", "align_uniform", "--senteval", str(small), "--out", str(out)]):
        assert_fails(capsys, [*argv, "--model", str(run / "model")], "model.safetensors has sha256", outputs=[out.parent])
    rc, err = run_cli(capsys, [*sts, "--model", str(run / "model"), "--no-verify"])
    assert rc == 0, err  # the user's call
    out.unlink()
    # heavier damage: NaN weights (0xff bytes) score nothing; that is an error, not an all-null result
    data[len(data) // 2:] = b"\xff" * (len(data) - len(data) // 2)
    weights.write_bytes(bytes(data))
    assert_fails(capsys, [*sts, "--model", str(run / "model"), "--no-verify"],
                 f"the STS average of {run / 'model'} is undefined (STS12, STS13, STS14, STS15, STS16, STSBenchmark, "
                 f"SICKRelatedness: not a finite number): its embeddings are constant or not finite; {out} not written. "
                 "Check the model's weights", outputs=[out.parent])
    (run / "model" / "mlp_head.safetensors").unlink()
    assert_fails(capsys, [*sts, "--model", str(run / "model")],
                 f"{run / 'model' / 'mlp_head.safetensors'} is missing: the model is damaged")


# ----------------------------------------------------------------------------- 2. nothing outside a run folder


def test_push_never_follows_a_link_nor_sends_a_stranger(trained, tmp_path, capsys, monkeypatch):
    """`ln -s ~/secret.txt RUN/model/notes.txt; csebench push --dry-run` listed notes.txt for upload."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = _copy_run(trained, tmp_path / "run")
    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("token=hf_abc\n")
    argv = ["push", "--run", str(run), "--repo-id", "org/name", "--dry-run"]
    (run / "model" / "notes.txt").symlink_to(secret)
    assert_fails(capsys, argv, f"{run / 'model' / 'notes.txt'} is a symbolic link (to {secret}): push uploads only the "
                               "files csebench wrote in the run's model/, never what a link points to; remove the link")
    (run / "model" / "notes.txt").unlink()
    (run / "model" / "1_Pooling" / "extra.bin").write_bytes(b"not csebench's")
    assert_fails(capsys, argv, f"{run / 'model' / '1_Pooling' / 'extra.bin'} was not written by csebench "
                               f"({run / 'train.json'} lists the files of model/ under model_files): push uploads only "
                               "the run's own files; move it out of model/")
    (run / "model" / "1_Pooling" / "extra.bin").unlink()
    # model/ itself a link out of the run: refused before the card is written through it
    outside = tmp_path / "elsewhere"
    (run / "model").rename(outside)
    (run / "model").symlink_to(outside)
    assert_fails(capsys, argv, f"{run / 'model'} is a symbolic link to {outside}, which is no csebench run's model folder")
    assert not (outside / "README.md").exists()
    # a suite's view: its model/ link into the run's folder is the run's own
    (run / "model").unlink()
    outside.rename(run / "model")
    view = tmp_path / "suite" / "runs" / "simcse" / "seed1"
    view.mkdir(parents=True)
    (view / "model").symlink_to(run / "model")
    (view / "train.json").write_text((run / "train.json").read_text())
    from csebench.cli import main

    capsys.readouterr()
    assert main(argv[:2] + [str(view)] + argv[3:]) == 0
    listed = [line.strip() for line in capsys.readouterr().out.splitlines()[1:]]
    assert "README.md" in listed and "model.safetensors" in listed and "notes.txt" not in listed


def test_a_run_output_linked_out_of_the_run_is_refused_and_never_deleted_through(trained, tmp_path, capsys):
    """model/ a link to a folder elsewhere: `train --force` died with `OSError: Cannot call rmtree on a symbolic
    link`, and the .model.old link it left blocked every later train."""
    from runhelpers import train_argv

    inputs = trained.parent
    run = _copy_run(trained, tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    (run / "model").rename(elsewhere)
    (run / "model").symlink_to(elsewhere)
    kept = sorted(p.name for p in elsewhere.iterdir())
    argv = train_argv(inputs, run, None) + ["--force"]
    assert_fails(capsys, argv, f"{run / 'model'} is a symbolic link to {elsewhere}, outside the run folder {run}: csebench "
                               "writes a run's outputs inside its folder and never deletes through a link; remove the link "
                               "(what it points to stays) or choose another --out")
    assert sorted(p.name for p in elsewhere.iterdir()) == kept and (run / "train.json").is_file()
    # an older csebench's leftover: .model.old, a link out of the run, is unlinked; what it points to stays
    (run / "model").unlink()
    shutil_copy = __import__("shutil").copytree
    shutil_copy(elsewhere, run / "model")
    (run / ".model.old").symlink_to(elsewhere)
    rc, err = run_cli(capsys, argv)
    assert rc == 0, err
    assert not (run / ".model.old").is_symlink() and sorted(p.name for p in elsewhere.iterdir()) == kept
    assert (run / "model").is_dir() and not (run / "model").is_symlink()


# ----------------------------------------------------------------------------- 3. one line where a traceback was


def test_snakemake_settings_mistake_is_one_line(tmp_path):
    """`snakemake -n` with a malformed section printed the right line under Snakemake's header, then 4 stack lines;
    an unknown suite in --config gave a KeyError with its stack."""
    import subprocess

    from runhelpers import BIN, tool_env
    from runhelpers import ROOT

    over = tmp_path / "over.yaml"
    over.write_text("suites:\n  ci:\n    training: [1, 2]\n")
    for config, message in ((f"params_overrides=[{over}]", f"{over}: suites.ci.training: expected a mapping, got [1, 2]"),
                            ("suites=[cii]", "suites: unknown suite 'cii' (did you mean 'ci'?)")):
        proc = subprocess.run([str(BIN / "snakemake"), "-n", "--configfile", "config/ci.yaml", "--config", config, "plan=false"],
                              cwd=ROOT, env=tool_env(), capture_output=True, text=True, timeout=120)
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if not l.startswith("Config file config/paper.yaml")]
        assert proc.returncode == 1 and lines == [f"csebench: error: {lines[0].partition('error: ')[2]}"], lines
        assert message in lines[0]


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_damaged_safetensors_is_one_line(tmp_path, capsys, tiny_encoder, small, damage):
    """A truncated, empty or garbage model.safetensors ended in `SafetensorError: Error while deserializing header`."""
    from runhelpers import train_argv, write_config, write_corpus, write_mini_senteval

    model = tmp_path / "model"
    tiny_encoder("avg").save(model)  # a model folder of no run (nothing recorded to verify against)
    weights = model / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes({"truncated": data[: len(data) // 2], "empty": b"", "garbage": b"not weights at all " * 20}[damage])
    out = tmp_path / "out" / "r.json"
    message = f"{weights} is damaged or not a safetensors file (Error while deserializing header: "
    for argv in (["eval-sts", "--senteval", str(small), *STS_FAST, "--out", str(out)],
                 ["embed", "--senteval", str(small), "--no-transfer", *STS_FAST, "--out", str(out)]):
        line = assert_fails(capsys, [*argv, "--model", str(model)], message, "restore it from where the model came from",
                            outputs=[out.parent])
        assert "Traceback" not in line
    write_corpus(tmp_path / "corpus.txt", n=16)
    write_mini_senteval(tmp_path / "se", pairs=12)
    cfg = write_config(tmp_path / "over.yaml", {"backbones": {"mine": {"model": str(model), "pooler": "avg"}},
                                                "suites": {"ci": {"runs": [{"name": "simcse", "backbone": "mine", "method": "simcse"}]}}})
    assert_fails(capsys, train_argv(tmp_path, tmp_path / "run", cfg), message)


def test_a_pickled_pytorch_model_bin_is_refused_in_one_line(tmp_path, capsys, tiny_encoder, small):
    """A pickle saved as pytorch_model.bin ended in an UnpicklingError whose text advised weights_only=False."""
    import pickle

    model = tmp_path / "model"
    tiny_encoder("avg").save(model)
    (model / "model.safetensors").unlink()
    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (model / "pytorch_model.bin").write_bytes(pickle.dumps({"embeddings.word_embeddings.weight": Planted()}))
    out = tmp_path / "out" / "sts.json"
    line = assert_fails(capsys, ["eval-sts", "--model", str(model), "--senteval", str(small), *STS_FAST, "--out", str(out)],
                        f"{model / 'pytorch_model.bin'} is a pickle holding more than tensors, which could run code when "
                        "loaded: csebench refuses it (torch's safe loader, weights_only=True, stopped at it)",
                        outputs=[out.parent])
    assert "weights_only=False" not in line and not marker.exists()


# ----------------------------------------------------------------------------- 4. unclear but harmless


def test_an_empty_compose_is_refused(tmp_path, capsys):
    """`compose: []` trained plain SimCSE under the composed method's name."""
    from runhelpers import PARAMS, write_config

    cfg = write_config(tmp_path / "over.yaml", {"methods": {"m": {"compose": []}},
                                                "suites": {"ci": {"runs": [{"name": "x", "backbone": "tiny", "method": "m"}]}}})
    assert_fails(capsys, ["show-config", "--params", str(PARAMS), "--config", str(cfg), "--suite", "ci", "--run", "x",
                          "--seed", "1"],
                 "methods.m.compose: the list is empty; name the methods it combines, or drop compose: and give the "
                 "method its own objectives")


@pytest.mark.parametrize("line,chars", [("\u200b\u200b", "U+200B"), ("\u202e \u200b", "U+200B, U+202E"),
                                        ("\ufeff\u2060", "U+2060, U+FEFF")])
def test_a_line_of_invisible_characters_is_refused(tmp_path, capsys, line, chars):
    """Lines of U+200B or U+202E only trained as sentences."""
    from csebench.data import read_corpus
    from csebench.errors import DataError

    corpus = tmp_path / "c.txt"
    corpus.write_text(f"a sentence .\n{line}\nanother one .\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_corpus(corpus)
    assert f"corpus {corpus} line 2 holds only invisible characters ({chars}): not text; remove the line" in str(err.value)
    corpus.write_text("a zero\u200bwidth join is text .\n\u200bleading one too\n", encoding="utf-8")
    assert len(read_corpus(corpus)) == 2


def test_an_interrupt_names_the_subcommand_even_before_argparse(capsys, monkeypatch):
    """A Ctrl-C at 0.2 s printed `csebench: interrupted`."""
    from csebench import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    rc, err = run_cli(capsys, ["-v", "--threads", "1", "train", "--suite", "ci"])
    assert rc == 130 and err == "csebench train: interrupted\n"


def test_an_interrupt_during_an_import_is_one_line_and_never_raised_inside_it(tmp_path):
    """Ctrl-C during torch's import raised KeyboardInterrupt inside it, where pybind11 code cannot pass it on:
    `terminate called after throwing an instance of 'pybind11::error_already_set'`, exit 134, an 85-line dump.
    The stand-in module records a KeyboardInterrupt raised inside its import (the C++ code would abort there)."""
    import subprocess
    import sys

    from runhelpers import ROOT, env

    marker = tmp_path / "raised-inside-the-import"
    (tmp_path / "slow_import.py").write_text(
        "import os, signal, time\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(5)\n"
        "except KeyboardInterrupt:\n"
        f"    open({str(marker)!r}, 'w').close()\n"
        "    raise\n")
    script = (f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
              "from csebench import cli, io\n"
              "def cmd(args):\n"
              f"    with io.atomic_path({str(tmp_path / 'out.txt')!r}) as tmp:\n"
              "        tmp.write_text('half')\n"
              "        import slow_import\n"
              "cli.cmd_runs = cmd\n"
              "sys.exit(cli.main(['runs']))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (130, "csebench runs: interrupted\n")
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slow_import.py"]  # the unfinished output's temporary removed


@pytest.fixture()
def read_only(monkeypatch):
    """A folder on a read-only file system: creating a file or folder in it fails with EROFS (the machine's
    tests cannot mount one; every csebench output is created through tempfile's mkstemp/mkdtemp)."""
    import errno
    import os
    import tempfile

    folders: list[Path] = []

    def refuse(real):
        def create(*args, dir=None, **kwargs):
            if dir is not None and any(Path(dir).resolve().is_relative_to(f.resolve()) for f in folders):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))
            return real(*args, dir=dir, **kwargs)

        return create

    monkeypatch.setattr(tempfile, "mkstemp", refuse(tempfile.mkstemp))
    monkeypatch.setattr(tempfile, "mkdtemp", refuse(tempfile.mkdtemp))
    return folders


def test_a_read_only_output_folder_stops_before_any_work(trained, tmp_path, capsys, monkeypatch, read_only, small):
    """render, eval-sts, train and model-card ended in `OSError: [Errno 30] Read-only file system` tracebacks,
    eval-sts only after computing everything."""
    from csebench import embeddings
    from runhelpers import PARAMS, train_argv

    run = _copy_run(trained, tmp_path / "run")
    read_only.append(run)
    encoded = []
    monkeypatch.setattr(embeddings, "model_encoder", lambda *a, **k: encoded.append(a) or (lambda s: None))
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    assert_fails(capsys, ["eval-sts", "--model", str(run / "model"), "--senteval", str(small), *STS_FAST,
                          "--out", str(run / "eval" / "sts.json")],
                 f"cannot write {run / 'eval' / 'sts.json'}: {run} is not writable (Read-only file system); nothing was done")
    assert encoded == []  # found before any encoding
    assert_fails(capsys, ["model-card", "--run", str(run)], f"cannot write {run / 'model'}: {run / 'model'} is not writable")
    assert_fails(capsys, train_argv(trained.parent, run, None) + ["--force"], f"cannot write {run}: {run} is not writable")
    results = tmp_path / "results"
    results.mkdir()
    read_only.append(results)
    assert_fails(capsys, ["results", "render", "--params", str(PARAMS), "--item", "suite/ci", "--results", str(results)],
                 f"cannot write {results}: {results} is not writable (Read-only file system)")
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before  # nothing finished touched


def test_a_nan_default_that_every_suite_overrides_is_refused(tmp_path, capsys):
    """`training.learning_rate: .nan` in params.yaml was accepted when every suite set its own."""
    from runhelpers import PARAMS

    text = PARAMS.read_text(encoding="utf-8")
    params = tmp_path / "params.yaml"
    at = text.index("\ntraining:")  # the defaults' learning rate: every suite sets its own
    params.write_text(text[:at] + text[at:].replace("  learning_rate: 3.0e-5\n", "  learning_rate: .nan\n", 1), encoding="utf-8")
    assert "\n  learning_rate: .nan\n" in params.read_text()
    assert_fails(capsys, ["show-config", "--params", str(params), "--suite", "ci", "--run", "simcse", "--seed", "1"],
                 f"{params}: training.learning_rate: expected a finite number, got nan")
    over = tmp_path / "over.yaml"
    over.write_text("suites:\n  nobody:\n    training: {temperature: .inf}\n")
    assert_fails(capsys, ["show-config", "--params", str(PARAMS), "--config", str(over), "--suite", "ci", "--run", "simcse",
                          "--seed", "1"], f"{over}: suites.nobody.training.temperature: expected a finite number, got inf")


# ----------------------------------------------------------------------------- 5. a full disk


def test_a_full_disk_during_render_keeps_the_old_report(tmp_path, capsys, monkeypatch):
    """A full disk while `results render` writes (a fake fsync raising ENOSPC: no small file system can be mounted
    here): one line, exit 2; the previous report stays whole and no temporary is left."""
    import errno
    import os

    from test_nothing_lost import _report_argv, _report_outputs

    argv = _report_argv(tmp_path)
    assert run_cli(capsys, argv)[0] == 0
    before = _report_outputs(tmp_path)
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    rc, err = run_cli(capsys, argv)
    monkeypatch.setattr(os, "fsync", real)
    assert (rc, err) == (2, "csebench results: error: a write failed: No space left on device (errno ENOSPC); nothing "
                            "finished was replaced, the temporaries are removed\n")
    assert _report_outputs(tmp_path) == before
    assert not [p for p in (tmp_path / "results").rglob(".*.tmp")]


def test_two_renders_of_one_suite_at_once_both_finish_with_whole_outputs(tmp_path, capsys):
    """Two `csebench results render` processes on the same suite at the same moment (issue 31 part 5):
    each writes its set of outputs through temporaries renamed into place, so both exit 0, the tables
    are those one render writes alone, and no temporary is left."""
    import subprocess
    import sys
    from pathlib import Path

    from test_nothing_lost import _report_argv, _report_outputs

    argv = _report_argv(tmp_path)
    assert run_cli(capsys, argv)[0] == 0
    alone = {k: v for k, v in _report_outputs(tmp_path).items() if not k.endswith(".png")}  # PNGs carry a time
    cmd = [str(Path(sys.executable).parent / "csebench"), *argv]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    both = _report_outputs(tmp_path)
    assert {k: v for k, v in both.items() if not k.endswith(".png")} == alone
    assert all(v.startswith(b"\x89PNG") for k, v in both.items() if k.endswith(".png"))
    assert not [p for p in (tmp_path / "results").rglob(".*.tmp")]
