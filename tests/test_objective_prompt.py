"""PromptBERT (objectives/prompt.py, csebench/model/prompts.py): the template wrapping against the released
code's list construction (kongds/Prompt-BERT train.py: bs + sentence + es, re-implemented from reading it),
the denoised representation against a direct per-sentence computation, BERT and RoBERTa, evaluation
inside the template after save/load, and a tiny-model training run."""

from __future__ import annotations

import pytest
import torch

from csebench.core.errors import ConfigError
from csebench.model.prompts import template_ids, template_only, wrap


@pytest.fixture(scope="module")
def roberta_tokenizer(shared_dir):
    """A byte-level BPE tokenizer learnt in a second from 2000 demo sentences (<s>=0, <pad>=1, </s>=2, <unk>=3,
    <mask>), as RoBERTa's: the rehearsal's stand-in builder (RobertaTokenizerFast(vocab_file=, merges_file=), which
    this fixture used, ignores its files in transformers 5 and knows only the special tokens)."""
    from csebench.model.standins import train_tokenizer

    lines = (shared_dir / "corpus" / "demo-sentences.txt").read_text(encoding="utf-8").splitlines()[:2000]
    tok = train_tokenizer("roberta", lines, vocab_size=600)
    assert len(tok("a sentence of words")["input_ids"]) > 3  # it knows words
    return tok


def released_wrap(tokenizer, sentence, prefix, suffix):
    """train.py: bs = encode(prefix)[:-1], es = encode(suffix)[1:], row = bs + encode(s, no specials) + es."""
    bs = tokenizer.encode(prefix)[:-1]
    es = tokenizer.encode(suffix)[1:]
    return bs + tokenizer.encode(sentence, add_special_tokens=False) + es


SENTENCES = ["a man plays a guitar .", "two dogs", "the quick brown fox jumps over the lazy dog again ."]


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_wrap_matches_the_released_construction(family, tokenizer, roberta_tokenizer):
    from csebench.objectives.prompt import TEMPLATES

    tok = tokenizer if family == "bert" else roberta_tokenizer
    for prefix, suffix in TEMPLATES[family]:
        # the released strings: *cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+* and its RoBERTa form
        released_prefix = prefix if family == "roberta" else " " + prefix
        pre, suf = template_ids(tok, prefix, suffix)
        enc = tok(SENTENCES, padding=True, return_tensors="pt")
        ids, mask, col = wrap(enc["input_ids"], enc["attention_mask"], pre, suf, tok.mask_token_id, tok.pad_token_id)
        for k, s in enumerate(SENTENCES):
            want = released_wrap(tok, s, released_prefix, suffix.replace("{mask}", tok.mask_token))
            n = int(mask[k].sum())
            assert ids[k, :n].tolist() == want and set(ids[k, n:].tolist()) <= {tok.pad_token_id}
            assert ids[k, col[k]] == tok.mask_token_id


def test_template_alone_has_the_positions_of_a_sentence_of_each_length(tokenizer):
    pre, suf = template_ids(tokenizer, 'This sentence of "', '" means {mask} .')
    ids, pos, col = template_only(pre, suf, tokenizer.mask_token_id, 101, 102, 4, 0, "cpu")
    assert ids[0].tolist() == [101, *pre, *suf, 102] and ids[0, col] == tokenizer.mask_token_id
    for k in range(4):  # the suffix sits where it would after k sentence tokens
        assert pos[k].tolist() == list(range(1 + len(pre))) + [1 + len(pre) + k + j for j in range(len(suf) + 1)]


def _term(encoder, **settings):
    from csebench.objectives.prompt import PromptSettings, PromptTemplates

    return PromptTemplates(PromptSettings(**settings), encoder.hidden_size, encoder.num_layers, encoder=encoder)


