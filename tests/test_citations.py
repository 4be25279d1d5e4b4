"""Every method cites its papers: each objective term declares its paper where it is defined (``citation`` in
its class), a term without one cannot be registered, and a run's model card cites SimCSE and the paper of
every term of its method, for every method of params.yaml."""

from __future__ import annotations

import sys
import textwrap

import pytest

from csebench.study.params import load_params
from csebench.study.resolve import method_settings
from csebench.core.errors import ConfigError, DataError
from csebench.core.lazy import LazyRegistry
from csebench.sharing.modelcard import _citation, _papers, cited_keys, citations
from csebench.objectives import INFONCE_CITATION, TERMS, term_citation
from runhelpers import PARAMS

P = load_params(PARAMS)
EXPECTED = {  # term -> the paper it comes from (docs/methods.md)
    "gaussian_negatives": "gs-infonce", "instance_smoothing": "is-cse", "layer_negatives": "sscl",
    "distillation": "distillcse", "momentum_negatives": "esimcse", "mixed_negatives": "mixcse",
    "debiased_negatives": "dclr", "prompt": "promptbert", "soft_negatives": "sncse", "ranking_distillation": "rankcse",
    "replaced_token_detection": "diffcse",
}
BIBTEX_KEYS = {"simcse": "gao2021simcse", "gs-infonce": "wu2022smoothed", "is-cse": "he2023instance",
               "sscl": "chen2023alleviating", "distillcse": "xu2023distillcse", "esimcse": "wu2022esimcse",
               "mixcse": "zhang2022unsupervised", "dclr": "zhou2022debiased", "promptbert": "jiang2022promptbert",
               "sncse": "wang2022sncse", "rankcse": "liu2023rankcse", "diffcse": "chuang2022diffcse"}


def test_every_term_declares_its_paper_and_the_paper_has_bibtex():
    papers = citations()["papers"]
    assert "terms" not in citations()  # no second list beside the terms' own declarations
    got = {t: term_citation(t) for t in TERMS}
    assert {t: got[t] for t in EXPECTED} == EXPECTED
    for term, key in got.items():
        assert key in papers, (term, key)
    assert INFONCE_CITATION == "simcse"
    for key, paper in papers.items():
        bib = paper["bibtex"]
        assert bib.lstrip().startswith("@") and bib.count("{") == bib.count("}"), key
        for field in ("title = ", "author = ", "year = "):
            assert field in bib, (key, field)
        assert {"name", "term", "tag"} <= set(paper), key
    for key, bib_key in BIBTEX_KEYS.items():
        assert "{" + bib_key + "," in papers[key]["bibtex"], key
    # the venues the terms' papers were published in
    venues = {"esimcse": "29th International Conference on Computational Linguistics", "mixcse": "AAAI",
              "dclr": "60th Annual Meeting", "promptbert": "2022 Conference on Empirical Methods",
              "sncse": "arXiv:2201.05979", "rankcse": "61st Annual Meeting"}
    for key, venue in venues.items():
        assert venue in papers[key]["bibtex"], key


def test_a_term_without_a_citation_cannot_be_registered(tmp_path, monkeypatch):
    pkg = tmp_path / "fake_terms"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cited.py").write_text(textwrap.dedent('''
        class Cited:
            key = "cited"
            citation = "simcse"
    '''))
    (pkg / "uncited.py").write_text(textwrap.dedent('''
        class Uncited:
            key = "uncited"  # no citation: refused
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = LazyRegistry("objective", package="fake_terms", declared="key", requires=("citation",))
    with pytest.raises(ConfigError, match=r"objective 'uncited' \(fake_terms.uncited:Uncited\) declares no citation"):
        reg.names()
    (pkg / "uncited.py").write_text('class Uncited:\n    key = "uncited"\n    citation = "dclr"\n')
    reg = LazyRegistry("objective", package="fake_terms", declared="key", requires=("citation",))
    assert reg.names() == ["cited", "uncited"] and reg.declared_value("uncited", "citation") == "dclr"
    sys.modules.pop("fake_terms", None)


def _card_papers(objectives: dict) -> list[str]:
    return [p["name"] for p in _papers({"config": {"train": True, "objectives": objectives}})]


@pytest.mark.parametrize("method", sorted(P["methods"]))
def test_every_methods_card_cites_each_paper_of_its_terms(method):
    """A run of any method of params.yaml: its card cites SimCSE, then each of its terms' papers, once each."""
    backbone = next(iter((P["methods"][method].get("by_backbone") or {"bert-base": None})))
    _, objectives, _ = method_settings(P, method, backbone)
    papers = citations()["papers"]
    assert set(objectives) <= set(EXPECTED), f"{method}: add its terms' papers to EXPECTED"
    want = ["SimCSE", *dict.fromkeys(papers[EXPECTED[t]]["name"] for t in objectives)]
    assert _card_papers(objectives) == list(dict.fromkeys(want))
    text = "\n".join(_citation({"config": {"train": True, "objectives": objectives}}))
    for key in cited_keys(objectives):
        assert "{" + BIBTEX_KEYS[key] + "," in text, (method, key)


def test_the_zoo_methods_cite_their_own_papers_not_only_simcse():
    names = {m: _card_papers(method_settings(P, m, "bert-base")[1]) for m in
             ("esimcse", "mixcse", "dclr", "promptbert", "sncse", "rankcse")}
    assert names == {"esimcse": ["SimCSE", "ESimCSE"], "mixcse": ["SimCSE", "MixCSE"], "dclr": ["SimCSE", "DCLR"],
                     "promptbert": ["SimCSE", "PromptBERT"], "sncse": ["SimCSE", "PromptBERT", "SNCSE"],
                     "rankcse": ["SimCSE", "RankCSE"]}
    assert _papers({"config": {"train": False, "objectives": {}}}) == []  # an untrained backbone cites nothing


def test_a_cited_paper_missing_from_the_bibtex_file_is_one_clear_error(monkeypatch):
    import csebench.sharing.modelcard as mc

    monkeypatch.setattr(mc, "citations", lambda: {"papers": {"simcse": citations()["papers"]["simcse"]}})
    with pytest.raises(DataError, match="resources/citations.yaml has no paper gs-infonce"):
        mc._papers({"config": {"train": True, "objectives": {"gaussian_negatives": {}}}})
