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

import os
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class STSResult:
    """Spearman x100 per task (STS12-16 in SentEval's "all" setting, STS-B test, SICK-R test), their average."""

    tasks: dict[str, float]
    avg: float | None
    pooler: str | None  # None: the model was a function or an encode() object, which pools as it does
    protocol: str  # "full" or "capped" (max_pairs: a seeded subset, never comparable to published numbers)
    details: dict = field(default_factory=dict, repr=False)  # the evaluator's whole result (per-subset scores)


@dataclass(frozen=True)
class TransferResult:
    """Accuracy x100 per SentEval transfer task (SimCSE's "test" mode), their average."""

    tasks: dict[str, float]
    avg: float | None
    pooler: str | None
    protocol: str
    details: dict = field(default_factory=dict, repr=False)


def _params_file(path: str) -> Callable:
    """params.yaml at ``path`` as a Params (or None where there is none), read on first use and once per call."""
    import functools

    from csebench.study.typed import Params

    return functools.cache(lambda: Params.load(path) if os.path.isfile(path) else None)


def _senteval(senteval: str | os.PathLike | None, params: Callable):
    from csebench.study.typed import Params
    from csebench.evaluation.locate import senteval_root

    if senteval is None:
        senteval = Params.of(params()).shared_senteval("no senteval= given and", "pass senteval=...")
    return senteval_root(senteval)


def _encoder(model: Any, pooler: str | None, batch_size: int | None, precision: str,
             params: Callable) -> tuple[Callable, str | None]:
    """An encode function (sentences -> (n, d) tensor) and the pooler it uses."""
    from csebench.evaluation.embeddings import encode_with
    from csebench.model.encoder import SentenceEncoder, eval_pooler_of

    if isinstance(model, SentenceEncoder):
        if pooler is not None:
            model.pooler = "cls_before_pooler" if pooler == "cls" else pooler
        return encode_with(model, batch_size, precision, False), model.pooler
    if isinstance(model, (str, os.PathLike)):
        from csebench.study.params import may_name_backbone

        name = str(model)
        if may_name_backbone(name) and params() is not None:
            name = params().backbone_model(name) or name
        from csebench.evaluation.embeddings import model_encoder

        return model_encoder(name, pooler, batch_size, precision), eval_pooler_of(name, pooler)
    encode = getattr(model, "encode", model)
    if not callable(encode):
        from csebench.core.errors import ConfigError

        raise ConfigError(f"model: a name or path, a csebench encoder, an object with encode(), or a function; got {type(model).__name__}")

    def wrapped(sentences: list[str]):
        return encode(list(sentences))  # as it came: the evaluator checks it before any score (evaluation.encoded)

    return wrapped, None


def evaluate_sts(model: Any, senteval: str | os.PathLike | None = None, pooler: str | None = None,
                 batch_size: int | None = None, precision: str = "fp32", max_pairs: int | None = None,
                 params: str = "params.yaml") -> STSResult:
    """The 7 STS tasks as the papers score them. ``pooler`` None: the saved run's, else the model's own
    declared pooling, else cls_before_pooler (csebench.model.encoder.eval_pooler_of). ``max_pairs``: a seeded
    subset of each task (a quick look; the result says protocol "capped")."""
    from csebench.evaluation.sts import evaluate_sts as run

    params_of = _params_file(params)
    encode, used = _encoder(model, pooler, batch_size, precision, params_of)
    res = run(encode, _senteval(senteval, params_of), max_pairs=max_pairs)
    return STSResult(tasks=dict(res["tasks"]), avg=res.get("avg"), pooler=used,
                     protocol=res.get("protocol", "full"), details=res)


def evaluate_transfer(model: Any, senteval: str | os.PathLike | None = None, pooler: str | None = None,
                      tasks: list[str] | None = None, batch_size: int | None = None, precision: str = "fp32",
                      max_train_sentences: int | None = None, max_test_sentences: int | None = None,
                      params: str = "params.yaml") -> TransferResult:
    """SentEval's transfer tasks (MR CR SUBJ MPQA SST2 TREC MRPC, or ``tasks``) in SimCSE's test mode; the caps
    subsample the classifiers' training and held-out sets (protocol "capped")."""
    from csebench.evaluation.transfer import evaluate_transfer as run

    params_of = _params_file(params)
    encode, used = _encoder(model, pooler, batch_size, precision, params_of)
    res = run(encode, _senteval(senteval, params_of), tasks=tasks, max_train_sentences=max_train_sentences,
              max_test_sentences=max_test_sentences)
    return TransferResult(tasks=dict(res["tasks"]), avg=res.get("avg", res.get("avg_subset")), pooler=used,
                          protocol=res.get("protocol", "full"), details=res)
