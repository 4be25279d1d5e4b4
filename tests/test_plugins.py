"""Terms, analyses and renderers of another installed package, found through the entry-point groups
csebench.objectives, csebench.analyses and csebench.renderers like the built-in ones (docs/methods.md, "A
method in your own package"). The packages are written under tmp_path, outside the repository: a module and
its .dist-info folder put on sys.path, and once the docs' own package installed with pip and trained with by a build."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from csebench.core.errors import ConfigError
from csebench.core.lazy import LazyRegistry
from runhelpers import ROOT, needs_pipeline, write_config

DOC = ROOT / "docs" / "methods.md"
TERM = textwrap.dedent('''
    from dataclasses import dataclass

    from csebench.core.errors import ConfigError
    from csebench.objectives.base import ObjectiveTerm


    @dataclass
    class Settings:
        weight: float = 0.5

        def validate(self, where):
            if self.weight < 0:
                raise ConfigError(f"{where}.weight: must be >= 0, got {self.weight}")


    class Centre(ObjectiveTerm):
        key = "centre"
        citation = "centre"
        Settings = Settings

        def extra_loss(self, ctx):
            return self.settings.weight * ctx.z1.float().mean(0).pow(2).sum()
''')


def fake_dist(site: Path, dist: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str],
              version: str = "0.1.0") -> Path:
    """An installed distribution as pip leaves it: its modules and a <dist>-<version>.dist-info folder holding
    METADATA and entry_points.txt."""
    for rel, text in modules.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text, encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in entry_points.items()),
        encoding="utf-8")
    return site


def terms_registry() -> LazyRegistry:
    """A registry of the terms as csebench.objectives.TERMS is declared (a fresh one: nothing loaded yet)."""
    return LazyRegistry("objective", package="csebench.objectives", declared="key", group="csebench.objectives")


@pytest.fixture()
def terms(monkeypatch):
    """csebench.objectives.TERMS with nothing loaded: what a test's packages add does not outlive it."""
    from csebench.objectives import TERMS

    monkeypatch.setattr(TERMS, "_loaded", {})
    monkeypatch.setattr(TERMS, "_plugins", None)
    return TERMS


def test_a_term_of_an_installed_package_is_listed_checked_and_composed_like_a_built_in(tmp_path, monkeypatch, terms):
    import torch

    from csebench.objectives import term_class, term_packages, validate_objectives
    from csebench.objectives.compose import Objective
    from runhelpers import random_step_context

    builtin = terms.builtin_names()
    assert "centre" not in terms
    fake_dist(tmp_path, "centre-terms", {"csebench.objectives": {"centre": "centre_terms_a.term:Centre"}},
              {"centre_terms_a/__init__.py": "", "centre_terms_a/term.py": TERM})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert terms.names() == [*builtin, "centre"] and "centre_terms_a.term" not in sys.modules  # listed, not imported
    assert terms.target("centre") == "centre_terms_a.term:Centre"
    with pytest.raises(ConfigError, match="unknown objective 'centr'.*did you mean 'centre'"):
        validate_objectives({"centr": {}}, "methods.m")
    with pytest.raises(ConfigError, match=r"methods.m: objectives.centre.weight: must be >= 0, got -1"):
        validate_objectives({"centre": {"weight": -1}}, "methods.m")
    assert validate_objectives({"centre": {}}, "methods.m") == {"centre": {"weight": 0.5}}
    assert term_class("centre").__module__ == "centre_terms_a.term"
    assert term_packages(["centre", "prompt"]) == {"centre": "centre-terms 0.1.0"}

    # composed with the contrastive loss like a built-in term: InfoNCE + weight * ||mean anchor||^2, by hand
    ctx = random_step_context(b=4, d=8, seed=3)
    obj = Objective({"centre": {"weight": 0.5}}, hidden_size=8, num_layers=2)
    loss, logs = obj(ctx)
    z1, z2 = ctx.z1.detach().double(), ctx.z2.detach().double()
    nce = 0.0
    for i in range(4):
        cos = [float(z1[i] @ z2[j] / (z1[i].norm() * z2[j].norm())) / ctx.temperature for j in range(4)]
        nce += -(cos[i] - math.log(sum(math.exp(c) for c in cos))) / 4
    centre = sum(float(sum(z1[i, d] for i in range(4)) / 4) ** 2 for d in range(8))
    assert float(logs["loss_contrastive"]) == pytest.approx(nce, rel=1e-5)
    assert float(logs["loss_centre"]) == pytest.approx(0.5 * centre, rel=1e-5)
    assert float(loss.detach()) == pytest.approx(nce + 0.5 * centre, rel=1e-5)
    loss.backward()
    assert ctx.z1.grad is not None and torch.isfinite(ctx.z1.grad).all()


