"""The hub path, offline: a Hugging Face cache filled here in the hub's own layout (blobs,
snapshots/<commit>/ links, refs/main) with tiny files, then, with HF_HUB_OFFLINE=1, the commands a cluster
node with a warmed cache runs: the wiki1m corpus, senteval.tar and its extraction, the probing data, and
training and evaluation of backbones loaded by hub id (a legacy id and an ORG/NAME one). Every result
records the hub commit of each backbone and data file it was made from."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA_REPO = "princeton-nlp/datasets-for-simcse"
PROBING_URL = "https://raw.githubusercontent.com/facebookresearch/SentEval/main/data/probing"


def commit_of(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()  # 40 hex digits, as the hub's commits


def put_repo(hub: Path, kind: str, repo: str, files: dict[str, bytes]) -> str:
    """A repository in the hub cache's own layout: blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>,
    refs/main holding the commit. Returns the commit."""
    folder = hub / f"{kind}--{repo.replace('/', '--')}"
    commit = commit_of(repo)
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = folder / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    return commit


def model_files(family: str, sentences: list[str], tmp: Path) -> dict[str, bytes]:
    """A tiny model of the family's class (2 layers, hidden 32) and its offline tokenizer, as a hub repo holds them."""
    from csebench.model.architectures import ARCHITECTURES
    from csebench.model.standins import model_config, train_tokenizer
    from transformers import BertModel, RobertaModel

    arch = ARCHITECTURES["bert-base-uncased" if family == "bert" else "roberta-base"]
    cfg = model_config(arch)
    cfg.update(dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64))
    model = (BertModel if family == "bert" else RobertaModel)(cfg)
    out = tmp / family
    model.save_pretrained(out)
    train_tokenizer(family, sentences, vocab_size=1000).save_pretrained(out)
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


def senteval_tar(shared: Path, tmp: Path) -> bytes:
    """senteval.tar as SimCSE publishes it (SentEval/data/downstream/...), its STS and SICK files cut short."""
    from csebench.workflow.rehearse import write_senteval

    src = write_senteval(shared / "senteval", tmp / "cut", lines=10) / "downstream"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for task in ("STS", "SICK"):
            tar.add(src / task, arcname=f"SentEval/data/downstream/{task}")
    return buf.getvalue()


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory, shared_dir):
    tmp = tmp_path_factory.mktemp("hub")
    hub = tmp / "hf" / "hub"
    sentences = (shared_dir / "corpus" / "demo-sentences.txt").read_text(encoding="utf-8").splitlines()[:600]
    commits = {
        "datasets": put_repo(hub, "datasets", DATA_REPO, {"wiki1m_for_simcse.txt": ("\n".join(sentences[:64]) + "\n").encode(),
                                                          "senteval.tar": senteval_tar(shared_dir, tmp)}),
        "bert-base-uncased": put_repo(hub, "models", "bert-base-uncased", model_files("bert", sentences, tmp)),
        "FacebookAI/roberta-base": put_repo(hub, "models", "FacebookAI/roberta-base", model_files("roberta", sentences, tmp)),
    }
    from csebench.workflow.rehearse import write_probing

    probing = tmp / "csebench-cache" / "probing" / hashlib.sha256(PROBING_URL.encode()).hexdigest()[:12]
    write_probing(sentences, probing)  # url_download's cache of SentEval's probing files
    return tmp, commits


NODE = """
import json, sys
from csebench.cli import main
for argv in json.loads(sys.argv[1]):
    rc = main(argv)
    if rc:
        sys.exit(f"csebench {' '.join(argv)} exited with {rc}")
"""



