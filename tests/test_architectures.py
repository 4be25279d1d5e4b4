"""The paper backbones' architecture facts, the rehearsal's offline tokenizers and models (csebench.model.standins),
every run of the default target resolved and built, and one run of each architecture class (BERT-base,
BERT-large, RoBERTa-base, RoBERTa-large) at its real shape through the real Trainer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from csebench.model.architectures import ARCHITECTURES, architecture
from csebench.model.standins import activate, build_model, depth_for, train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "A man is playing a guitar on the stage."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, shared_dir):
    """The first 4000 demo sentences: enough for both offline tokenizers, trained in about a second."""
    lines = (shared_dir / "corpus" / "demo-sentences.txt").read_text(encoding="utf-8").splitlines()[:4000]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def rehearsing(tmp_path_factory, corpus):
    with activate(tmp_path_factory.mktemp("tokenizers"), corpus) as r:
        yield r


def test_facts_are_the_published_configs_and_plan_counts():
    """The facts as the hub's config.json files state them, the parameter counts csebench.results.plan costs with,
    and the models built from them (on the meta device: no memory, no time)."""
    from csebench.results.plan import BACKBONE_PARAMS

    published = {"bert-base-uncased": (12, 768, 12, 3072, 30522, 512, 2, 1e-12, 109_482_240),
                 "bert-large-uncased": (24, 1024, 16, 4096, 30522, 512, 2, 1e-12, 335_141_888),
                 "roberta-base": (12, 768, 12, 3072, 50265, 514, 1, 1e-5, 124_645_632),
                 "roberta-large": (24, 1024, 16, 4096, 50265, 514, 1, 1e-5, 355_359_744)}
    for model, (layers, hidden, heads, ffn, vocab, positions, types, eps, total) in published.items():
        a = ARCHITECTURES[model]
        assert (a.layers, a.hidden, a.heads, a.ffn, a.vocab, a.max_positions, a.type_vocab, a.layer_norm_eps) == \
            (layers, hidden, heads, ffn, vocab, positions, types, eps), model
        assert a.parameters()[0] == total, model
        assert BACKBONE_PARAMS[model] == tuple(float(n) for n in a.parameters())
        with torch.device("meta"):
            built = build_model(a)
        assert built.__class__.__name__ == a.model_class
        assert sum(p.numel() for p in built.parameters()) == total, model
        assert len(built.encoder.layer) == layers and built.config.num_attention_heads == heads
        assert built.embeddings.word_embeddings.padding_idx == a.pad_id
    assert ARCHITECTURES["roberta-base"].special_tokens == {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 50264}
    assert ARCHITECTURES["bert-base-uncased"].pad_id == 0 and ARCHITECTURES["roberta-large"].pad_id == 1
    assert architecture("FacebookAI/roberta-large") is ARCHITECTURES["roberta-large"]
    assert architecture("packaged:minilm") is None and architecture("random") is None


@pytest.mark.parametrize("model", ["bert-base-uncased", "roberta-base"])
def test_a_stand_in_s_weights_are_drawn_once_by_its_class(model, monkeypatch):
    """build_model draws the weights once, with the class's own initialisation (normal with std initializer_range,
    biases 0, LayerNorm 1 and 0, the padding row 0), not first with torch's Kaiming draw that the class then
    overwrites; the same seed gives the same weights, and its buffers are the constructor's."""
    from transformers import BertModel, RobertaModel

    from csebench.model.standins import model_config

    def drawn(*args, **kwargs):
        raise AssertionError("torch's default Linear initialisation ran: the weights were drawn twice")

    a = ARCHITECTURES[model]
    shape = {"hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128}
    with monkeypatch.context() as m:
        m.setattr(torch.nn.init, "kaiming_uniform_", drawn)
        built = build_model(a, seed=3, depth=2, shape=shape)
    again = build_model(a, seed=3, depth=2, shape=shape).state_dict()
    std = built.config.initializer_range
    for name, p in built.named_parameters():
        assert torch.equal(p, again[name]), name
        if name.endswith("LayerNorm.weight"):
            assert torch.equal(p, torch.ones_like(p)), name
        elif name.endswith("bias"):
            assert torch.equal(p, torch.zeros_like(p)), name
        else:  # Linear and Embedding weights: N(0, initializer_range)
            assert abs(p.std().item() - std) < 0.15 * std and abs(p.mean().item()) < 0.1 * std, name
    assert torch.equal(built.embeddings.word_embeddings.weight[a.pad_id], torch.zeros(64))
    cls = BertModel if a.family == "bert" else RobertaModel
    plain = dict(cls(model_config(a, depth=2, shape=shape), add_pooling_layer=True).named_buffers())
    buffers = dict(built.named_buffers())
    assert buffers.keys() == plain.keys()
    for k, v in plain.items():
        assert torch.equal(v, buffers[k]), k


def test_offline_tokenizers_are_of_the_right_kind(corpus, tmp_path):
    from transformers import AutoTokenizer

    sentences = corpus.read_text(encoding="utf-8").splitlines()
    bert, roberta = train_tokenizer("bert", sentences), train_tokenizer("roberta", sentences)
    facts = ARCHITECTURES["bert-base-uncased"].special_tokens
    assert {t: bert.convert_tokens_to_ids(t) for t in facts} == facts  # bert-base-uncased's own ids
    ids = bert(SENTENCE)["input_ids"]
    assert ids[0] == 101 and ids[-1] == 102 and len(ids) > 4
    assert bert.tokenize("Guitar") == bert.tokenize("guitar")  # uncased
    facts = ARCHITECTURES["roberta-base"].special_tokens
    assert [roberta.bos_token_id, roberta.pad_token_id, roberta.eos_token_id, roberta.unk_token_id] == [0, 1, 2, 3]
    assert roberta.mask_token_id == len(roberta) - 1 < ARCHITECTURES["roberta-base"].vocab
    enc = roberta(SENTENCE)
    # transformers 5's trap: vocab_file=/merges_file= are ignored and every sentence becomes <s></s>
    assert len(enc["input_ids"]) > 4 and enc["input_ids"][0] == facts["<s>"] and enc["input_ids"][-1] == facts["</s>"]
    assert "token_type_ids" not in enc
    assert roberta.decode(enc["input_ids"], skip_special_tokens=True) == SENTENCE  # byte-level: lossless
    for tok, kind in ((bert, "BertTokenizer"), (roberta, "RobertaTokenizer")):
        tok.save_pretrained(tmp_path / kind)
        again = AutoTokenizer.from_pretrained(str(tmp_path / kind))
        assert again.__class__.__name__ == kind and again(SENTENCE)["input_ids"] == tok(SENTENCE)["input_ids"]


def test_rehearsal_backbones_and_depth(rehearsing):
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_encoder, load_tokenizer

    tok = load_tokenizer(BackboneConfig(model="roberta-base"))
    assert tok.__class__.__name__ == "RobertaTokenizer" and tok.pad_token_id == 1
    assert load_tokenizer(BackboneConfig(model="bert-large-uncased")).__class__.__name__ == "BertTokenizer"
    rehearsing.depth = 2
    try:
        enc = build_encoder(BackboneConfig(model="roberta-large", pooler="cls"), dropout=0.2)
        again = build_encoder(BackboneConfig(model="roberta-large", pooler="cls"), seed=7)
    finally:
        rehearsing.depth = None
    assert enc.backbone.__class__.__name__ == "RobertaModel" and enc.num_layers == 2 and enc.hidden_size == 1024
    assert enc.backbone.config.hidden_dropout_prob == 0.2 and enc.backbone.pooler is None and enc.backbone.pooler_weights
    # the same "pretrained" weights whatever the run's seed, as a hub checkpoint's
    assert torch.equal(enc.backbone.embeddings.word_embeddings.weight, again.backbone.embeddings.word_embeddings.weight)
    # a model that is not one of the four is left alone
    assert load_tokenizer(BackboneConfig(model="random")).__class__.__name__ != "RobertaTokenizer"


def _cfg(**training):
    from types import SimpleNamespace

    from csebench.study.params import BackboneConfig, TrainingConfig

    return SimpleNamespace(backbone=BackboneConfig(model="bert-base-uncased"), training=TrainingConfig(**training),
                           objectives={})


def test_weights_stay_where_a_reader_shares_the_rehearsed_folder():
    """The first full `make rehearse` dropped paper/bert-base-simcse's weights after its evaluation, though
    paper-distillcse's model-correlation read them: its teacher run is another run of the target (another key)
    whose key under the rehearsal's sizes is the same, so both are one folder."""
    from csebench.workflow.rehearse import weights_read_later

    rehearsal_key = {"bert-base-simcse": "K1", "teacher-seeded": "K1", "other": "K2"}.get
    key = lambda suite, run: rehearsal_key(run)  # noqa: E731
    listings = [("paper", "bert-base-simcse", 42)]
    assert weights_read_later(listings, {("paper-distillcse", "teacher-seeded")}, key)
    assert weights_read_later(listings, {("paper", "bert-base-simcse")}, key)  # a reader among the listings
    assert not weights_read_later(listings, {("paper-distillcse", "other")}, key)
    assert not weights_read_later(listings, set(), key)


def test_depth_for_keeps_the_layers_a_run_uses():
    assert depth_for(_cfg(), 2) == 2 and depth_for(_cfg(), None) is None
    assert depth_for(_cfg(num_layers=10), 2) == 10
    c = _cfg()
    c.objectives = {"layer_negatives": {"layer": 9, "stacked": 1}}
    assert depth_for(c, 2) == 10
    c.objectives = {"layer_negatives": {"layer": None, "stacked": 3}}
    assert depth_for(c, 2) == 4
    c.objectives = {"layer_negatives": {"layer": 12, "stacked": 1}}  # past the 12 layers: built whole, so it fails as it would
    assert depth_for(c, 2) is None


def test_every_run_of_the_default_target_resolves_and_builds(rehearsing):
    """Every run of the default target resolves, and its model and objective terms build: the real class at the
    published width, at the depth its settings need (csebench.model.standins.depth_for); models alike in every
    setting that shapes them are built once. On the meta device: the classes, shapes and terms are built, no weights
    drawn (drawing them was 20 of this test's 25 s; the real-shape tests below train one run of each class with
    weights, and `make rehearse` every run)."""
    from csebench.study.jobs import all_runs_with_teachers, runs_of
    from csebench.study.resolve import resolve_run
    from csebench.model.encoder import build_encoder
    from csebench.objectives.compose import Objective
    from csebench.workflow.rehearse import distinct_runs
    from csebench.results.registry import default_suites

    from csebench.study.typed import Params

    params = Params.load(ROOT / "params.yaml")
    suites = default_suites(params)
    groups = distinct_runs(params, suites)  # resolves every run of every suite (all seeds)
    keys = {runs_of(params).key(s, r) for s in suites for r, _ in all_runs_with_teachers(params, s)}
    assert len(groups) == len(keys) > 100  # no two runs of the target differ only in their learning rate today
    from csebench.objectives import term_class

    built: dict[tuple, tuple[int, int, str]] = {}
    encoders: dict[tuple, object] = {}  # kept only for shapes whose terms need the encoder itself (ESimCSE, PromptBERT)
    for g in groups:
        cfg = resolve_run(params, *g.first)
        arch = architecture(cfg.backbone.model)
        assert arch is not None, f"{g.first}: {cfg.backbone.model} is not a paper backbone"
        t = cfg.training
        depth = depth_for(cfg, 1)
        shape = (cfg.backbone.model, cfg.backbone.pooler, t.dropout, t.projection_dim, t.projection_head, t.num_layers, depth)
        # the terms that read data on disk (teacher caches, the corpus's negations) build in the rehearsal
        terms = {k: v for k, v in cfg.objectives.items()
                 if not {"teacher_cache", "corpus_path"} & set(term_class(k).extra_init_args)}
        wants_encoder = any("encoder" in term_class(k).extra_init_args for k in terms)
        if shape not in built or (wants_encoder and shape not in encoders):
            rehearsing.depth = depth
            try:
                with torch.device("meta"):
                    enc = build_encoder(cfg.backbone, seed=cfg.seed, dropout=t.dropout, projection_dim=t.projection_dim,
                                        num_layers=t.num_layers, projection_head=t.projection_head)
            finally:
                rehearsing.depth = None
            assert enc.hidden_size == arch.hidden and enc.backbone.config.num_attention_heads == arch.heads
            assert all(p.is_meta for p in enc.parameters())
            built[shape] = (enc.out_dim, enc.num_layers, enc.backbone.__class__.__name__)
            if wants_encoder:
                encoders[shape] = enc
            del enc
        out_dim, layers, cls = built[shape]
        assert cls == arch.model_class
        with torch.device("meta"):
            Objective(terms, out_dim, layers, run_config=cfg, corpus_size=1000, encoder=encoders.get(shape))
    assert {c for _, _, c in built.values()} == {"BertModel", "RobertaModel"}


# ----------------------------------------------------------------------------- one run per class, real shapes

CLASS_RUNS = {"bert-base": "bert-base-uncased", "bert-large": "bert-large-uncased",
              "roberta-base": "roberta-base", "roberta-large": "roberta-large"}


@pytest.fixture(scope="module")
def small_senteval(tmp_path_factory, shared_dir):
    from csebench.workflow.rehearse import write_senteval

    # 6 lines: STS-B dev 6 pairs and SICK-R dev 5 to score, half of the 12 lines' (~1 CPU-s less for a large model)
    return write_senteval(shared_dir / "senteval", tmp_path_factory.mktemp("senteval"), lines=6) / "downstream"


@pytest.mark.slow(seconds=16)
@pytest.mark.parametrize("backbone", list(CLASS_RUNS))
def test_one_run_of_each_class_at_its_real_shape(backbone, rehearsing, small_senteval, tmp_path, monkeypatch, corpus):
    """The published shape (12/24 layers, 768/1024 wide, 12/16 heads) through the real Trainer with three
    objective terms (GS-InfoNCE + IS-CSE + SSCL): 2 steps of batch 2 (the base models: the first attempt
    stopped after its checkpoint and resumed; a large model's checkpoint is 4 GB, written in `make rehearse`
    at 2 layers); then the saved folder reloads, pads and positions as its class does."""
    import gc

    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from csebench.model.encoder import load_encoder
    from csebench.core.io import read_json
    from csebench.workflow.rehearse import _stop_after_checkpoint
    from csebench.training.trainer import Trainer

    monkeypatch.setenv("CSEBENCH_DATA_CHECK", "0")
    over = tmp_path / "over.yaml"
    resume = "large" not in backbone
    training = {"max_steps": 2, "eval_steps": 2, "checkpoint_steps": 1 if resume else 100, "log_steps": 1, "batch_size": 2,
                "max_seq_length": 8, "dev_max_pairs": 4, "eval_batch_size": 8, "learning_rate": 1.0e-5}
    over.write_text(json.dumps({"suites": {"one": {"data": "ci", "seeds": [1], "training": training, "runs": {
        "run": {"backbone": backbone, "method": "three", "objectives": {"instance_smoothing": {"buffer_size": 8, "neighbors": 2}}}}}},
        "methods": {"three": {"compose": ["gs_infonce", "iscse", "sscl"], "training": {"batch_size": 2, "max_seq_length": 8}}}}))
    cfg = resolve_run(load_params(ROOT / "params.yaml", [over]), "one", "run", 1)
    assert set(cfg.objectives) == {"gaussian_negatives", "instance_smoothing", "layer_negatives"}
    small = tmp_path / "corpus.txt"
    small.write_text("\n".join(corpus.read_text(encoding="utf-8").splitlines()[:8]) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    if resume:
        assert _stop_after_checkpoint(cfg, small, small_senteval, out, None, []) == 1
    trainer = Trainer(cfg, small, small_senteval, out, show_progress=False)
    arch = architecture(CLASS_RUNS[backbone])
    bb = trainer.encoder.backbone
    assert (bb.__class__.__name__, trainer.encoder.num_layers, trainer.encoder.hidden_size,
            bb.config.num_attention_heads, bb.config.intermediate_size, bb.config.vocab_size) == \
        (arch.model_class, arch.layers, arch.hidden, arch.heads, arch.ffn, arch.vocab)
    summary = trainer.run()
    del trainer, bb
    gc.collect()  # one large model at a time
    timing = read_json(out / "train_timing.json")
    assert timing["resumed_from_step"] == (1 if resume else None) and timing["steps_this_attempt"] == (1 if resume else 2)
    assert summary["steps"] == 2 and math.isfinite(summary["stsb_dev_best"])
    rows = (out / "train_curve.csv").read_text().splitlines()
    assert len(rows) == 3 and all(math.isfinite(float(x)) for row in rows[1:] for x in row.split(",")[1:] if x)
    assert read_json(out / "train.json")["provenance"]["rehearsal"]["depth"] == "published"

    enc = load_encoder(out / "model")  # as evaluation loads it
    assert enc.backbone.__class__.__name__ == arch.model_class and enc.num_layers == arch.layers
    tok = enc.tokenizer
    batch = tok(["a short one", SENTENCE], padding=True, return_tensors="pt")
    assert tok.pad_token_id == arch.pad_id and batch["input_ids"][0, -1] == arch.pad_id
    assert batch["input_ids"][0, 0] == (arch.special_tokens["<s>"] if arch.family == "roberta" else 101)
    assert ("token_type_ids" in batch) == (arch.family == "bert")
    if arch.family == "roberta":  # positions start after the padding index; padding keeps it
        from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

        pos = RobertaEmbeddings.create_position_ids_from_input_ids(batch["input_ids"], arch.pad_id)
        assert pos[1, 0] == arch.pad_id + 1 and pos[0, -1] == arch.pad_id
    emb = enc.encode(["a short one", SENTENCE], batch_size=2)
    assert emb.shape == (2, arch.hidden) and torch.isfinite(emb).all()
    enc.eval()
    with torch.no_grad():  # the cls pooler is the <s> / [CLS] row of the last layer
        hidden = enc.backbone(**{k: v for k, v in batch.items() if k != "token_type_ids"}).last_hidden_state
    assert torch.allclose(emb[1], hidden[1, 0], atol=1e-4)


def test_rehearse_refuses_an_unknown_suite_before_writing_anything(tmp_path, capsys):
    """`rehearse --suites cii` printed `csebench rehearse: error: rehearse: unknown suite 'cii'` (no suggestion, the
    prefix twice) and left its --out folder with an empty rehearse.log."""
    from runhelpers import assert_fails

    out = tmp_path / "rehearsal"
    assert_fails(capsys, ["rehearse", "--suites", "ci", "cii", "--out", str(out)],
                 "csebench rehearse: error: --suites: unknown suite 'cii' (did you mean 'ci'?)\n")
    assert not out.exists()
    assert_fails(capsys, ["rehearse", "--suites", "ci", "--only", "nope", "--out", str(out)],
                 "csebench rehearse: error: --only nope: no run of ci is listed as SUITE/RUN containing it")
    assert not out.exists()


def test_generators_are_their_published_configs_and_rehearse_at_them(rehearsing):
    """DiffCSE's masked-LM generators (csebench.model.architectures.GENERATORS): the hub config.json facts, the counts
    csebench.results.plan costs with, and the models a rehearsal builds for them (random weights, the real class)."""
    from csebench.model.architectures import GENERATORS, generator_architecture
    from csebench.objectives.replaced_tokens import load_generator
    from csebench.model.standins import generator_for

    published = {"distilbert-base-uncased": ("DistilBertForMaskedLM", 6, 768, 12, 3072, 30522, 512, 66_362_880),
                 "distilroberta-base": ("RobertaForMaskedLM", 6, 768, 12, 3072, 50265, 514, None)}
    for model, (cls, layers, hidden, heads, ffn, vocab, positions, base_total) in published.items():
        a = GENERATORS[model]
        assert (a.mlm_class, a.layers, a.hidden, a.heads, a.ffn, a.vocab, a.max_positions) == \
            (cls, layers, hidden, heads, ffn, vocab, positions), model
        assert generator_architecture(f"distilbert/{model}") is a
        with torch.device("meta"):
            built = generator_for(model)  # a rehearsal is active: the published architecture
        assert built.__class__.__name__ == cls
        base = built.distilbert if cls.startswith("DistilBert") else built.roberta
        assert sum(p.numel() for p in base.parameters()) == a.parameters(pooler=False)[0], model
        if base_total:
            assert a.parameters(pooler=False)[0] == base_total
        assert built.config.vocab_size == vocab
    assert generator_for("bert-base-uncased") is None and architecture("distilroberta-base") is None
    rehearsing.depth = 2
    try:
        gen = load_generator("distilbert-base-uncased", tokenizer=None)
    finally:
        rehearsing.depth = None
    assert gen.__class__.__name__ == "DistilBertForMaskedLM" and gen.config.n_layers == 2
