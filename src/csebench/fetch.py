"""What the network gives, fetched where the network is: the submitting host (docs/cluster.md).

Cluster compute nodes usually have no network. The rules that download (the corpus, SentEval, the
probing data: prepare_*; each hub backbone a run trains from: fetch_backbone; a suite's MTEB
datasets: fetch_mteb) are Snakemake `localrules`, so they run on the host that runs Snakemake,
before any job that needs them is submitted; the jobs Snakemake submits run with HF_HUB_OFFLINE=1
(the Snakefile sets it in a job's process), and one that still finds a hub file missing stops at
once with one line naming this step (``offline_hint``).
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError

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


def offline_hint(what: str, fetch: str = "`csebench fetch-backbone --backbone NAME --out data/backbones/NAME.json`") -> str:
    """The end of the one line a job prints when a hub file is missing and downloads are off."""
    return (f"{what} is not in this machine's Hugging Face cache and downloads are off (HF_HUB_OFFLINE=1, as in "
            "every job Snakemake submits to a cluster): fetch it first where there is network, on the submitting "
            f"host: the build does so itself (its fetch_* and prepare_* jobs run there), or {fetch}")


def fetch_backbone(params: dict, name: str) -> dict:
    """Download what a run of backbone ``name`` reads from the hub (its model and, if another, its
    tokenizer) into the Hugging Face cache; return the note the rule writes: each repo's commit."""
    from huggingface_hub import snapshot_download

    from .config import backbone_config
    from .provenance import hub_commit

    bb = backbone_config(params, name)
    note: dict = {"backbone": name, "model": bb.model, "hub": {}}
    for repo in dict.fromkeys(r for r in (bb.model, bb.tokenizer) if hub_id(r)):
        try:
            folder = snapshot_download(repo, allow_patterns=MODEL_FILES)
        except Exception as exc:  # offline with an empty cache, no network, an unknown repo
            if offline():
                raise ConfigError(f"backbones.{name}: {offline_hint(repo)}") from None
            raise ConfigError(f"backbones.{name}: could not download {repo} from the Hugging Face hub "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
        note["hub"][f"models/{repo}"] = hub_commit(Path(folder) / "config.json") or Path(folder).name
    return note