def _encoder(kind, tokenizer, roberta_tokenizer):
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    from csebench.model.encoder import SentenceEncoder

    torch.manual_seed(0)
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    if kind == "bert":
        return SentenceEncoder(BertModel(BertConfig(vocab_size=len(tokenizer), **small), add_pooling_layer=False), tokenizer, "cls")
    if kind == "mpnet":  # positions from padding_idx + 1 as RoBERTa's, and a relative attention bias
        from transformers import MPNetConfig, MPNetModel

        return SentenceEncoder(MPNetModel(MPNetConfig(vocab_size=len(roberta_tokenizer), max_position_embeddings=130,
                                                      pad_token_id=1, **small), add_pooling_layer=False),
                               roberta_tokenizer, "cls")
    return SentenceEncoder(RobertaModel(RobertaConfig(vocab_size=len(roberta_tokenizer), max_position_embeddings=130,
                                                      pad_token_id=1, **small), add_pooling_layer=False),
                           roberta_tokenizer, "cls")


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_denoised_representation_matches_a_direct_computation(kind, tokenizer, roberta_tokenizer):
    """h(template(x)) - h(template alone at x's positions), sentence by sentence with the model's own
    position ids (RoBERTa: after the padding index), against the term's batched pooling."""
    enc = _encoder(kind, tokenizer, roberta_tokenizer).eval()  # no dropout: the two computations must agree
    tok = enc.tokenizer
    term = _term(enc)
    term.train()
    b = tok(SENTENCES, padding=True, return_tensors="pt")
    views = term.input_views({"view1": (b["input_ids"], b["attention_mask"]), "view2": (b["input_ids"], b["attention_mask"])},
                             torch.arange(3), 0)
    ids = torch.cat([views["view1"][0], torch.nn.functional.pad(views["view2"][0], (0, views["view1"][0].shape[1] - views["view2"][0].shape[1]), value=tok.pad_token_id)])
    mask = (ids != tok.pad_token_id).long()
    hs = enc.forward_hidden(ids, mask)
    got = term.pool(enc, hs, ids, mask, {"view1": slice(0, 3), "view2": slice(3, 6)})
    offset = 2 if kind == "roberta" else 0
    for v, which in ((0, 1), (1, 2)):
        pre, suf = term.templates[which]
        for k, s in enumerate(SENTENCES):
            row = tok(s)["input_ids"]
            full = torch.tensor([[row[0], *pre, *row[1:-1], *suf, row[-1]]])
            m_col = full[0].tolist().index(tok.mask_token_id)
            h = enc.backbone(input_ids=full, attention_mask=torch.ones_like(full)).last_hidden_state[0, m_col]
            alone = torch.tensor([[row[0], *pre, *suf, row[-1]]])
            n = len(row) - 2
            pos = torch.tensor([list(range(1 + len(pre))) + [1 + len(pre) + n + j for j in range(len(suf) + 1)]]) + offset
            d = enc.backbone(input_ids=alone, attention_mask=torch.ones_like(alone), position_ids=pos).last_hidden_state[0, 1 + len(pre) + suf.index(tok.mask_token_id)]
            assert torch.allclose(got[3 * v + k], h - d, atol=1e-5), (kind, v, k)


def test_without_denoising_the_representation_is_the_mask_state(tokenizer, roberta_tokenizer):
    enc = _encoder("bert", tokenizer, roberta_tokenizer).eval()
    term = _term(enc, denoise=False)
    b = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    views = term.input_views({"view1": (b["input_ids"], b["attention_mask"]), "view2": (b["input_ids"], b["attention_mask"])}, torch.arange(3), 0)
    ids, mask = views["view1"]
    got = term.pool(enc, enc.forward_hidden(ids, mask), ids, mask, {"view1": slice(0, 3)})
    # the encoder's own evaluation path (template 1, mask state, no head) gives the same vectors
    assert torch.allclose(got, enc(b["input_ids"], b["attention_mask"], train_head=False), atol=1e-6)


def test_saved_model_evaluates_inside_the_template(tmp_path, tokenizer, roberta_tokenizer):
    from csebench.model.encoder import load_encoder

    enc = _encoder("bert", tokenizer, roberta_tokenizer)
    _term(enc)
    enc.save(tmp_path / "m")
    back = load_encoder(tmp_path / "m")
    assert back.prompt == enc.prompt and back.prompt["prefix"] == 'This sentence of "'
    assert torch.allclose(back.encode(SENTENCES), enc.encode(SENTENCES), atol=1e-5)