@pytest.mark.parametrize("case, entry, module, message", [
    ("a built-in's name", {"prompt": "clash_terms_b.term:Centre"}, TERM,
     "objective 'prompt' of the installed package 'clash-terms' (entry point csebench.objectives: clash_terms_b.term:Centre) "
     "has the name of a built-in objective (csebench.objectives.prompt:PromptTemplates); rename its entry point"),
    ("an import that fails", {"centre": "clash_terms_c.term:Centre"}, "import no_such_module_anywhere\n" + TERM,
     "objective 'centre' of the installed package 'clash-terms' (entry point csebench.objectives: clash_terms_c.term:Centre) "
     "cannot be loaded: ModuleNotFoundError: No module named 'no_such_module_anywhere'"),
    ("a key that is not its name", {"center": "clash_terms_d.term:Centre"}, TERM,
     "objective 'center' of the installed package 'clash-terms' (entry point csebench.objectives: clash_terms_d.term:Centre): "
     "its key is 'centre', but the entry point names it 'center'; make the two the same"),
    ("a term that cites no paper", {"centre": "clash_terms_g.term:Centre"}, TERM.replace('    citation = "centre"\n', ""),
     "objective 'centre' of the installed package 'clash-terms' (entry point csebench.objectives: clash_terms_g.term:Centre) "
     'declares no citation: set citation = "..." in its class'),
    ("a class that is no term", {"centre": "clash_terms_e.term:Centre"}, "class Centre:\n    key = 'centre'\n    citation = 'x'\n",
     "objective 'centre' of the installed package 'clash-terms' (entry point csebench.objectives: clash_terms_e.term:Centre) "
     "is not a subclass of csebench.objectives.base.ObjectiveTerm"),
])
def test_a_bad_term_of_an_installed_package_is_one_line_naming_the_package(tmp_path, monkeypatch, terms, case, entry,
                                                                          module, message):
    from csebench.objectives import term_class

    pkg = next(iter(entry.values())).split(".")[0]
    fake_dist(tmp_path, "clash-terms", {"csebench.objectives": entry}, {f"{pkg}/__init__.py": "", f"{pkg}/term.py": module})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as err:
        term_class(next(iter(entry)))
    assert str(err.value) == message and "\n" not in str(err.value), case


def test_one_name_from_two_installed_packages_is_an_error_naming_both(tmp_path, monkeypatch):
    for dist, pkg in (("first-terms", "first_terms_f"), ("second-terms", "second_terms_f")):
        fake_dist(tmp_path / dist, dist, {"csebench.objectives": {"centre": f"{pkg}.term:Centre"}},
                  {f"{pkg}/__init__.py": "", f"{pkg}/term.py": TERM})
        monkeypatch.syspath_prepend(str(tmp_path / dist))
    with pytest.raises(ConfigError, match=r"^objective 'centre' is given by two installed packages: 'first-terms' "
                                          r"\(first_terms_f.term:Centre\) and 'second-terms' \(second_terms_f.term:Centre\)"):
        terms_registry().names()


def test_an_analysis_and_a_renderer_of_an_installed_package_are_found_like_the_built_in_ones(tmp_path, monkeypatch, capsys):
    """The analysis becomes `csebench analyze sentence_words` (its options from its declaration) and runs."""
    from csebench.analysis import ANALYSES
    from csebench.results.render import RENDERERS
    from runhelpers import run_cli

    analysis = textwrap.dedent('''
        from csebench.analysis.base import Analysis


        def run(ctx):
            lines = [s.split() for s in ctx.corpus()]
            return {"analysis": "sentence_words", "sentences": len(lines), "mean_words": sum(map(len, lines)) / len(lines)}


        ANALYSIS = Analysis(__name__, "words per corpus sentence", reads="model", run=run, needs=("corpus",))
    ''')
    renderer = ("from csebench.results.context import Renderer\n"
                "RENDERER = Renderer(inputs=lambda ctx: [], render=lambda ctx: [])\n")
    fake_dist(tmp_path, "words-analysis", {"csebench.analyses": {"sentence_words": "words_g.sentence_words:ANALYSIS"},
                                           "csebench.renderers": {"no_table": "words_g.tables:RENDERER"}},
              {"words_g/__init__.py": "", "words_g/sentence_words.py": analysis, "words_g/tables.py": renderer})
    monkeypatch.setattr(ANALYSES, "_loaded", dict(ANALYSES._loaded))
    monkeypatch.setattr(RENDERERS, "_loaded", dict(RENDERERS._loaded))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert ANALYSES.names()[-1] == "sentence_words" and RENDERERS.names()[-1] == "no_table"
    assert RENDERERS.get("no_table").render(None) == []
    (tmp_path / "corpus.txt").write_text("one two three\nfour five\n", encoding="utf-8")
    rc, err = run_cli(capsys, ["analyze", "sentence_words", "--corpus", str(tmp_path / "corpus.txt"),
                               "--out", str(tmp_path / "words.json")])
    assert rc == 0, err
    res = json.loads((tmp_path / "words.json").read_text())
    assert (res["analysis"], res["sentences"], res["mean_words"]) == ("sentence_words", 2, 2.5)


