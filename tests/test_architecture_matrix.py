"""Every architecture x every method of params.yaml: a tiny random model of each transformers architecture csebench
trains (tests/runhelpers.TINY_ARCHITECTURES: 3 layers, hidden 32) trains two steps of every method, through the
trainer itself (the run a suite of params.yaml would resolve, as `csebench train --backbone DIR --method M` does);
where the method's positives come from dropout the first step found its two views different; and the saved folder
reloads in sentence-transformers with the embeddings csebench computes.

Cheap by construction: the folders, tokenizers and teacher caches are built once for the module, each cell resolves
its run from one loaded params, trains at batch 4 on rows of at most 16 tokens, and saves as a run saves."""

from __future__ import annotations

import copy
import logging

import pytest

from csebench.study.teacherspec import teacher_representation
from runhelpers import PARAMS, TINY_ARCHITECTURES, tiny_tokenizers, write_corpus, write_mini_senteval, write_tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")

SEED = 1
STEPS = 2
SENTENCES = ["A man is playing a guitar.", "two dogs run on the beach", "Hello!"]
TEACHER_TERMS = ("distillation", "debiased_negatives", "ranking_distillation")  # read frozen teachers' caches


# every architecture of the table but DeBERTa v1, whose attention and dropout names are DeBERTa-v2's in kind
# (tests/test_dropout.py and tests/test_packed.py cover it)
ARCHITECTURES = [mt for mt in TINY_ARCHITECTURES if mt != "deberta"]


def _methods() -> list[str]:
    import yaml

    return list(yaml.safe_load(PARAMS.read_text(encoding="utf-8"))["methods"])