def _direct(enc, which_pre_suf, offset, denoise):
    """Sentence by sentence in eval mode: h(template 1 around x) at the mask, minus (``denoise``) h(template 1
    alone) with the suffix's position ids shifted by x's token count (plus the model's offset)."""
    tok = enc.tokenizer
    pre, suf = which_pre_suf
    out = []
    enc.eval()  # no dropout, as encode
    with torch.no_grad():
        for s in SENTENCES:
            row = tok(s)["input_ids"]
            full = torch.tensor([[row[0], *pre, *row[1:-1], *suf, row[-1]]])
            h = enc.backbone(input_ids=full, attention_mask=torch.ones_like(full)).last_hidden_state[0, full[0].tolist().index(tok.mask_token_id)]
            if denoise:
                alone = torch.tensor([[row[0], *pre, *suf, row[-1]]])
                n = len(row) - 2
                pos = torch.tensor([list(range(1 + len(pre))) + [1 + len(pre) + n + j for j in range(len(suf) + 1)]]) + offset
                h = h - enc.backbone(input_ids=alone, attention_mask=torch.ones_like(alone),
                                     position_ids=pos).last_hidden_state[0, 1 + len(pre) + suf.index(tok.mask_token_id)]
            out.append(h)
    return torch.stack(out)


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_dev_scores_are_denoised_and_the_test_encoding_is_not(kind, tmp_path, tokenizer, roberta_tokenizer):
    """The released trainer's dev evaluation (prompt_bert/models.py 290-302, 364-368): the embedding that selects
    the checkpoint is template 1's mask state minus that of template 1 alone at the sentence's positions; the test
    encoding (and the saved model) is the plain mask state (run.sh's evaluation arguments)."""
    from csebench.model.encoder import load_encoder

    enc = _encoder(kind, tokenizer, roberta_tokenizer)
    term = _term(enc)
    offset = 2 if kind == "roberta" else 0
    denoised, plain = _direct(enc, term.templates[1], offset, True), _direct(enc, term.templates[1], offset, False)
    assert not torch.allclose(denoised, plain, atol=1e-3)
    assert torch.allclose(enc.encode(SENTENCES, selection=True, precision="fp32"), denoised, atol=1e-5)
    assert torch.allclose(enc.encode(SENTENCES, precision="fp32"), plain, atol=1e-5)
    enc.save(tmp_path / "m")
    back = load_encoder(tmp_path / "m")
    assert back.dev_denoise is None
    assert torch.allclose(back.encode(SENTENCES, selection=True, precision="fp32"), plain, atol=1e-5)


@pytest.mark.parametrize("kind", ["bert", "roberta", "mpnet"])
def test_the_template_alone_is_the_models_own_forward_of_it(kind, tokenizer, roberta_tokenizer):
    """For a sentence of 0 tokens the template-alone state (the training term's and the dev selection's) is the
    mask state of the model's own forward of [CLS] prefix suffix [SEP], position ids its own: from 0 on BERT, from
    padding_idx + 1 = 2 on RoBERTa and MPNet (csebench.model.model_types.POSITIONS_AFTER_PADDING). The released
    numbering (positions: released) is 0-based everywhere, so it differs there on RoBERTa and MPNet."""
    enc = _encoder(kind, tokenizer, roberta_tokenizer).eval()
    tok = enc.tokenizer
    term = _term(enc)
    for which in (1, 2):
        pre, suf = term.templates[which]
        alone = torch.tensor([[tok.cls_token_id, *pre, *suf, tok.sep_token_id]])
        with torch.no_grad():
            own = enc.backbone(input_ids=alone, attention_mask=torch.ones_like(alone)).last_hidden_state
            own = own[0, 1 + len(pre) + suf.index(tok.mask_token_id)]
            assert torch.allclose(term.delta(which, 3, "cpu")[0], own, atol=1e-5), (kind, which)
            if which == 1:  # the dev selection's template-alone state: template 1
                assert torch.allclose(enc.template_delta(3, "cpu")[0], own, atol=1e-5), kind
            released = _term(enc, positions="released").delta(which, 1, "cpu")[0]
        assert torch.allclose(released, own, atol=1e-5) == (kind == "bert"), (kind, which)