def _offline_env(tmp: Path, **extra: str) -> dict:
    """A subprocess's environment offline on the warm cache under ``tmp`` (HF_HOME; no other cache variable
    of the caller's overrides it), this checkout's src/ importable."""
    env = {**os.environ, "HF_HOME": str(tmp / "hf"), "HF_HUB_OFFLINE": "1", **extra,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    env.pop("HF_HUB_CACHE", None)
    env.pop("HUGGINGFACE_HUB_CACHE", None)
    return env


def _refused_in_one_line(argv: list[str], out: Path, env: dict) -> str:
    """A fetch of a repository not in the cache: exit 2, nothing written at ``out``, one line on stderr (returned)."""
    proc = subprocess.run([*argv, "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and not out.exists(), proc.stderr
    assert "org/not-in-the-cache is not in this machine's Hugging Face cache and downloads are off" in lines[0]
    return lines[0]


def test_a_warm_cache_serves_the_whole_hub_path_offline(warm_cache, tmp_path):
    tmp, commits = warm_cache
    over = tmp_path / "over.yaml"
    training = {"max_steps": 2, "eval_steps": 2, "batch_size": 4, "max_seq_length": 16, "dev_max_pairs": 6,
                "eval_batch_size": 16, "log_steps": 1}
    over.write_text(yaml.safe_dump({
        "backbones": {"roberta-org": {"model": "FacebookAI/roberta-base", "pooler": "cls"}},
        "suites": {"hub": {"data": "wiki1m", "seeds": [1], "training": training, "runs": {
            "bert": {"backbone": "bert-base", "method": "simcse", "training": {"batch_size": 4, "learning_rate": 1.0e-4}},
            "roberta": {"backbone": "roberta-org", "method": "gs_infonce"},
            "untrained": {"backbone": "bert-base", "method": "backbone", "train": False}}}}}))
    data, runs = tmp_path / "data", tmp_path / "runs"
    common = ["--params", str(ROOT / "params.yaml"), "--config", str(over)]
    argv = [["prepare-corpus", *common, "--data", "wiki1m", "--out", str(data / "corpus.txt")],
            ["prepare-senteval", *common, "--data", "wiki1m", "--out", str(data / "senteval")],
            ["prepare-probing", *common, "--data", "wiki1m", "--out", str(data / "probing")]]
    for run in ("bert", "roberta", "untrained"):
        corpus = ["--corpus", str(data / "corpus.txt")] if run != "untrained" else []
        argv.append(["train", *common, "--suite", "hub", "--run", run, "--seed", "1", *corpus, "--senteval",
                     str(data / "senteval"), "--out", str(runs / run), "--cache-dir", str(data / "cache"), "--no-progress"])
    argv += [["eval-sts", *common, "--model", str(runs / "bert" / "model"), "--senteval", str(data / "senteval"),
              "--suite", "hub", "--run", "bert", "--seed", "1", "--max-sts-pairs", "6", "--out", str(runs / "bert" / "sts.json"),
              "--no-progress"],
             ["eval-probing", *common, "--model", str(runs / "roberta" / "model"), "--probing", str(data / "probing"),
              "--max-train-sentences", "40", "--out", str(runs / "roberta" / "probing.json"), "--no-progress"],
             ["eval-sts", "--model", "FacebookAI/roberta-base", "--pooler", "avg", "--senteval", str(data / "senteval"),
              "--max-sts-pairs", "6", "--out", str(tmp_path / "hub-model-sts.json"), "--no-progress"]]
    env = _offline_env(tmp, TRANSFORMERS_OFFLINE="1", CSEBENCH_CACHE=str(tmp / "csebench-cache"), CSEBENCH_DATA_CHECK="0")
    proc = subprocess.run([sys.executable, "-c", NODE, json.dumps(argv)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]

    wiki = f"datasets/{DATA_REPO}/wiki1m_for_simcse.txt"
    tar = f"datasets/{DATA_REPO}/senteval.tar"
    assert (data / "senteval" / "extracted").is_dir() and (data / "corpus.txt").read_text().count("\n") == 64
    read = lambda p: json.loads(Path(p).read_text())  # noqa: E731
    bert = read(runs / "bert" / "train.json")["provenance"]["hub"]
    assert bert == {"models/bert-base-uncased": commits["bert-base-uncased"], wiki: commits["datasets"],
                    tar: commits["datasets"]}
    roberta = read(runs / "roberta" / "train.json")["provenance"]["hub"]
    assert roberta["models/FacebookAI/roberta-base"] == commits["FacebookAI/roberta-base"]
    assert read(runs / "untrained" / "train.json")["provenance"]["hub"] == {
        "models/bert-base-uncased": commits["bert-base-uncased"], tar: commits["datasets"]}  # no corpus read
    sts = read(runs / "bert" / "sts.json")["provenance"]["hub"]  # the saved model names the backbone it came from
    assert sts == {"models/bert-base-uncased": commits["bert-base-uncased"], tar: commits["datasets"]}
    assert read(runs / "roberta" / "probing.json")["provenance"]["hub"] == {
        "models/FacebookAI/roberta-base": commits["FacebookAI/roberta-base"]}
    assert read(tmp_path / "hub-model-sts.json")["provenance"]["hub"]["models/FacebookAI/roberta-base"] == \
        commits["FacebookAI/roberta-base"]
    assert read(runs / "roberta" / "model" / "csebench_encoder.json")["hub"] == {
        "models/FacebookAI/roberta-base": commits["FacebookAI/roberta-base"]}


def test_an_empty_cache_fails_in_one_line(tmp_path):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "csebench", "prepare-corpus", "--params", str(ROOT / "params.yaml"),
                           "--data", "wiki1m", "--out", str(tmp_path / "c.txt")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "wiki1m_for_simcse.txt of hub dataset princeton-nlp/datasets-for-simcse is not in " \
        "this machine's Hugging Face cache and downloads are off" in proc.stderr and "prepare-corpus" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_fetch_backbone_serves_a_warm_cache_and_a_missing_repo_is_one_line(warm_cache, tmp_path):
    """The submitting host's step (csebench.study.fetch, docs/cluster.md): `csebench fetch-backbone` writes the note of
    what it fetched with each repo's commit; offline with the repo not in the cache, one line naming the step."""
    tmp, commits = warm_cache
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"backbones": {"roberta-org": {"model": "FacebookAI/roberta-base", "pooler": "cls"},
                                                  "absent": {"model": "org/not-in-the-cache"}}}))
    env = _offline_env(tmp)
    cli = [sys.executable, "-m", "csebench", "fetch-backbone", "--params", str(ROOT / "params.yaml"), "--config", str(over)]
    ok = subprocess.run([*cli, "--backbone", "roberta-org", "--out", str(tmp_path / "roberta-org.json")], env=env,
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    note = json.loads((tmp_path / "roberta-org.json").read_text())
    assert note["hub"] == {"models/FacebookAI/roberta-base": commits["FacebookAI/roberta-base"]}
    assert "on the submitting host" in _refused_in_one_line([*cli, "--backbone", "absent"], tmp_path / "absent.json", env)


def test_fetch_generator_serves_a_warm_cache_and_a_missing_repo_is_one_line(warm_cache, tmp_path):
    """A term's second model (DiffCSE's generator) is fetched like a backbone: `csebench fetch-generator` (the
    workflow's fetch_generator rule, its note named as csebench.study.fetch.note_name spells ORG/NAME)."""
    tmp, commits = warm_cache
    env = _offline_env(tmp)
    cli = [sys.executable, "-m", "csebench", "fetch-generator"]
    ok = subprocess.run([*cli, "--model", "FacebookAI--roberta-base", "--out", str(tmp_path / "g.json")], env=env,
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    note = json.loads((tmp_path / "g.json").read_text())
    assert note == {"generator": "FacebookAI/roberta-base", "hub": {"models/FacebookAI/roberta-base": commits["FacebookAI/roberta-base"]}}
    line = _refused_in_one_line([*cli, "--model", "org/not-in-the-cache"], tmp_path / "absent.json", env)
    assert "csebench fetch-generator --model org/not-in-the-cache" in line


def test_a_job_that_finds_its_backbone_missing_offline_names_the_fetch_step(tmp_path, monkeypatch):
    """A cluster job (HF_HUB_OFFLINE=1) whose hub backbone is not in the cache: one line naming the fetch."""
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_backbone
    from csebench.core.errors import ConfigError

    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    with pytest.raises(ConfigError, match=r"cannot load backbone 'org/absent': org/absent is not in this machine's "
                                          r"Hugging Face cache and downloads are off .* fetch-backbone"):
        build_backbone(BackboneConfig(model="org/absent"), tokenizer=None)


FETCH = """
import contextlib, io, json, sys
from csebench.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(argv)
    out.append([rc, err.getvalue()])
print(json.dumps(out))
"""


def test_fetch_backbone_of_a_cache_without_the_weights_fails_naming_what_is_missing(tmp_path, shared_dir):
    """Offline, snapshot_download hands back a cached snapshot whatever it holds: a cache with only config.json,
    or config and tokenizer without weights, made the fetch exit 0 and write its note, and the job on the
    compute node failed later. The fetch checks every file loading needs and names what is missing."""
    sentences = (shared_dir / "corpus" / "demo-sentences.txt").read_text(encoding="utf-8").splitlines()[:300]
    files = model_files("bert", sentences, tmp_path)
    hub = tmp_path / "hf" / "hub"
    tokenizer = {k: v for k, v in files.items() if k.startswith(("tokenizer", "vocab", "special_tokens"))}
    commits = {"org/config-only": put_repo(hub, "models", "org/config-only", {"config.json": files["config.json"]}),
               "org/no-weights": put_repo(hub, "models", "org/no-weights", {"config.json": files["config.json"], **tokenizer}),
               "org/whole": put_repo(hub, "models", "org/whole", files)}
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"backbones": {
        "config-only": {"model": "org/config-only"}, "no-weights": {"model": "org/no-weights"},
        "split": {"model": "org/whole", "tokenizer": "org/config-only"}, "whole": {"model": "org/whole"}}}))
    argv = [["fetch-backbone", "--params", str(ROOT / "params.yaml"), "--config", str(over), "--backbone", name,
             "--out", str(tmp_path / f"{name}.json")] for name in ("config-only", "no-weights", "split", "whole")]
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    env.pop("HF_HUB_CACHE", None)
    env.pop("HUGGINGFACE_HUB_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", FETCH, json.dumps(argv)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rc1, err1), (rc2, err2), (rc3, err3), (rc4, err4) = json.loads(proc.stdout.splitlines()[-1])
    weights, tok = "model.safetensors (the weights)", "a tokenizer (tokenizer.json, vocab.txt, or vocab.json with merges.txt)"
    offline = (" in this machine's Hugging Face cache, and downloads are off (HF_HUB_OFFLINE=1): fetch it where there is "
               "network (HF_HUB_OFFLINE=0 csebench fetch-backbone --backbone {0} --out data/backbones/{0}.json), or copy "
               "the whole snapshot into the cache; nothing written\n")
    assert (rc1, err1) == (2, f"csebench fetch-backbone: error: backbones.config-only: org/config-only (commit "
                              f"{commits['org/config-only'][:12]}) lacks {weights} and {tok}" + offline.format("config-only"))
    assert (rc2, err2) == (2, f"csebench fetch-backbone: error: backbones.no-weights: org/no-weights (commit "
                              f"{commits['org/no-weights'][:12]}) lacks {weights}" + offline.format("no-weights"))
    # a tokenizer of its own: the tokenizer's repo needs the tokenizer files only, the model's the config and weights
    assert (rc3, err3) == (2, f"csebench fetch-backbone: error: backbones.split: org/config-only (commit "
                              f"{commits['org/config-only'][:12]}) lacks {tok}" + offline.format("split"))
    assert rc4 == 0, err4
    assert not (tmp_path / "config-only.json").exists() and not (tmp_path / "no-weights.json").exists()
    assert json.loads((tmp_path / "whole.json").read_text())["hub"] == {"models/org/whole": commits["org/whole"]}


