"""What the network gives, fetched where the network is: the submitting host (docs/cluster.md).

Cluster compute nodes usually have no network. The rules that download (the corpus, SentEval, the
probing data: prepare_*; each hub backbone a run trains from: fetch_backbone; a suite's MTEB
datasets: fetch_mteb) are Snakemake `localrules`, so they run on the host that runs Snakemake,
before any job that needs them is submitted; the jobs Snakemake submits run with HF_HUB_OFFLINE=1
(the Snakefile sets it in a job's process), and one that still finds a hub file missing stops at
once with one line naming this step (``offline_hint``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from csebench.core.errors import ConfigError

# what from_pretrained reads of a model repo: config, tokenizer and safetensors weights (not the
# TensorFlow, Flax, ONNX or pickled copies the hub also holds)
MODEL_FILES = ["*.json", "*.txt", "*.model", "merges.txt", "vocab.*", "*.safetensors", "*.safetensors.index.json"]


def hub_id(model: str | None) -> bool:
    """A Hugging Face hub id (NAME or ORG/NAME), not a folder, packaged:minilm or random."""
    if not model or model == "random" or ":" in model or Path(model).expanduser().exists():
        return False
    return not looks_like_path(model)


def looks_like_path(model: str) -> bool:
    """A hub id is NAME or ORG/NAME; anything else (absolute, ./, ~, a/b/c, trailing /) is a path."""
    return model.startswith(("/", ".", "~")) or model.endswith(("/", os.sep)) or model.count("/") > 1 \
        or (os.sep != "/" and os.sep in model)


def offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "CSEBENCH_OFFLINE"))


PROBE_SECONDS = 5.0  # how long the one probe of the hub waits for a connection
_REACHED: dict[str, str | None] = {}  # endpoint -> why it cannot be reached (None: it can), probed once a process


def hub_unreachable(timeout: float = PROBE_SECONDS) -> str | None:
    """Why the Hugging Face hub cannot be reached from here, or None: one TCP connection to its endpoint's host
    (HF_ENDPOINT: a mirror's), or to the HTTPS proxy the environment names, waited for at most ``timeout`` seconds,
    once a process. Without it, a hub id with the network down took 54 s of huggingface_hub's retries (5 a file,
    1 to 8 s apart, ~44 warning lines) before transformers' own error."""
    import socket
    import threading
    import urllib.parse
    import urllib.request

    from huggingface_hub import constants

    endpoint = constants.ENDPOINT
    if endpoint in _REACHED:
        return _REACHED[endpoint]
    url = urllib.parse.urlsplit(endpoint)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(url.scheme) if not urllib.request.proxy_bypass(host) else None
    if proxy:  # the hub is reached through it: probing the hub's host directly would fail behind a firewall
        via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = via.hostname or "", via.port or 8080
    found: list[str | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            found.append(None)
        except OSError as exc:  # a name not resolved, a connection refused or timed out, no route
            found.append(f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no connection'}")

    probe = threading.Thread(target=connect, daemon=True)  # a resolver that hangs is not waited for past the timeout
    probe.start()
    probe.join(timeout)
    why = found[0] if found else f"no answer within {timeout:g} s"
    _REACHED[endpoint] = None if why is None else f"{'proxy ' if proxy else ''}{host}:{port}: {why}"
    return _REACHED[endpoint]


def reach_hub(repo: str | None, what: str, model: bool = True, tokenizer: bool = True) -> None:
    """Before a hub id is read with downloads on: when the hub cannot be reached (hub_unreachable), either the
    repository is in this machine's Hugging Face cache with everything loading needs (missing_files), and this
    process reads the cache from now on as with HF_HUB_OFFLINE=1 (said in one warning), or it is a one-line
    error naming the repository and why, at once. Offline, a folder, packaged:minilm or random: nothing to do."""
    if offline() or not hub_id(repo):
        return
    why = hub_unreachable()
    if why is None:
        return
    import logging

    from huggingface_hub import constants, try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo, "config.json" if model else "tokenizer_config.json")
    except Exception:  # noqa: BLE001  not a valid repo id: the loader says so
        found = None
    folder = Path(found).parent if isinstance(found, str) else None
    lacks = missing_files(folder, model, tokenizer) if folder is not None else ["its files"]
    if not lacks:
        os.environ["HF_HUB_OFFLINE"] = "1"  # this process: csebench's offline() and huggingface_hub's own switch
        constants.HF_HUB_OFFLINE = True
        logging.getLogger("csebench").warning(
            "the Hugging Face hub (%s) cannot be reached (%s): %s is read from this machine's Hugging Face cache "
            "(commit %s), and this process stays offline (HF_HUB_OFFLINE=1)", constants.ENDPOINT, why, repo,
            folder.name[:12])
        return
    raise ConfigError(f"cannot load {repo} ({what}): the Hugging Face hub ({constants.ENDPOINT}) cannot be reached "
                      f"({why}), and this machine's Hugging Face cache lacks {' and '.join(lacks)}: check the network "
                      "(a proxy: HTTPS_PROXY; a mirror: HF_ENDPOINT), or fetch it where there is network (csebench "
                      "fetch-backbone) and copy the cache here (HF_HOME)")


def offline_hint(what: str, fetch: str = "`csebench fetch-backbone --backbone NAME --out data/backbones/NAME.json`") -> str:
    """The end of the one line a job prints when a hub file is missing and downloads are off."""
    return (f"{what} is not in this machine's Hugging Face cache and downloads are off (HF_HUB_OFFLINE=1, as in "
            "every job Snakemake submits to a cluster): fetch it first where there is network, on the submitting "
            f"host: the build does so itself (its fetch_* and prepare_* jobs run there), or {fetch}")


TYPO = 0.8  # difflib's ratio from which a bare word is taken for a misspelt backbone name (minlm 0.91; bert-base-uncased 0.69)


def check_model_name(params: dict, model: str, what: str = "--model") -> None:
    """A bare word given for a model (no '/', not a path that exists, not packaged:) that names no backbone of
    params.yaml and no model in this machine's Hugging Face cache: a ConfigError that says it is not a backbone name of
    params.yaml and suggests the closest (``minlm``: did you mean 'minilm'?), before anything is loaded. A word close to
    no name is left to the hub when downloads are on (an old unprefixed hub id such as ``gpt2``); offline it is an error
    too, listing the names and saying how a hub id would be fetched. A word close to a name is never sent to the hub."""
    import difflib

    from csebench.study.params import may_name_backbone

    names = list((params or {}).get("backbones") or {})
    if not may_name_backbone(model) or model in names or _in_hub_cache(model):
        return
    close = difflib.get_close_matches(model, names, n=1, cutoff=TYPO)
    if close:
        raise ConfigError(f"{what} {model}: not a backbone name of params.yaml (did you mean '{close[0]}'?), nor a model "
                          "folder")
    if offline():
        # an old bare hub id (bert-base-uncased, gpt2) is as likely as a word that names nothing: both are said
        raise ConfigError(f"{what} {model}: not a backbone name of params.yaml ({', '.join(names)}), nor a model folder; "
                          f"as a hub id (ORG/NAME, or an old bare NAME), {offline_hint(model)}")


def _in_hub_cache(model: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except Exception:  # not a valid repo id
        return False


def fetch_backbone(params: dict, name: str) -> dict:
    """Download what a run of backbone ``name`` reads from the hub (its model and, if another, its
    tokenizer) into the Hugging Face cache; return the note the rule writes: each repo's commit."""
    from csebench.study.resolve import backbone_config

    bb = backbone_config(params, name)
    note: dict = {"backbone": name, "model": bb.model, "hub": {}}
    for repo in dict.fromkeys(r for r in (bb.model, bb.tokenizer) if hub_id(r)):
        folder, commit = _snapshot(repo, f"backbones.{name}", offline_hint(repo))
        # offline, snapshot_download returns the cached snapshot's folder whatever it holds: a cache with only
        # config.json would pass here and fail in the job on the compute node
        missing = missing_files(folder, model=repo == bb.model, tokenizer=repo == (bb.tokenizer or bb.model))
        if missing:
            raise ConfigError(incomplete(name, repo, commit, missing))
        note["hub"][f"models/{repo}"] = commit
    return note


def _snapshot(repo: str, where: str, hint: str) -> tuple[Path, str]:
    """The model files of a hub repository downloaded into the cache (or found there): (its folder, its
    commit); a failure is one line naming ``where``, ``hint`` when downloads are off."""
    from huggingface_hub import snapshot_download

    from csebench.core.provenance import hub_commit

    down = None if offline() else hub_unreachable()  # the cache only, at once, rather than retries for a minute
    try:
        folder = Path(snapshot_download(repo, allow_patterns=MODEL_FILES, local_files_only=down is not None))
    except Exception as exc:  # offline with an empty cache, no network, an unknown repo
        if offline():
            raise ConfigError(f"{where}: {hint}") from None
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        raise ConfigError(f"{where}: could not download {repo} from the Hugging Face hub "
                          f"({f'it cannot be reached: {down}' if down else reason})") from None
    return folder, hub_commit(folder / "config.json") or folder.name


def note_name(model: str) -> str:
    """A hub id as one path segment (the cache's spelling: ORG/NAME -> ORG--NAME), for data/generators/NAME.json."""
    return model.replace("/", "--")


def fetch_generator(model: str) -> dict:
    """Download a term's second pretrained model (DiffCSE's masked-LM generator: its config and safetensors
    weights; it reads the backbone's tokenizer) into the Hugging Face cache; return the note: its commit.
    ``model`` may be spelt as note_name spells it."""
    repo = model if "/" in model else model.replace("--", "/")
    if not hub_id(repo):
        raise ConfigError(f"generator '{model}' is not a Hugging Face hub id: nothing to fetch")
    folder, commit = _snapshot(repo, f"generator {repo}", offline_hint(
        repo, f"`csebench fetch-generator --model {repo} --out data/generators/{note_name(repo)}.json`"))
    missing = missing_files(folder, model=True, tokenizer=False)
    if missing:
        raise ConfigError(f"generator {repo} (commit {commit[:12]}) lacks {' and '.join(missing)}: csebench loads "
                          "safetensors weights only; nothing written")
    return {"generator": repo, "hub": {f"models/{repo}": commit}}


WEIGHTS = "model.safetensors (the weights)"
TOKENIZER = "a tokenizer (tokenizer.json, vocab.txt, or vocab.json with merges.txt)"


def missing_files(folder: Path, model: bool = True, tokenizer: bool = True) -> list[str]:
    """What loading needs that a fetched snapshot lacks: a model's config.json and safetensors weights (every
    shard its index names), a tokenizer's vocabulary. A link whose blob is gone counts as missing."""
    have = lambda name: (folder / name).is_file()  # noqa: E731  follows the snapshot's links to blobs
    missing = []
    if model:
        if not have("config.json"):
            missing.append("config.json")
        index = folder / "model.safetensors.index.json"
        if index.is_file():
            try:
                shards = sorted(set((json.loads(index.read_text(encoding="utf-8")).get("weight_map") or {}).values()))
            except (ValueError, AttributeError):
                shards = []
            missing += [s for s in shards if not have(s)] or ([] if shards else ["the shards of model.safetensors.index.json"])
        elif not have("model.safetensors"):
            missing.append(WEIGHTS)
    if tokenizer and not (have("tokenizer.json") or have("vocab.txt") or (have("vocab.json") and have("merges.txt"))
                          or any(folder.glob("*.model"))):
        missing.append(TOKENIZER)
    return missing


def incomplete(name: str, repo: str, commit: str, missing: list[str]) -> str:
    """The one line of a fetch that found the snapshot without files loading needs."""
    lacks = f"backbones.{name}: {repo} (commit {commit[:12]}) lacks {' and '.join(missing)}"
    if offline():
        return (f"{lacks} in this machine's Hugging Face cache, and downloads are off (HF_HUB_OFFLINE=1): fetch it where "
                f"there is network (HF_HUB_OFFLINE=0 csebench fetch-backbone --backbone {name} --out "
                f"data/backbones/{name}.json), or copy the whole snapshot into the cache; nothing written")
    return (f"{lacks} on the Hugging Face hub (csebench loads safetensors weights only, never a pickled "
            f"pytorch_model.bin): give backbones.{name} a repo that holds them; nothing written")