@pytest.mark.parametrize("settings,denoised", [({}, True), ({"dev_denoise": False}, False), ({"denoise": False}, False),
                                               ({"denoise": False, "dev_denoise": True}, True)])
def test_dev_denoise_follows_denoise_unless_set(settings, denoised, tokenizer, roberta_tokenizer):
    enc = _encoder("bert", tokenizer, roberta_tokenizer)
    term = _term(enc, **settings)
    want = _direct(enc, term.templates[1], 0, denoised)
    assert torch.allclose(enc.encode(SENTENCES, selection=True, precision="fp32"), want, atol=1e-5)


def test_the_dev_evaluator_scores_the_selection_encoding(tmp_path, tokenizer, roberta_tokenizer):
    from csebench.training.trainer import DevEvaluator
    from runhelpers import write_mini_senteval

    write_mini_senteval(tmp_path / "se", pairs=12)
    enc = _encoder("bert", tokenizer, roberta_tokenizer)
    _term(enc)
    calls = []
    real = enc.encode
    enc.encode = lambda s, **kw: calls.append(kw.get("selection")) or real(s, **kw)
    dev = DevEvaluator(tmp_path / "se", 8, precision="fp32")
    dev(enc), dev.sickr(enc)
    assert calls and all(calls)


def test_dev_denoise_keys_promptbert_runs_anew_and_keeps_sncse_keys():
    """PromptBERT's rows select on denoised dev scores now (their key holds the setting); SNCSE (no denoising)
    resolves to what it ran before, and its key leaves the setting out."""
    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from runhelpers import PARAMS

    params = load_params(PARAMS)
    prompt = resolve_run(params, "zoo", "bert-base-promptbert", 42)
    assert prompt.objectives["prompt"]["dev_denoise"] is None and prompt.objectives["prompt"]["denoise"] is True
    assert "dev_denoise" in prompt.identity()["objectives"]["prompt"]
    sncse = resolve_run(params, "zoo", "bert-base-sncse", 42)
    assert "dev_denoise" not in sncse.identity()["objectives"]["prompt"]
    key = sncse.key()
    sncse.objectives["prompt"]["dev_denoise"] = False  # said explicitly: a key of its own
    assert sncse.key() != key


@pytest.mark.parametrize("bad", [{"template": {"prefix": "x"}}, {"template": {"prefix": "a", "suffix": "no mask"}},
                                 {"positions": "zero"}, {"family": "gpt"}])
def test_bad_settings_are_one_line_errors(bad, tokenizer, roberta_tokenizer):
    from csebench.objectives import validate_objectives

    with pytest.raises(ConfigError) as e:
        validate_objectives({"prompt": bad}, "methods.promptbert")
        _term(_encoder("bert", tokenizer, roberta_tokenizer), **bad)
    assert "\n" not in str(e.value)


def test_tiny_model_trains(tmp_path, shared_dir):
    from runhelpers import train_tiny

    summary, tr = train_tiny(tmp_path, {"prompt": {}}, steps=2)
    assert summary["steps"] == 2 and tr.encoder.prompt is not None


# ----------------------------------------------------------------------------- the template and the position table

LONG_TEMPLATE = {"prefix": "This long sentence, of which we say in these many words here what it might mean to all of the "
                           "people who read it on the page in front of them, namely \"",
                 "suffix": "\" and so, after all of this has been said and done, it means {mask} ."}