def test_eval_of_a_hub_model_offline_names_the_fetch_step(tmp_path, capsys, monkeypatch):
    """`eval-sts --model bert-base-uncased` with downloads off and the model not in the cache printed transformers'
    "Check your internet connection" advice; it is the one line the jobs print, naming the fetch step."""
    from runhelpers import assert_fails

    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    line = assert_fails(capsys, ["eval-sts", "--model", "bert-base-uncased", "--senteval", str(tmp_path / "se"),
                                 "--out", str(tmp_path / "sts.json")],
                        "csebench eval-sts: error: --model bert-base-uncased: not a backbone name of params.yaml (bert-base, ",
                        "nor a model folder; as a hub id (ORG/NAME, or an old bare NAME), bert-base-uncased is not in this machine's "
                        "Hugging Face cache and downloads are off (HF_HUB_OFFLINE=1, as in every job Snakemake submits to a "
                        "cluster): fetch it first where there is network, on the submitting host: the build does so itself "
                        "(its fetch_* and prepare_* jobs run there), or `csebench fetch-backbone --backbone NAME --out "
                        "data/backbones/NAME.json`", outputs=[tmp_path / "sts.json"])
    assert "internet" not in line


def test_downloads_on_and_the_hub_unreachable_is_one_try_then_the_cache_or_one_line(warm_cache, tmp_path, capsys,
                                                                                    monkeypatch, caplog, small):
    """HF_HUB_OFFLINE unset and no network: a hub id took 54 s and ~44 lines of huggingface_hub's retries (5 a file,
    1 to 8 s apart) before its error. One probe of the hub (a TCP connection, here refused by a stand-in for the
    resolver) decides: a repository wholly in the cache is read from there, the process offline from then on (one
    warning); one that is not is one line at once. No request is retried, whatever the number of files."""
    import logging
    import socket

    from huggingface_hub import constants

    from csebench.study import fetch
    from runhelpers import STS_FAST, assert_fails, run_cli

    tmp, commits = warm_cache
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "CSEBENCH_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # as read at import: the caller's environment
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp / "hf" / "hub"))
    monkeypatch.setattr(fetch, "_REACHED", {})
    tries = []

    def no_network(address, timeout=None, *args, **kwargs):
        tries.append(address)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", no_network)
    caplog.set_level(logging.WARNING)
    out = tmp_path / "out"
    sts = ["eval-sts", "--senteval", str(small), *STS_FAST]
    line = assert_fails(capsys, [*sts, "--model", "org/not-in-the-cache", "--out", str(out / "a.json")],
                        "cannot load org/not-in-the-cache (--model): the Hugging Face hub (https://huggingface.co) cannot "
                        "be reached (huggingface.co:443: gaierror: [Errno -2] Name or service not known), and this "
                        "machine's Hugging Face cache lacks its files: check the network", outputs=[out])
    assert "internet" not in line and tries == [("huggingface.co", 443)]
    rc, err = run_cli(capsys, [*sts, "--model", "bert-base-uncased", "--out", str(out / "b.json")])
    assert rc == 0, err
    said = [r.getMessage() for r in caplog.records if r.name == "csebench"]
    assert said == [f"the Hugging Face hub (https://huggingface.co) cannot be reached (huggingface.co:443: gaierror: "
                    f"[Errno -2] Name or service not known): bert-base-uncased is read from this machine's Hugging Face "
                    f"cache (commit {commits['bert-base-uncased'][:12]}), and this process stays offline (HF_HUB_OFFLINE=1)"]
    assert json.loads((out / "b.json").read_text())["provenance"]["hub"] == {"models/bert-base-uncased": commits["bert-base-uncased"]}
    assert not [r for r in caplog.records if "Retry" in r.getMessage()] and tries == [("huggingface.co", 443)]  # probed once
    from csebench.core.errors import ConfigError
    from csebench.model import standins
    from csebench.model.encoder import check_model_source

    (tmp_path / "corpus.txt").write_text("a sentence\n", encoding="utf-8")
    monkeypatch.delenv("HF_HUB_OFFLINE")  # online again, the hub still unreachable
    with pytest.raises(ConfigError, match="cannot load bert-large-uncased"):
        check_model_source("bert-large-uncased")
    with standins.activate(tmp_path / "standins", tmp_path / "corpus.txt"):
        check_model_source("bert-large-uncased")  # rehearsing: a paper backbone is built offline, the hub not needed
    monkeypatch.setattr(fetch, "_REACHED", {})
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")  # behind a proxy: the proxy is what is probed
    assert fetch.hub_unreachable() == "proxy proxy.example:3128: gaierror: [Errno -2] Name or service not known"