def _doc_block(lang: str, index: int = 0) -> str:
    """The index-th fenced ``lang`` block of docs/methods.md's section "A method in your own package"."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## A method in your own package\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)[index]


def _install_docs_package(tmp_path: Path) -> Path:
    """docs/methods.md's package as written there (pyproject.toml, the term's module), installed with pip into a
    folder outside the repository: that folder, to put on a subprocess's PYTHONPATH."""
    project = tmp_path / "my-csebench-terms"
    (project / "my_csebench_terms").mkdir(parents=True)
    (project / "pyproject.toml").write_text(_doc_block("toml"), encoding="utf-8")
    (project / "my_csebench_terms" / "__init__.py").write_text("", encoding="utf-8")
    (project / "my_csebench_terms" / "center.py").write_text(_doc_block("python"), encoding="utf-8")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
                    "--target", str(site), str(project)], check=True, capture_output=True, timeout=120)
    assert not str(site).startswith(str(ROOT))
    return site


def _with_path(e: dict, site: Path) -> dict:
    return {**e, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), e.get("PYTHONPATH")]))}


CARD_NAMES_THE_PACKAGE = [  # what a card of a run with the docs' term says of it: its paper, package and version
    "- **center-penalty**: weight * ||mean of the batch's anchors||^2: the batch's centre pulled to the origin. "
    "(objective `center_penalty` of the package `my-csebench-terms 0.1.0`, not csebench's own)",
    "`center-penalty` is the paper of the objective `center_penalty` of the package `my-csebench-terms 0.1.0`, which is "
    "not part of csebench.",
    "@misc{center-penalty, title = {A centre penalty for sentence embeddings}, year = {2026}}",
]


