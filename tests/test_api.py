"""The Python API (csebench.evaluate_sts / evaluate_transfer) and what a model declares for itself:
its own pooling (a sentence-transformers folder), a backbone name of params.yaml as a model, the shared
SentEval data found without being named, and docs/api.md's code run as written."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from runhelpers import ROOT, assert_fails, needs_pipeline

pytestmark = pytest.mark.usefixtures("one_thread")


def _st_folder(path: Path, tiny_encoder, **modes) -> Path:
    """A sentence-transformers-style folder of a tiny random model (no csebench metadata) whose Pooling
    module declares ``modes``."""
    enc = tiny_encoder("cls")
    enc.backbone.save_pretrained(path)
    enc.tokenizer.save_pretrained(path)
    (path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (path / "1_Pooling").mkdir()
    config = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
              "pooling_mode_max_tokens": False, **modes}
    (path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    return path


def test_a_model_pools_as_it_declares_unless_told_otherwise(tmp_path, tiny_encoder):
    from csebench.model.encoder import eval_pooler_of, load_encoder, own_pooler, pooler_origin
    from csebench.core.errors import ConfigError

    mean = _st_folder(tmp_path / "mean", tiny_encoder, pooling_mode_mean_tokens=True)
    cls = _st_folder(tmp_path / "cls", tiny_encoder, pooling_mode_cls_token=True)
    assert own_pooler(mean) == ("avg", "1_Pooling/config.json")
    assert eval_pooler_of(mean) == "avg" and eval_pooler_of(cls) == "cls_before_pooler"
    assert eval_pooler_of(mean, "avg_first_last") == "avg_first_last"  # --pooler wins
    assert pooler_origin(mean) == "the model's own, 1_Pooling/config.json"
    assert load_encoder(mean).pooler == "avg"
    saved = tmp_path / "run-model"
    tiny_encoder("cls").save(saved)  # csebench's own metadata: its evaluation pooler wins over its modules.json
    assert eval_pooler_of(saved) == "cls_before_pooler" and pooler_origin(saved) == "the saved run's evaluation pooler"
    plain = tmp_path / "plain"
    tiny_encoder("cls").backbone.save_pretrained(plain)
    assert own_pooler(plain) is None and eval_pooler_of(plain) == "cls_before_pooler"
    odd = _st_folder(tmp_path / "max", tiny_encoder, pooling_mode_max_tokens=True)
    with pytest.raises(ConfigError, match="pooling_mode_max_tokens .* pass --pooler"):
        eval_pooler_of(odd)
    assert eval_pooler_of(odd, "avg") == "avg"


def test_evaluate_sts_takes_an_encoder_a_function_or_an_encode_object(small, tiny_encoder):
    import csebench
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import evaluate_sts

    enc = tiny_encoder("avg")
    direct = evaluate_sts(lambda s: enc.encode(s, precision="fp32"), senteval_root(small))
    result = csebench.evaluate_sts(enc, senteval=small)
    assert result.tasks == direct["tasks"] and result.avg == direct["avg"]
    assert result.pooler == "avg" and result.protocol == "full"

    def as_numpy(sentences):
        return enc.encode(sentences, precision="fp32").numpy()

    assert csebench.evaluate_sts(as_numpy, senteval=small).tasks == pytest.approx(direct["tasks"], abs=1e-6)

    class Model:  # sentence-transformers' shape: model.encode(sentences)
        encode = staticmethod(as_numpy)

    by_object = csebench.evaluate_sts(Model(), senteval=small)
    assert by_object.pooler is None and by_object.tasks == pytest.approx(direct["tasks"], abs=1e-6)
    assert by_object.pooler_origin.startswith("Model.encode: its vectors scored as it returns them")
    assert csebench.evaluate_sts(as_numpy, senteval=small).pooler_origin.startswith("an encode function")
    assert result.pooler_origin == "the encoder's own pooler"
    assert csebench.evaluate_sts(tiny_encoder("cls"), senteval=small, pooler="avg").pooler_origin == "pooler="
    other = csebench.evaluate_sts(tiny_encoder("cls"), senteval=small)
    assert other.tasks != result.tasks  # the encoder's pooler is used, not a fixed one
    transfer = csebench.evaluate_transfer(enc, senteval=small, tasks=["MR"])
    assert set(transfer.tasks) == {"MR"} and transfer.pooler == "avg"


def test_eval_sts_takes_a_backbone_name_finds_the_shared_data_and_says_the_pooler(capsys, caplog, tmp_path):
    """The packaged MiniLM declares mean pooling: `--model minilm` (params.yaml's backbone name) pools avg and
    says so, with no --senteval (params.yaml's shared data); without --out the scores are printed."""
    from csebench.cli import main

    caplog.set_level(logging.INFO)
    assert main(["eval-sts", "--model", "minilm", "--max-sts-pairs", "8", "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["pooler"] == "avg" and printed["model"] == "packaged:minilm" and len(printed["tasks"]) == 7
    text = caplog.text
    assert "--model minilm: the backbone minilm of params.yaml, packaged:minilm" in text
    assert "pooler avg (the model's own, 1_Pooling/config.json)" in text
    assert re.search(r"STS avg [\d.]+ \(pooler avg\)", text)
    out = tmp_path / "cls.json"
    assert main(["eval-sts", "--model", "minilm", "--pooler", "cls", "--max-sts-pairs", "8", "--no-progress",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["encoding"]["pooler"] == "cls_before_pooler"
    assert_fails(capsys, ["eval-sts", "--model", "minilm", "--senteval", str(tmp_path / "none")],
                 "SentEval data folder not found")
    err = assert_fails(capsys, ["eval-sts", "--model", "minlm"], "--model minlm: not a backbone name of params.yaml (did you "
                       "mean 'minilm'?), nor a model folder")
    assert "Hugging Face" not in err and "fetch-backbone" not in err
    # offline, a word close to no name and in no cache: the names listed, the hub only as what a hub id looks like
    assert_fails(capsys, ["eval-sts", "--model", "qwerty"], "--model qwerty: not a backbone name of params.yaml (bert-base, ",
                 "; as a hub id (ORG/NAME, or an old bare NAME), qwerty is not in this machine's Hugging Face cache")


def test_the_command_line_works_outside_the_checkout(tmp_path, monkeypatch, capsys, caplog, small):
    """From a folder of one's own outside the checkout (no params.yaml there), `csebench eval-sts --model minilm` reads
    the params.yaml the API reads (the checkout csebench is installed from) and the SentEval data of $CSEBENCH_SHARED;
    without $CSEBENCH_SHARED, its paths.shared is read beside that params.yaml (../shared beside the checkout), not from
    the current folder. A params.yaml in the current folder is still the one read, and --params still names one."""
    from csebench.cli import build_parser, main
    from csebench.study.cli import params_of

    mine = tmp_path / "mywork"
    mine.mkdir()
    monkeypatch.chdir(mine)
    monkeypatch.setenv("CSEBENCH_SHARED", str(small.parent))
    caplog.set_level(logging.INFO)
    assert main(["eval-sts", "--model", "minilm", "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["model"] == "packaged:minilm" and printed["pooler"] == "avg" and printed["protocol"] == "full"
    assert f"no params.yaml here: reading {ROOT / 'params.yaml'}" in caplog.text
    assert sorted(p.name for p in mine.iterdir()) == []  # nothing written there
    monkeypatch.delenv("CSEBENCH_SHARED")
    outside = params_of(build_parser().parse_args(["eval-sts", "--model", "minilm"]))
    assert outside.file == str(ROOT / "params.yaml") and outside.paths.shared == str(ROOT.parent / "shared")
    (mine / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    here = params_of(build_parser().parse_args(["eval-sts", "--model", "minilm"]))
    assert here.file == str(mine / "params.yaml") and here.paths.shared == "../shared"


def test_a_sentence_transformers_object_reports_its_pooling_module(small, tokenizer):
    """An object with encode() that is a sentence-transformers model: its Pooling module is the pooler its encode()
    applies, and the result says so (mean -> avg); pooler= is refused for it, as for a function."""
    import torch
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling  # sentence-transformers 6
    except ImportError:
        from sentence_transformers.models import Pooling

    import csebench
    from csebench.core.errors import ConfigError

    class Vectors(torch.nn.Module):  # a stand-in transformer module: token embeddings of one vector per token id
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(tokenizer.vocab_size, 16)

        def tokenize(self, texts, **_):
            return tokenizer(list(texts), padding=True, truncation=True, max_length=32, return_tensors="pt")

        def forward(self, features):
            return {**features, "token_embeddings": self.emb(features["input_ids"])}

    model = SentenceTransformer(modules=[Vectors(), Pooling(16, pooling_mode="mean")], device="cpu")
    result = csebench.evaluate_sts(model, senteval=small)
    assert result.pooler == "avg" and "own Pooling module (mode mean)" in result.pooler_origin
    with pytest.raises(ConfigError, match="pooler='avg': .* gives its own vectors"):
        csebench.evaluate_sts(model, senteval=small, pooler="avg")


def test_the_api_names_what_it_could_not_find(tmp_path, monkeypatch):
    """From a folder with no params.yaml: a params= that is not there, no shared data at $CSEBENCH_SHARED, and
    csebench installed from no checkout at all are each said by name."""
    import csebench
    import csebench.study.params as study_params
    from csebench.core.errors import ConfigError, DataError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"params='nope.yaml': no such file \(.*nope.yaml\)"):
        csebench.evaluate_sts(lambda s: np.ones((len(s), 2)), params="nope.yaml")
    monkeypatch.setenv("CSEBENCH_SHARED", str(tmp_path / "empty"))
    with pytest.raises(DataError, match=r"not at .*empty/senteval \(\$CSEBENCH_SHARED/senteval\)"):
        csebench.evaluate_sts(lambda s: np.ones((len(s), 2)))
    monkeypatch.delenv("CSEBENCH_SHARED")
    monkeypatch.setattr(study_params, "installed_checkout", lambda: None)
    monkeypatch.setattr(study_params, "packaged_params_file", lambda: None)
    with pytest.raises(DataError, match=r"no senteval= given, \$CSEBENCH_SHARED not set, and csebench is not installed "
                                        r"from a checkout with the shared data beside it"):
        csebench.evaluate_sts(lambda s: np.ones((len(s), 2)))
    with pytest.raises(ConfigError, match=r"minilm is not in this machine's Hugging Face cache .*; no params.yaml was "
                                          r"found to read backbone names from"):
        csebench.evaluate_sts("minilm", senteval=tmp_path)


@pytest.mark.slow(seconds=9)
def test_a_wheel_carries_params_yaml_and_the_api_reads_it_without_a_checkout(tmp_path, monkeypatch, small):
    """Installed from a wheel (no checkout): the wheel's csebench/resources/params.yaml, copied from params.yaml when
    it was built (setup.py), gives the backbone names; the shared data must then be named (senteval= or
    $CSEBENCH_SHARED): nothing is beside a file in site-packages."""
    import subprocess
    import sys
    import zipfile

    import csebench
    import csebench.study.params as study_params
    from csebench.core.errors import DataError
    from runhelpers import copy_project

    proj = copy_project(tmp_path / "proj")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
                           str(proj), "-w", str(tmp_path / "wheel")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("csebench-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        packaged = zf.read("csebench/resources/params.yaml")
    assert packaged == (ROOT / "params.yaml").read_bytes()
    copy = tmp_path / "site" / "params.yaml"
    copy.parent.mkdir()
    copy.write_bytes(packaged)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CSEBENCH_SHARED", raising=False)
    monkeypatch.setattr(study_params, "installed_checkout", lambda: None)
    monkeypatch.setattr(study_params, "packaged_params_file", lambda: copy)
    result = csebench.evaluate_sts("minilm", senteval=small, max_pairs=8)  # a backbone name of the wheel's params.yaml
    assert result.pooler == "avg" and len(result.tasks) == 7
    with pytest.raises(DataError, match=r"csebench is not installed from a checkout with the shared data beside it"):
        csebench.evaluate_sts("minilm")


def test_the_installed_checkout_is_found_from_the_package():
    from csebench.study.params import installed_checkout

    assert installed_checkout() == ROOT  # this checkout: the package runs from its src/ (pip install -e .)


def test_training_says_when_it_pools_otherwise_than_the_model_declares(caplog):
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_encoder

    caplog.set_level(logging.INFO, logger="csebench.model.encoder")
    build_encoder(BackboneConfig(model="packaged:minilm", pooler="cls"))
    lines = [r.getMessage() for r in caplog.records if "declares its own pooling" in r.getMessage()]
    assert len(lines) == 1 and "own pooling avg (1_Pooling/config.json); this run pools with cls" in lines[0]
    caplog.clear()
    build_encoder(BackboneConfig(model="packaged:minilm", pooler="avg"))
    assert not [r for r in caplog.records if "declares its own pooling" in r.getMessage()]


def test_the_api_page_runs_as_written(capsys):
    """docs/api.md's second block, in this process (its first, MiniLM's scores, runs as a script outside the checkout
    in the next test: the same 700 pairs encoded twice were 5 CPU-s)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2
    exec(compile(blocks[1], "docs/api.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.fullmatch(r"characters: [\d.]+\n", out), out
    assert np.isfinite(float(re.search(r"characters: ([\d.]+)", out).group(1)))


def test_the_api_page_s_first_example_runs_from_a_folder_outside_the_checkout(tmp_path):
    """docs/api.md's first block, as a script in an empty folder outside the checkout, with the user's
    environment (no CSEBENCH_* variable; the shared data beside the checkout csebench is installed from): it
    prints its scores with the pooler, and nothing of transformers' (no load report, no loading bar)."""
    import subprocess
    import sys

    from runhelpers import user_env

    block = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), re.S)[0]
    script = tmp_path / "example.py"
    script.write_text(block, encoding="utf-8")
    env = user_env()
    if not (ROOT.parent / "shared").is_dir():  # a checkout without ../shared beside it: the shared data named
        from runhelpers import SHARED

        env["CSEBENCH_SHARED"] = str(SHARED)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.fullmatch(r"[\d.]+ with pooler avg \(capped\)\n\{'STS12': [\d.]+, .*'SICKRelatedness': [\d.]+\}\n",
                        proc.stdout), proc.stdout
    assert "LOAD REPORT" not in proc.stderr and "Loading weights" not in proc.stderr, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example.py"]


@pytest.mark.slow(seconds=60)
@needs_pipeline
def test_the_readme_s_one_line_training_is_the_run_the_build_reuses(tmp_path, monkeypatch):
    """The README's `csebench train --backbone minilm --method simcse --corpus my-corpus.txt`, as typed (a quick
    closing comparison: --max-sts-pairs, which the README gives for a quick look; nothing else added), in the
    README's layout: it trains into results/runs/KEY/seed42, KEY is the
    key a suite of your own listing that run on that corpus resolves to, it ends with the trained model's STS beside
    the untrained MiniLM's, both pooled as `eval-sts --model minilm` pools (avg), then its card and the suite.yaml it
    writes beside the run; the README's build of that suite (`snakemake ... 'params_overrides=["my-suite.yaml"]'`,
    dry) plans no train job for it: neither before the build prepared data/<source>/ nor after."""
    import shlex
    import subprocess

    import yaml

    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from runhelpers import readme_block, readme_checkout, run_snakemake, user_env

    cmd = next(c for c in readme_block("## Your model, your corpus") if c.startswith("csebench train "))
    assert cmd == "csebench train --backbone minilm --method simcse --corpus my-corpus.txt"
    proj = readme_checkout(tmp_path)
    lines = (ROOT.parent / "shared" / "corpus" / "demo-sentences.txt").read_text(encoding="utf-8").splitlines()[:64]
    (proj / "my-corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")  # one step of batch 64
    # MiniLM on all of STS-B dev was most of this test's CPU time (STS-B dev at the step, SICK-R dev)
    quick = ["--no-progress", "--max-sts-pairs", "12"]
    proc = subprocess.run(cmd.split() + quick, cwd=proj, env=user_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    key, folder = re.search(r"run minilm-simcse, key ([0-9a-f]+): (\S+)", proc.stderr).groups()
    assert folder == f"results/runs/{key}/seed42" and (proj / folder / "train.json").is_file()
    out = proc.stdout.splitlines()
    assert out[0].startswith("STS, Spearman x100, both pooled with avg (capped: about 12 pairs")
    assert re.fullmatch(r"untrained minilm( +-?\d+\.\d\d){8}", out[2]) and re.fullmatch(r"minilm-simcse/seed42( +-?\d+\.\d\d){8}", out[3])
    end = out.index(f"{folder}: model/, train.json, sts_vs_untrained.json")
    assert out[end + 1] == f"model card: {folder}/model/README.md (and {folder}/model_card.md)"
    assert re.search(rf"done: minilm-simcse/seed42: 1 step, STS-B dev \d+\.\d\d at step 1; {folder} \(model/, train.json\)\n",
                     proc.stderr)
    # the suite of your own it printed last and wrote beside the run lists the same run (README, "A suite of your own");
    # so does one written by hand with the corpus's path as typed (the key reads the file's content)
    assert "\n".join(out[end + 2:]) + "\n" == (proj / folder / "suite.yaml").read_text()
    (proj / "by-hand.yaml").write_text(yaml.safe_dump({
        "data": {"my": {"corpus": {"path": "my-corpus.txt"}, "senteval": {"path": "{shared}/senteval"}}},
        "suites": {"mine": {"data": "my", "seeds": [42], "runs": {"simcse": {"backbone": "minilm", "method": "simcse"}}}}}))
    monkeypatch.chdir(proj)  # where the build runs: the relative path read from there
    assert resolve_run(load_params(str(proj / "params.yaml"), [str(proj / "by-hand.yaml")]), "mine", "simcse", 42).key() == key
    (proj / "my-suite.yaml").write_text((proj / folder / "suite.yaml").read_text())
    params = load_params(str(proj / "params.yaml"), [str(proj / "my-suite.yaml")])
    assert resolve_run(params, "mine", "minilm-simcse", 42).key() == key
    build = next(c for c in readme_block("**A suite of your own**") if c.startswith("snakemake "))
    assert "'params_overrides=[\"my-suite.yaml\"]'" in build

    # the build's command, forked from this process (runhelpers.run_snakemake: Snakemake imported once; what these
    # check is what it plans and prepares, not its start)
    words = shlex.split(build)
    assert words[0] == "snakemake"

    def dry_run() -> str:
        dry = run_snakemake(words[1:] + ["-n"], cwd=proj, env=user_env())
        assert dry.returncode == 0, dry.stderr[-3000:]
        return dry.stdout + dry.stderr

    before = dry_run()
    assert re.search(r"^rule eval_sts:", before, re.M) and "prepare_senteval" in before  # the suite is not built yet
    assert not re.search(r"^rule train:", before, re.M), before[-3000:]
    assert "prepare_corpus" not in before  # a finished run reads no corpus: nothing asks for it
    prepare = run_snakemake(words[1:] + ["--", "data/mine/senteval/ROOT", "data/mine/corpus.txt"], cwd=proj, env=user_env())
    assert prepare.returncode == 0, prepare.stderr[-3000:]
    assert (proj / "data/mine/corpus.txt").stat().st_mtime > (proj / folder / "train.json").stat().st_mtime
    after = dry_run()  # the data now prepared after the run: still not stale
    assert not re.search(r"^rule train:", after, re.M), after[-3000:]
    forced = run_snakemake(words[1:] + ["-n", "--forcerun", "train"], cwd=proj, env=user_env())
    assert re.search(r"^rule train:", forced.stdout + forced.stderr, re.M)  # the dry run would show one (forced)


def test_a_run_of_one_s_own_is_checked_before_it_trains(capsys, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a sentence\nanother one\n")
    base = ["train", "--backbone", "tiny", "--corpus", str(corpus)]
    from csebench.training.cli import _setting_value

    assert [_setting_value(v, "x") for v in ("1e-4", "64", "true", "avg", "[1, 2]")] == [1e-4, 64, True, "avg", [1, 2]]
    assert_fails(capsys, base + ["--method", "nope"], "--method nope: not a method of params.yaml (valid: ")
    assert_fails(capsys, base + ["--method", "simcsee"], "--method simcsee: not a method of params.yaml (did you mean 'simcse'?)")
    # a misspelt backbone name: one line, the closest name, nothing of the hub (no loading was tried)
    err = assert_fails(capsys, ["train", "--backbone", "minlm", "--method", "simcse", "--corpus", str(corpus)],
                       "--backbone minlm: not a backbone name of params.yaml (did you mean 'minilm'?)")
    assert "Hugging Face" not in err and "fetch-backbone" not in err and "hub" not in err
    assert_fails(capsys, base + ["--method", "simcse", "--suite", "ci"], "give either --backbone and --method")
    assert_fails(capsys, base + ["--method", "simcse", "--set", "learning_rate=1"], "--set learning_rate=1: expected training.KEY=VALUE")
    assert_fails(capsys, ["train", "--suite", "ci", "--run", "simcse", "--out", str(tmp_path / "r")], "--seed is required")
    assert_fails(capsys, ["train", "--suite", "ci", "--run", "simcse", "--seed", "1"], "--out is required")