def _prompt_run(inputs, capsys, length: int, prompt: dict, out: str):
    from runhelpers import run_cli, train_argv, write_config

    cfg = write_config(inputs / f"{out}.yaml", {"methods": {"simcse": {"objectives": {"prompt": prompt}}}, "suites": {"ci": {
        "training": {"max_seq_length": length, "max_steps": 2, "eval_steps": 2, "batch_size": 8}}}})
    return run_cli(capsys, train_argv(inputs, inputs / out, cfg))


def test_the_template_counts_against_the_position_table(inputs, capsys):
    """`max_seq_length: 128` on the tiny BERT's 128 positions passed the check and training stopped with
    `RuntimeError: index 128 is out of bounds`: the template's 8 tokens wrap every row. Refused before tokenizing."""
    from runhelpers import assert_train_fails

    assert_train_fails(inputs, capsys, {"methods": {"simcse": {"objectives": {"prompt": {}}}},
                                        "suites": {"ci": {"training": {"max_seq_length": 128}}}},
                       "csebench train: error: training.max_seq_length (suite ci, run simcse) is 128, and objectives.prompt "
                       "adds up to 8 tokens (its templates): 136 positions, more than the backbone takes (128, its "
                       "max_position_embeddings); set it to at most 120")


def test_rows_that_fill_the_position_table_and_a_long_template_train(inputs, capsys):
    """Template denoising encoded the template alone for every width of the wrapped batch, past the positions the
    longest sentence needs: at the largest length the check allows (120 with rows that fill it), and with a
    53-token template at length 32, training stopped in that pass with an index error. Both train now."""
    with open(inputs / "corpus.txt", "a", encoding="utf-8") as fh:
        fh.write(" ".join(["word"] * 300) + "\n")  # rows of the full length, truncated to max_seq_length
    rc, err = _prompt_run(inputs, capsys, 120, {}, "full")
    assert rc == 0, err
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(inputs / "full" / "model"))
    pre, suf = template_ids(tok, LONG_TEMPLATE["prefix"], LONG_TEMPLATE["suffix"])
    assert len(pre) + len(suf) == 53 and 32 + 53 <= 128
    rc, err = _prompt_run(inputs, capsys, 32, {"template": LONG_TEMPLATE}, "long")
    assert rc == 0, err


def test_a_template_without_its_mask_is_refused_with_the_settings(tmp_path, capsys):
    """Without a tokenizer (show-config, and the DAG, which resolves every run): the suffix's {mask} was
    checked only when training loaded the tokenizer."""
    from runhelpers import assert_fails, write_config

    for template, where in (({"prefix": "It is ", "suffix": " indeed ."}, "template"),
                            ({"prefix": "{mask} is ", "suffix": " {mask} ."}, "template2")):
        cfg = write_config(tmp_path / "over.yaml", {"methods": {"simcse": {"objectives": {"prompt": {where: template}}}}})
        assert_fails(capsys, ["show-config", "--config", str(cfg), "--suite", "ci", "--run", "simcse", "--seed", "1"],
                     f"csebench show-config: error: run ci/simcse: objectives.prompt.{where}: the suffix must hold {{mask}} "
                     f"exactly once and the prefix none (got {template['prefix']!r}, {template['suffix']!r})")


def test_a_teacher_cache_of_a_prompt_model_counts_its_template(tmp_path, tokenizer, roberta_tokenizer):
    """A PromptBERT model encodes the corpus rows inside its template: `teacher-cache --max-seq-length` counts it."""
    from csebench.training.teachers import build_teacher_cache
    from runhelpers import write_corpus

    enc = _encoder("bert", tokenizer, roberta_tokenizer)  # 512 positions
    _term(enc)
    enc.save(tmp_path / "m")
    with pytest.raises(ConfigError, match=r"^--max-seq-length is 510, and objectives.prompt adds up to 8 tokens \(the "
                                          r"model's template\): 518 positions, more than the backbone takes \(512, its "
                                          r"max_position_embeddings\); set it to at most 504$"):
        build_teacher_cache(tmp_path / "m", write_corpus(tmp_path / "c.txt", n=8), tmp_path / "t.npy", max_seq_length=510)