@pytest.mark.slow(seconds=20)
@needs_pipeline
def test_the_docs_package_installed_outside_the_repository_trains_with_its_term_and_its_cards_name_it(
        tmp_path, monkeypatch, terms):
    """docs/methods.md's package, as written there (pyproject.toml, the term's module, the config), installed with
    pip into a folder outside the repository and on a build's path, its config as the params override; Snakemake
    asked for that run's card (the model_card rule, as a build runs it) trains it with the doc's command
    (`csebench train --config centered.yaml --suite ci --run centered --seed 1 --corpus ... --senteval ... --out
    ...`, the train rule's), evaluates it and writes the card. train.json names the package, every logged loss is
    InfoNCE plus the package's term, and both cards (the rule's and `csebench model-card --run`'s) cite the term's
    paper beside its package and version. Without the package on the path, the card and the training each stop in
    one line. (One build, not a build and a `csebench train` of its own: 10 CPU-s, a start of torch, fewer.)"""
    from csebench.study.jobs import run_folder
    from csebench.study.params import load_params
    from runhelpers import BIN, copy_project, run_csebench, tool_env, write_small_shared

    site = _install_docs_package(tmp_path)
    monkeypatch.syspath_prepend(str(site))  # this process too resolves the run (its folder), with the package's term
    proj = copy_project(tmp_path / "proj")
    config = write_config(tmp_path / "centered.yaml", yaml.safe_load(_doc_block("yaml")))
    run = proj / run_folder(load_params(proj / "params.yaml", [config]), "ci", "centered", 1)
    shared = write_small_shared(tmp_path / "shared")
    e = _with_path(tool_env(shared), site)
    e["CSEBENCH_DATA_CHECK"] = "0"  # the small shared data are cut from SentEval's
    proc = subprocess.run([str(BIN / "snakemake"), "--cores", "2", "--configfile", "config/ci.yaml", "--config", "plan=false",
                           "threads=1", f"params_overrides=[{config}]", "--", str((run / "model_card.md").relative_to(proj))],
                          cwd=proj, env=e, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    text = (run / "model_card.md").read_text()
    assert all(line in text.splitlines() for line in CARD_NAMES_THE_PACKAGE), text
    assert "suite `ci`, run `centered`" in text and "### STS (SentEval)" in text

    summary = json.loads((run / "train.json").read_text())
    assert summary["method"] == "simcse_centered" and summary["steps"] == 8
    assert summary["provenance"]["term_packages"] == {"center_penalty": "my-csebench-terms 0.1.0"}
    config_run = json.loads((run / "model" / "training_config.json").read_text())
    assert config_run["objectives"] == {"center_penalty": {"weight": 0.1}}
    rows = (run / "train_curve.csv").read_text().splitlines()
    head = rows[0].split(",")
    assert len(rows) > 2
    for row in rows[1:]:  # each logged step: the total is InfoNCE plus the package's term, which is on
        v = dict(zip(head, map(float, row.split(","))))
        assert v["loss_center_penalty"] > 0 and v["loss"] == pytest.approx(v["loss_contrastive"] + v["loss_center_penalty"], abs=2e-6)
    # `csebench model-card --run` on the run (a KeyError: 'term' before): the same lines, and the paper's hub tag
    card = subprocess.run([str(BIN / "csebench"), "model-card", "--run", str(run)], cwd=proj, env=e, capture_output=True,
                          text=True, timeout=300)
    assert card.returncode == 0, card.stderr[-3000:]
    readme = (run / "model" / "README.md").read_text()
    assert all(line in readme.splitlines() for line in CARD_NAMES_THE_PACKAGE), readme
    assert "- center-penalty" in readme.split("---")[1]  # the paper's hub tag in the metadata block

    # the package off the path (this process's, and the registry's memory of it), the program forked from here
    sys.path.remove(str(site))
    monkeypatch.setattr(terms, "_loaded", {})
    monkeypatch.setattr(terms, "_plugins", None)
    # the card cannot cite it: one line naming what train.json recorded
    proc = run_csebench(["model-card", "--run", str(run)], cwd=proj)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
        f"csebench model-card: error: {run} was trained with the objective 'center_penalty' of the package "
        "my-csebench-terms 0.1.0, which is not installed here: install it to write the card (its citation is in that "
        "package)"), proc.stderr
    # the doc's training command fails in one line, naming the unknown term
    proc = run_csebench(["--threads", "1", "train", "--config", str(config), "--suite", "ci", "--run", "centered", "--seed", "1",
                         "--corpus", str(proj / "data/ci/corpus.txt"), "--senteval", str(shared / "senteval"),
                         "--out", str(tmp_path / "again"), "--no-progress"], cwd=proj)
    assert proc.returncode == 2 and "unknown objective 'center_penalty'" in proc.stderr.strip().splitlines()[-1], proc.stderr
    assert not (tmp_path / "again").exists()


@pytest.mark.slow(seconds=3)
@needs_pipeline
def test_a_renderer_named_like_a_built_in_stops_snakemake_in_the_cli_s_line(tmp_path):
    """A package's renderer named `sweep` (a built-in renderer's name): `csebench results render` refused it in one
    line, `snakemake -n` stopped in an input function with a 7-line traceback; now both say the same line, Snakemake
    before it builds the DAG."""
    from runhelpers import BIN, tool_env

    renderer = ("from csebench.results.context import Renderer\n"
                "RENDERER = Renderer(inputs=lambda ctx: [], render=lambda ctx: [])\n")
    site = fake_dist(tmp_path / "site", "clash-renderers", {"csebench.renderers": {"sweep": "clash_r.tables:RENDERER"}},
                     {"clash_r/__init__.py": "", "clash_r/tables.py": renderer})
    said = ("renderer 'sweep' of the installed package 'clash-renderers' (entry point csebench.renderers: "
            "clash_r.tables:RENDERER) has the name of a built-in renderer (csebench.results.renderers.figures:SWEEP); "
            "rename its entry point")
    e = _with_path(tool_env(), site)
    cli = subprocess.run([str(BIN / "csebench"), "results", "render", "--item", "suite/ci", "--results", str(tmp_path / "r")],
                         cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and cli.stderr.strip().splitlines() == [f"csebench results: error: {said}"], cli.stderr
    build = subprocess.run([str(BIN / "snakemake"), "-n", "--configfile", "config/ci.yaml", "--config", "plan=false"],
                           cwd=ROOT, env=e, capture_output=True, text=True, timeout=300)
    lines = [l for l in (build.stdout + build.stderr).splitlines() if not l.startswith("Config file config/paper.yaml")]
    assert build.returncode == 1 and lines == [f"csebench: error: {said}"], lines
