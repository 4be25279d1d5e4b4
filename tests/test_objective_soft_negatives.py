"""SNCSE (objectives/soft_negatives.py): the negation rules, the bidirectional margin loss against a direct
loop and against the released code's computation (Sense-GVT/SNCSE simcse/models.py, re-implemented from
reading it), and a tiny-model training run composed with the prompt term as the released code is."""

from __future__ import annotations

import pytest
import torch

from csebench.core.errors import ConfigError
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from csebench.objectives.soft_negatives import bml_loss, negate


@pytest.mark.parametrize("sentence,negation", [
    ("A man is not playing a guitar .", "A man is playing a guitar ."),          # rule 1: drop the first "not"
    ("Not everyone was not there.", "everyone was not there."),
    ("The cat is sleeping on the mat .", "The cat is not sleeping on the mat ."),  # rule 2: after the auxiliary
    ("She could have been there", "She could not have been there"),
    ("Two dogs Were running.", "Two dogs Were not running."),
    ("People DO like it,", "People DO not like it,"),
    ("A woman slices a tomato .", "Not A woman slices a tomato ."),              # rule 3: prefix "Not"
    ("", "Not"),
])
def test_negation_rules(sentence, negation):
    assert negate(sentence) == negation


def test_negation_is_deterministic_and_changes_every_sentence(shared_dir):
    lines = (shared_dir / "corpus" / "demo-sentences.txt").read_text(encoding="utf-8").splitlines()[:500]
    first = [negate(s) for s in lines]
    assert first == [negate(s) for s in lines]
    assert all(a != b for a, b in zip(lines, first))


def naive_bml(z1, z2, z3, alpha, beta):
    total = 0.0
    for a, p, n in zip(z1, z2, z3):
        d = float(torch.dot(a, n) / (a.norm() * n.norm()) - torch.dot(a, p) / (a.norm() * p.norm()))
        total += max(0.0, d + alpha) + max(0.0, -d - beta)
    return total / len(z1)


def released_bml(z1, z2, z3, alpha, beta, lam):
    """models.py's cl_forward with num_sent == 3: temp = cos(z1, z3) - cos(z1, z2); relu(temp + alpha) +
    relu(-temp - beta), mean, times lambda_."""
    temp = torch.cosine_similarity(z1, z3, dim=1) - torch.cosine_similarity(z1, z2, dim=1)
    return torch.mean(torch.relu(temp + alpha) + torch.relu(-temp - beta)) * lam


@pytest.mark.parametrize("alpha,beta", [(0.1, 0.3), (0.0, 0.0), (0.2, 0.9)])
def test_bml_matches_the_direct_and_released_computations(alpha, beta):
    torch.manual_seed(0)
    z1, z2, z3 = (torch.randn(6, 5, dtype=torch.float64) for _ in range(3))
    z3[0] = z1[0] + 0.01 * z3[0]  # a negation almost on its anchor: Delta > -alpha
    got = bml_loss(z1, z2, z3, alpha, beta)
    assert float(got) == pytest.approx(naive_bml(z1, z2, z3, alpha, beta), rel=1e-6)
    assert float(1e-3 * got) == pytest.approx(float(released_bml(z1, z2, z3, alpha, beta, 1e-3)), rel=1e-6)


def test_objective_adds_lambda_bml_to_infonce():
    from csebench.objectives.contrastive import info_nce

    torch.manual_seed(1)
    z1, z2, z3 = (torch.randn(4, 6, dtype=torch.float64) for _ in range(3))
    ctx = StepContext(z1=z1, z2=z2, temperature=0.05, step=0, total_steps=1, indices=torch.arange(4),
                      all_indices=torch.arange(4), extra={"negation": z3})
    obj = Objective(validate_objectives({"soft_negatives": {"weight": 0.5}}, "m"), 6, 2)
    loss, logs = obj(ctx)
    assert float(loss) == pytest.approx(float(info_nce(ctx) + 0.5 * naive_bml(z1, z2, z3, 0.1, 0.3)), rel=1e-6)
    assert "loss_soft_negatives" in logs


def test_negation_view_is_the_negated_corpus_sentence(tokenizer):
    from csebench.objectives.soft_negatives import SoftNegatives, SoftNegativeSettings

    sentences = ["the cat is here .", "dogs run fast ."]
    term = SoftNegatives(SoftNegativeSettings(), 8, 2, tokenizer=tokenizer, negations=[negate(s) for s in sentences])
    ids = torch.tensor([[101, 102], [101, 102]])
    views = term.input_views({"view1": (ids, torch.ones_like(ids)), "view2": (ids, torch.ones_like(ids))},
                             torch.tensor([1, 0]), 0)
    got = [tokenizer.decode(r[m.bool()], skip_special_tokens=True) for r, m in zip(*views["negation"])]
    assert got == ["not dogs run fast.", "the cat is not here."]  # decode joins the final period


@pytest.mark.parametrize("bad", [{"alpha": 0.5, "beta": 0.3}, {"weight": -1}, {"margin": 1}])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(ConfigError) as e:
        validate_objectives({"soft_negatives": bad}, "methods.sncse")
    assert "\n" not in str(e.value)


def test_tiny_model_trains_with_prompt_templates(tmp_path, shared_dir):
    from runhelpers import train_tiny

    summary, tr = train_tiny(tmp_path, {"prompt": {"denoise": False}, "soft_negatives": {}}, steps=2)
    assert summary["steps"] == 2
    assert "loss_soft_negatives" in tr.log_keys


def test_sentences_that_cannot_be_negated_are_counted_in_a_warning(tmp_path, tokenizer, caplog):
    """A sentence that is "not" alone loses it: its soft negative was the empty sentence, silently."""
    import logging

    from csebench.objectives.soft_negatives import SoftNegatives, SoftNegativeSettings

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat is here .\nnot\ndogs run fast .\n\"Not.\"\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="csebench.objectives.soft_negatives"):
        term = SoftNegatives(SoftNegativeSettings(), 8, 2, corpus_path=corpus, tokenizer=tokenizer)
    assert [r.getMessage() for r in caplog.records] == [
        "objectives.soft_negatives: 2 of 4 corpus sentences cannot be negated ('not', '\"Not.\"'): the sentence is the "
        "word \"not\" alone, which negating removes, so its soft negative is the empty sentence"]
    assert term._tokens.lengths().tolist() == [8, 2, 7, 2]  # [CLS] [SEP] for the two, as before: now said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="csebench.objectives.soft_negatives"):
        corpus.write_text("the cat is here .\n", encoding="utf-8")
        SoftNegatives(SoftNegativeSettings(), 8, 2, corpus_path=corpus, tokenizer=tokenizer)
    assert not caplog.records
