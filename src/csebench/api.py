"""The Python entry: evaluate a model with the papers' protocol in a few lines.

    import csebench
    result = csebench.evaluate_sts("minilm")          # a backbone name of params.yaml, a folder, a hub id
    print(result.avg, result.tasks["STSBenchmark"], result.pooler)

The model is a name or path (as ``csebench eval-sts --model`` takes it: a run's model folder, a backbone
name of params.yaml, a Hugging Face hub id, ``packaged:minilm``), a loaded csebench encoder, any object
with an ``encode(list_of_sentences)`` method returning one vector per sentence (a sentence-transformers
model), or such a function itself. The SentEval data are found as the CLI finds them (params.yaml's
``paths.shared``/senteval, ``$CSEBENCH_SHARED``) unless ``senteval`` names them. Nothing is written.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class STSResult:
    """Spearman x100 per task (STS12-16 in SentEval's "all" setting, STS-B test, SICK-R test), their average."""

    tasks: dict[str, float]
    avg: float | None
    pooler: str | None  # None: an encode function, whose vectors are scored as it returns them
    protocol: str  # "full" or "capped" (max_pairs: a seeded subset, never comparable to published numbers)
    details: dict = field(default_factory=dict, repr=False)  # the evaluator's whole result (per-subset scores)
    pooler_origin: str = ""  # why that pooler: pooler=, the saved run's, the model's own (and the file), ...


@dataclass(frozen=True)
class TransferResult:
    """Accuracy x100 per SentEval transfer task (SimCSE's "test" mode), their average."""

    tasks: dict[str, float]
    avg: float | None
    pooler: str | None
    protocol: str
    details: dict = field(default_factory=dict, repr=False)
    pooler_origin: str = ""


def _params_of(params: str | os.PathLike | None) -> Callable:
    """The params whose backbone names and paths.shared the call reads, loaded on first use and once per call:
    ``params`` when given (an error naming it where it is not there), else the params.yaml of the checkout
    csebench is installed from (csebench.study.params.installed_checkout), whatever the current folder, else the
    one a wheel of csebench carries (packaged_params_file); None where there is none. Never the current folder's
    params.yaml: another project's (DVC's default name) would be read as csebench's."""
    import functools

    from csebench.study.params import installed_checkout, packaged_params_file
    from csebench.study.typed import Params

    def load():
        if params is not None:
            if not os.path.isfile(params):
                from csebench.core.errors import ConfigError

                raise ConfigError(f"params={str(params)!r}: no such file ({os.path.abspath(params)}); leave it out to "
                                  "read the params.yaml of the checkout csebench is installed from")
            return Params.load(params)
        checkout = installed_checkout()
        if checkout is not None:
            return Params.load(checkout / "params.yaml")
        packaged = packaged_params_file()
        return Params.load(packaged) if packaged is not None else None

    return functools.cache(load)


def _senteval(senteval: str | os.PathLike | None, params: Callable):
    """``senteval`` when given; else $CSEBENCH_SHARED/senteval; else paths.shared/senteval of the params read
    (a relative paths.shared beside that params.yaml: ../shared beside the checkout)."""
    from csebench.core.errors import DataError
    from csebench.evaluation.locate import senteval_root
    from csebench.study.params import SHARED_ENV, packaged_params_file
    from csebench.study.typed import Params

    if senteval is None:
        found = params()
        packaged = found is not None and found.file == str(packaged_params_file())
        if (found is None or packaged) and not os.environ.get(SHARED_ENV):  # a wheel's params.yaml: no folder beside it
            raise DataError(f"no senteval= given, ${SHARED_ENV} not set, and csebench is not installed from a checkout "
                            "with the shared data beside it: pass senteval=FOLDER (SentEval's data folder) or set "
                            f"${SHARED_ENV}")
        senteval = Params.of(found).shared_senteval("no senteval= given and", "pass senteval=FOLDER", beside_file=True)
    return senteval_root(senteval)


@contextlib.contextmanager
def _quiet(verbose: bool):
    """transformers' load reports (the unused BERT pooler of MiniLM: "LOAD REPORT ... UNEXPECTED") and the hub's
    and transformers' progress bars kept out of the caller's output for the call, as the command line does;
    the caller's settings are back afterwards. ``verbose``: left as the caller has them."""
    if verbose:
        yield
        return
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    level, bars, hub_bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    disable_progress_bars()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
        if not hub_bars:
            enable_progress_bars()


ST_MODES = {"mean": "avg", "cls": "cls_before_pooler"}  # sentence-transformers' Pooling modes as csebench's poolers


def _own_pooling(model: Any) -> tuple[str | None, str]:
    """The pooler of an object with encode() and why: a sentence-transformers model's Pooling module, which its
    encode() applies; an encode function's vectors are scored as it returns them."""
    for module in (getattr(model, "_modules", None) or {}).values():
        if type(module).__name__ != "Pooling":
            continue
        read = getattr(module, "get_pooling_mode_str", None)  # sentence-transformers 3-5; 6: pooling_mode
        name = read() if callable(read) else getattr(module, "pooling_mode", None)
        name = "+".join(name) if isinstance(name, (list, tuple)) else str(name)
        return ST_MODES.get(name, name), f"the {type(model).__name__}'s own Pooling module (mode {name}), which its encode() applies"
    what = "an encode function" if not hasattr(model, "encode") else f"{type(model).__name__}.encode"
    return None, f"{what}: its vectors scored as it returns them (csebench pools nothing)"


def _encoder(model: Any, pooler: str | None, batch_size: int | None, precision: str,
             params: Callable) -> tuple[Callable, str | None, str]:
    """An encode function (sentences -> (n, d) tensor), the pooler it uses and why."""
    from csebench.core.errors import ConfigError
    from csebench.evaluation.embeddings import encode_with
    from csebench.model.encoder import SentenceEncoder, resolve_pooler

    if isinstance(model, SentenceEncoder):
        origin = "the encoder's own pooler"
        if pooler is not None:
            model.pooler, origin = ("cls_before_pooler" if pooler == "cls" else pooler), "pooler="
        return encode_with(model, batch_size, precision, False), model.pooler, origin
    if isinstance(model, (str, os.PathLike)):
        from csebench.evaluation.embeddings import model_encoder
        from csebench.study.params import may_name_backbone

        name = str(model)
        named = params().backbone_model(name) if may_name_backbone(name) and params() is not None else None
        try:
            used, origin = resolve_pooler(named or name, pooler)
            encode = model_encoder(named or name, pooler, batch_size, precision)
        except ConfigError as exc:
            if named is None and may_name_backbone(name):  # a bare word: say which backbone names were read
                found = params()
                names = (f"it is no backbone name of {found.file} ({', '.join(found.backbones)})" if found is not None
                         else "no params.yaml was found to read backbone names from (csebench is neither installed from "
                              "a checkout nor from a wheel that carries one; pass params=FILE)")
                raise ConfigError(f"{exc}; {names}") from None
            raise
        return encode, used, origin
    encode = getattr(model, "encode", model)
    if not callable(encode):
        raise ConfigError(f"model: a name or path, a csebench encoder, an object with encode(), or a function; got {type(model).__name__}")
    if pooler is not None:
        raise ConfigError(f"pooler={pooler!r}: a name, a path or a csebench encoder is pooled as told; an object "
                          f"with encode() or a function (here {type(model).__name__}) gives its own vectors")
    used, origin = _own_pooling(model)

    def wrapped(sentences: list[str]):
        return encode(list(sentences))  # as it came: the evaluator checks it before any score (evaluation.encoded)

    return wrapped, used, origin


def evaluate_sts(model: Any, senteval: str | os.PathLike | None = None, pooler: str | None = None,
                 batch_size: int | None = None, precision: str = "fp32", max_pairs: int | None = None,
                 params: str | os.PathLike | None = None, verbose: bool = False) -> STSResult:
    """The 7 STS tasks as the papers score them. ``pooler`` None: the saved run's, else the model's own
    declared pooling, else cls_before_pooler (csebench.model.encoder.resolve_pooler); the result says which and
    why. ``max_pairs``: a seeded subset of each task (a quick look; the result says protocol "capped").
    ``params``: the params.yaml whose backbone names and paths.shared are read (default: the checkout csebench
    is installed from). ``verbose``: transformers' own messages (load reports, progress bars) as it prints them."""
    from csebench.evaluation.sts import evaluate_sts as run

    params_of = _params_of(params)
    with _quiet(verbose):
        encode, used, origin = _encoder(model, pooler, batch_size, precision, params_of)
        res = run(encode, _senteval(senteval, params_of), max_pairs=max_pairs)
    return STSResult(tasks=dict(res["tasks"]), avg=res.get("avg"), pooler=used,
                     protocol=res.get("protocol", "full"), details=res, pooler_origin=origin)


def evaluate_transfer(model: Any, senteval: str | os.PathLike | None = None, pooler: str | None = None,
                      tasks: list[str] | None = None, batch_size: int | None = None, precision: str = "fp32",
                      max_train_sentences: int | None = None, max_test_sentences: int | None = None,
                      params: str | os.PathLike | None = None, verbose: bool = False) -> TransferResult:
    """SentEval's transfer tasks (MR CR SUBJ MPQA SST2 TREC MRPC, or ``tasks``) in SimCSE's test mode; the caps
    subsample the classifiers' training and held-out sets (protocol "capped"). The rest as evaluate_sts."""
    from csebench.evaluation.transfer import evaluate_transfer as run

    params_of = _params_of(params)
    with _quiet(verbose):
        encode, used, origin = _encoder(model, pooler, batch_size, precision, params_of)
        res = run(encode, _senteval(senteval, params_of), tasks=tasks, max_train_sentences=max_train_sentences,
                  max_test_sentences=max_test_sentences)
    return TransferResult(tasks=dict(res["tasks"]), avg=res.get("avg", res.get("avg_subset")), pooler=used,
                          protocol=res.get("protocol", "full"), details=res, pooler_origin=origin)