METHODS = _methods()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The module's inputs: a corpus, a mini SentEval, a tiny model folder and a teacher cache per architecture, and
    the params every cell resolves its run from (a suite per architecture, listing every method)."""
    import numpy as np

    from csebench.study.typed import Params
    from csebench.training.teachers import build_teacher_cache, save_teacher_cache

    tmp = tmp_path_factory.mktemp("matrix")
    corpus = write_corpus(tmp / "corpus.txt", 24)
    senteval = write_mini_senteval(tmp / "se", pairs=8)
    tokenizers = tiny_tokenizers(tmp / "corpus.txt")
    folders = {mt: write_tiny_model(tmp / mt, mt, tokenizers) for mt in ARCHITECTURES}
    # a teacher cache per architecture (a teacher shares its student's tokenizer): the untrained folder's, its rows
    # then drawn at random on the sphere, spread as a trained SimCSE's are (an untrained tiny model's are all alike:
    # cosines above DCLR's threshold leave no negative, which is not what this matrix is about)
    caches, g = {}, np.random.default_rng(0)
    for mt, folder in folders.items():
        meta = build_teacher_cache(folder, corpus, tmp / f"teacher-{mt}.npy", max_seq_length=16)
        rows = g.standard_normal((meta["rows"], meta["dim"]))
        rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        for rep in ("eval", "training"):  # DCLR reads its teacher through the saved head (teacher_representation)
            save_teacher_cache(tmp / f"teacher-{mt}-{rep}.npy", rows, {**meta, "representation": rep})
            caches[mt, rep] = str(tmp / f"teacher-{mt}-{rep}.npy")
    raw = Params.load(PARAMS).raw_copy()
    raw["backbones"] = {mt: {"model": str(folder), "pooler": "cls"} for mt, folder in folders.items()}
    raw["data"]["matrix"] = {"corpus": {"path": str(corpus)}, "senteval": {"path": str(senteval)}}
    raw["suites"] = {}
    for mt in ARCHITECTURES:  # a suite per architecture: resolving a run reads its whole suite
        runs = []
        for method in METHODS:
            run = {"name": f"{mt}-{method}", "backbone": mt, "method": method,
                   "training": {"batch_size": 4, "max_seq_length": 16, "max_steps": STEPS, "eval_steps": STEPS}}
            objectives = _objectives(raw, method, mt)
            if objectives:
                run["objectives"] = objectives
            runs.append(run)
        raw["suites"][mt] = {"data": "matrix", "seeds": [SEED], "runs": runs}
    return {"tmp": tmp, "corpus": corpus, "senteval": senteval, "folders": folders, "caches": caches,
            "params": Params(raw), "forms": {}}


def _terms(raw: dict, method: str) -> set[str]:
    spec = raw["methods"][method]
    if "compose" in spec:
        return set().union(*(_terms(raw, m) for m in spec["compose"]))
    return set(spec.get("objectives") or {})


def _objectives(raw: dict, method: str, model_type: str) -> dict:
    """The run's own objective settings: its teachers (the same architecture's SimCSE run, whose cache stands in) and
    a tiny random generator for DiffCSE (the hub's distilbert is not offline)."""
    out = {}
    for term in _terms(raw, method):
        if term in TEACHER_TERMS:
            out[term] = {"teachers": {"run": f"{model_type}-simcse", "seeds": [SEED]}}
        if term == "replaced_token_detection":
            out[term] = {"generator": "random"}
    return out


@pytest.fixture(scope="module", autouse=True)
def loaded_once(world):
    """Each architecture's folder read once: transformers' from_pretrained of a folder of the module (its config,
    tokenizer, and its model under each config the runs apply, dropout included) answers a copy of what it read the
    first time. What the trainer does with them, and every saved folder's reload, is the real thing."""
    import transformers

    folders = {str(f) for f in world["folders"].values()}
    patched = {}
    for cls in (transformers.AutoConfig, transformers.AutoTokenizer, transformers.AutoModel):
        real = cls.from_pretrained
        cache = {}

        def cached(path, *args, _real=real, _cache=cache, _copy=cls is not transformers.AutoTokenizer, **kwargs):
            if str(path) not in folders or args:
                return _real(path, *args, **kwargs)
            config = kwargs.get("config")
            key = (str(path), config.to_json_string() if config is not None else None,
                   tuple(sorted((k, str(v)) for k, v in kwargs.items() if k != "config")))
            if key not in _cache:
                _cache[key] = _real(path, **kwargs)
            return copy.deepcopy(_cache[key]) if _copy else _cache[key]

        patched[cls] = real
        cls.from_pretrained = cached
    yield
    for cls, real in patched.items():
        cls.from_pretrained = real


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("model_type", ARCHITECTURES)
def test_every_method_trains_on_every_architecture(world, model_type, method, caplog):
    from csebench.objectives import own_positives
    from csebench.training.trainer import Trainer

    suite = world["params"].suite(model_type)
    cfg = suite.resolve(f"{model_type}-{method}", SEED)
    rep = teacher_representation(cfg.objectives)
    teachers = [world["caches"][model_type, rep]] if set(cfg.objectives) & set(TEACHER_TERMS) else []
    out = world["tmp"] / "runs" / f"{model_type}-{method}"
    trainer = Trainer(cfg, world["corpus"], world["senteval"], out, cache_dir=world["tmp"] / "cache",
                      show_progress=False, teacher_cache=teachers)
    try:
        losses = trainer.step_losses(STEPS)
    finally:
        trainer.close()  # driven step by step: the process's determinism settings back
    assert len(losses) == STEPS and all(l == l and abs(l) < 1e4 for l in losses)
    record = trainer.dropout_record
    if not own_positives(cfg.objectives) and cfg.training.dropout != 0:  # positives from dropout alone
        assert trainer.views_difference is not None and trainer.views_difference > 1e-3
    if cfg.training.dropout is None:
        assert record["p"] == 0.1 and set(record["config"].values()) == {0.1} and set(record["modules"]) == {"0.1"}
    saved = out / "model"
    trainer.encoder.save(saved)
    _same_embeddings(world, trainer.encoder, saved)


def _form(folder) -> tuple:
    """A saved folder's files other than its weights, by content: two folders of one form differ in weights only (the
    backbone's, and the training head's, which sentence-transformers does not read)."""
    import hashlib

    from csebench.model.encoder import HEAD_FILE

    return tuple(sorted((p.relative_to(folder).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest())
                        for p in folder.rglob("*") if p.is_file() and p.name not in ("model.safetensors", HEAD_FILE)))


def _same_embeddings(world, encoder, folder):
    """sentence-transformers' embeddings of the saved folder are csebench's (a template method's are not: the
    template is csebench's, which sentence-transformers does not apply; docs/methods.md, PromptBERT). The first folder of each
    form is loaded by SentenceTransformer(folder); a later one of the same form has its weights loaded into that model
    (every key, strictly): the same embeddings as loading it anew, at a fraction of the cost."""
    import numpy as np
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    form = _form(folder)
    model = world["forms"].get(form)
    if model is None:
        model = world["forms"][form] = SentenceTransformer(str(folder), device="cpu")
    else:
        try:
            model[0].auto_model.load_state_dict(load_file(str(folder / "model.safetensors")), strict=True)
        except RuntimeError:  # saved under other names than the model's modules (transformers converts nomic-bert's)
            model = SentenceTransformer(str(folder), device="cpu")
    ours = encoder.encode(SENTENCES, precision="fp32").numpy()
    theirs = model.encode(SENTENCES, convert_to_numpy=True)
    assert ours.shape == theirs.shape
    if encoder.prompt:
        assert not np.allclose(ours, theirs, atol=1e-4)
    else:
        np.testing.assert_allclose(theirs, ours, atol=2e-5, rtol=1e-4)
