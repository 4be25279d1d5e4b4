"""A run is its resolved configuration, not the suite asking for it; each distinct run is
trained, embedded and evaluated once, and every suite listing it sees it under its own names."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from csebench.study.jobs import Runs, suite_jobs, runs_of, same_run_as, teacher_cache
from csebench.study.params import list_suites, load_params
from csebench.study.resolve import resolve_run
from csebench.core.errors import ConfigError, DataError
from runhelpers import ROOT, assert_fails, needs_pipeline, run_cli, write_config

P = load_params(ROOT / "params.yaml")
TINY = {"max_steps": 4, "eval_steps": 2, "batch_size": 16, "learning_rate": 1.0e-4, "log_steps": 2, "checkpoint_steps": 4}


def _two_suites(**b_runs) -> dict:
    """Suites a and b on the ci data: a's simcse is b's `copy` (another name and label, the same run)."""
    params = copy.deepcopy(P)
    runs_b = [{"name": "copy", "backbone": "tiny", "method": "simcse", "label": "Another label"},
              {"name": "hotter", "backbone": "tiny", "method": "simcse", "training": {"temperature": 0.1}}]
    params["suites"]["a"] = {"data": "ci", "seeds": [1], "training": TINY,
                             "runs": [{"name": "simcse", "backbone": "tiny", "method": "simcse"}]}
    params["suites"]["b"] = {"data": "ci", "seeds": [1], "training": dict(TINY), "runs": b_runs.get("runs", runs_b)}
    return params


def test_a_run_is_its_configuration_not_its_names(monkeypatch):
    params = _two_suites()
    key = lambda p, s, r: Runs(p).key(s, r)  # noqa: E731
    assert key(params, "a", "simcse") == key(params, "b", "copy")  # other suite, name, label: the same run
    assert key(params, "a", "simcse") != key(params, "b", "hotter")
    assert resolve_run(params, "a", "simcse", 1).fingerprint() == resolve_run(params, "b", "copy", 1).fingerprint()
    assert resolve_run(params, "a", "simcse", 1).fingerprint() != resolve_run(params, "a", "simcse", 2).fingerprint()
    runs = Runs(params)
    assert runs.folder("a", "simcse", 1) == runs.folder("b", "copy", 1) == f"results/runs/{runs.key('a', 'simcse')}/seed1"
    # one suite's override reaching the run makes it a run of its own
    changed = copy.deepcopy(params)
    changed["suites"]["b"]["training"]["learning_rate"] = 2.0e-4
    assert key(changed, "b", "copy") != key(params, "b", "copy") and key(changed, "a", "simcse") == key(params, "a", "simcse")
    # another data source (corpus sample) is another run; the shared folder's place on this machine is not
    other = copy.deepcopy(params)
    other["data"]["ci2"] = copy.deepcopy(other["data"]["ci"])
    other["suites"]["b"]["data"] = "ci2"
    assert key(other, "b", "copy") == key(params, "a", "simcse")  # the same source under another name
    other["data"]["ci2"]["corpus"]["sample"] = 128
    assert key(other, "b", "copy") != key(params, "a", "simcse")
    here = key(params, "a", "simcse")
    monkeypatch.setenv("CSEBENCH_SHARED", "/elsewhere/shared")
    assert resolve_run(params, "a", "simcse", 1).data.corpus.path.startswith("/elsewhere/shared/")
    assert key(params, "a", "simcse") == here
    # evaluation only is not the trained run; the evaluation settings are a folder of the run, not another run
    untrained = _two_suites(runs=[{"name": "copy", "backbone": "tiny", "method": "simcse", "train": False}])
    assert key(untrained, "b", "copy") != key(untrained, "a", "simcse")
    capped = copy.deepcopy(params)
    capped["suites"]["b"]["evaluation"] = {"max_sts_pairs": 100}
    r = Runs(capped)
    assert r.key("b", "copy") == r.key("a", "simcse") and r.eval_folder("b", "copy", 1) != r.eval_folder("a", "simcse", 1)
    assert r.eval_folder("a", "simcse", 1).endswith("/seed1/eval-fp32")
    assert re.search(r"/seed1/eval-fp32-capped-[0-9a-f]{8}$", r.eval_folder("b", "copy", 1))


def test_students_are_the_same_run_when_their_teachers_are():
    params = _two_suites()
    distill = {"distillation": {"teachers": {"run": "simcse", "seeds": [1, 2]}}}
    params["suites"]["a"]["runs"].append({"name": "student", "backbone": "tiny", "method": "distillcse", "objectives": distill})
    params["suites"]["b"]["runs"].append({"name": "pupil", "backbone": "tiny", "method": "distillcse",
                                          "objectives": {"distillation": {"teachers": {"run": "copy", "seeds": [1, 2]}}}})
    params["suites"]["b"]["runs"].append({"name": "other-pupil", "backbone": "tiny", "method": "distillcse",
                                          "objectives": {"distillation": {"teachers": {"run": "hotter", "seeds": [1, 2]}}}})
    runs = Runs(params)
    assert runs.key("a", "student") == runs.key("b", "pupil")  # teachers named differently, the same teachers
    assert runs.key("a", "student") != runs.key("b", "other-pupil")  # same names elsewhere would not do: keys
    assert teacher_cache(params, "b", "copy", 2) == f"{runs.folder('a', 'simcse', 2)}/teacher/embeddings.npy"
    assert runs.same_run_as("b", "copy", 2) == "a/simcse"  # teacher seeds count as listed
    # a teacher changed in one suite changes its students there
    params["suites"]["b"]["training"]["temperature"] = 0.07
    assert Runs(params).key("b", "pupil") != Runs(params).key("a", "student")


def test_same_run_as_names_the_first_suite_listing_it():
    runs = runs_of(P)
    assert same_run_as(P, "ablation-iscse-buffer", "buffer-1024", 42) == "paper-iscse/bert-base-iscse"
    assert same_run_as(P, "paper-iscse", "bert-base-iscse", 42) is None
    assert same_run_as(P, "paper-sscl-depth", "simcse-12", 42) == "paper/bert-base-simcse"
    assert same_run_as(P, "ablation-distillcse-lambda", "simcse", 1) == "paper-distillcse/bert-base-simcse"
    # DistillCSE students named by their teachers' keys: vanilla distillation from seed 1 is one run
    assert same_run_as(P, "ablation-distillcse-lambda", "lambda-1.0", 42) == "paper-distillcse/bert-base-vanilla-distill"
    assert same_run_as(P, "ablation-iscse-buffer", "buffer-256", 42) is None
    assert runs.first(runs.key("ablation-iscse-k", "k-16"), 42) == ("paper-iscse", "bert-base-iscse")
    with pytest.raises(ConfigError, match="no run of params.yaml has the key 0123456789abcdef"):
        runs.first("0123456789abcdef", 42)


def test_plan_prints_runs_requested_and_trained_and_the_saved_gpu_hours(tmp_path):
    from csebench.results.plan import distinct, plan, render_plan

    plans = plan(P, ["paper", "paper-sscl-depth", "paper-iscse", "ablation-iscse-buffer"])
    once = distinct(plans)
    assert sum(p.training_runs for p in plans) == 4 + 2 + 4 + 6
    assert once.training_runs == 16 - 2  # simcse-12 is paper's BERT-base SimCSE; buffer-1024 is paper-iscse's
    alone = sum(p.gpu_hours(989e12) for p in plans)
    assert 0 < once.gpu_hours(989e12) < alone
    text = render_plan(plans, tmp_path)  # no measured GPU there: the assumed utilisation gpu_hours() uses
    alone_row = re.search(r"^sum of the 4 suites built alone\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)$", text, re.M)
    once_row = re.search(r"^this build: each run once \(1\)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)$", text, re.M)
    assert alone_row and once_row, text
    assert (alone_row[1], once_row[1]) == ("16", "14")  # trained: requested, then each distinct run once
    assert float(once_row[5]) == pytest.approx(once.gpu_hours(989e12), abs=0.05)
    assert float(alone_row[5]) == pytest.approx(alone, abs=0.1)
    saved = float(re.search(r"([\d.]+) GPU-hours saved", text)[1])
    assert saved == pytest.approx(alone - once.gpu_hours(989e12), abs=0.1) and saved > 0
    rows = re.findall(r"^(?:paper|paper-sscl-depth|paper-iscse|ablation-iscse-buffer)\s+wiki1m\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", text, re.M)
    for col in range(4):  # the sum row adds up the rows above it, every column
        assert sum(int(r[col]) for r in rows) == int(alone_row[col + 1])
    assert int(once_row[4]) <= int(alone_row[4])


# ----------------------------------------------------------------------------- a suite's view of a run


def _fake_run(folder: Path, info: dict) -> None:
    ev = folder / "eval-fp32"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "config.json").write_text("{}")
    (folder / "train.json").write_text(json.dumps({"run": "simcse/seed1", "suite": "a", "method": "simcse", "backbone": "tiny",
                                                   "seed": 1, "stsb_dev_best": 50.0}))
    (folder / "train_curve.csv").write_text("step,loss\n1,2.0\n")
    (ev / "analysis").mkdir(parents=True)
    (ev / "sts.json").write_text(json.dumps({"avg": 60.0, "tasks": {"STS12": 60.0}, "run_info": info}))
    (ev / "sts_pairs.npz").write_bytes(b"pairs")
    (ev / "analysis" / "neighbours.json").write_text(json.dumps({"analysis": "neighbours", "label": "k s1", "items": []}))
    (ev / "analysis" / "neighbours.md").write_text("## Retrieved neighbours (k s1)\n\nkeep (k s1) here\n")


def test_view_run_relabels_the_results_and_links_the_rest(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = _two_suites()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    folder = Path(Runs(params).folder("b", "copy", 1))
    _fake_run(folder, {"suite": "a", "name": "simcse", "seed": 1, "method": "simcse", "method_label": "SimCSE",
                       "backbone": "tiny", "backbone_label": "tiny random BERT"})
    view = Path("results/b/runs/copy/seed1")
    base = ["view-run", "--suite", "b", "--run", "copy", "--seed", "1"]
    assert run_cli(capsys, [*base, "--from", str(folder), "--out", str(view), "train.json", "train_curve.csv", "model"])[0] == 0
    assert run_cli(capsys, [*base, "--first", "a/simcse", "--from", str(folder / "eval-fp32"), "--out", str(view),
                            "sts.json", "sts_pairs.npz"])[0] == 0
    analysis = Path("results/b/analysis/copy/seed1")
    assert run_cli(capsys, [*base, "--from", str(folder / "eval-fp32/analysis"), "--out", str(analysis),
                            "neighbours.json", "neighbours.md"])[0] == 0
    sts = json.loads((view / "sts.json").read_text())
    assert sts["run_info"] == {"suite": "b", "name": "copy", "seed": 1, "method": "simcse", "method_label": "Another label",
                               "backbone": "tiny", "backbone_label": "tiny random BERT"}
    assert sts["avg"] == 60.0 and sts["same_run_as"] == "a/simcse" and sts["run_folder"] == folder.as_posix()
    train = json.loads((view / "train.json").read_text())
    assert (train["run"], train["suite"], train["same_run_as"], train["stsb_dev_best"]) == ("copy/seed1", "b", "a/simcse", 50.0)
    for name in ("model", "train_curve.csv", "sts_pairs.npz"):  # relative links into the run's folder
        assert (view / name).is_symlink() and not os.path.isabs(os.readlink(view / name))
    assert (view / "model" / "config.json").is_file() and (view / "sts_pairs.npz").read_bytes() == b"pairs"
    assert json.loads((analysis / "neighbours.json").read_text())["label"] == "copy s1"
    assert (analysis / "neighbours.md").read_text() == "## Retrieved neighbours (copy s1)\n\nkeep (k s1) here\n"
    # the first suite's own view says it is no other's
    assert run_cli(capsys, ["view-run", "--suite", "a", "--run", "simcse", "--seed", "1", "--from", str(folder / "eval-fp32"),
                            "--out", "results/a/runs/simcse/seed1", "sts.json"])[0] == 0
    assert json.loads(Path("results/a/runs/simcse/seed1/sts.json").read_text())["same_run_as"] is None
    # again (the run retrained): replaced, no temporaries left
    assert run_cli(capsys, [*base, "--from", str(folder), "--out", str(view), "train.json", "train_curve.csv", "model"])[0] == 0
    assert sorted(p.name for p in view.iterdir()) == ["model", "sts.json", "sts_pairs.npz", "train.json", "train_curve.csv"]


def test_view_refuses_a_run_folder_of_the_old_layout_and_train_refuses_a_view(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = _two_suites()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    folder = Path(Runs(params).folder("b", "copy", 1))
    _fake_run(folder, {})
    old = Path("results/b/runs/copy/seed1")
    (old / "model").mkdir(parents=True)
    argv = ["view-run", "--suite", "b", "--run", "copy", "--seed", "1", "--from", str(folder), "--out", str(old)]
    assert_fails(capsys, [*argv, "model"], f"{old}/model is a folder, not a link into the run's folder {folder}: a run trained "
                 "there by a csebench before runs were shared (docs/runs.md, \"Upgrading\"); move it away or delete it")
    (old / "model").rmdir()
    assert run_cli(capsys, [*argv, "train.json", "model"])[0] == 0
    assert_fails(capsys, [*argv, "dev_curve.csv"], f"{folder}/dev_curve.csv not found")
    assert_fails(capsys, ["train", "--suite", "b", "--run", "copy", "--seed", "1", "--corpus", "c.txt", "--senteval", "se",
                          "--out", str(old), "--force"],
                 f"{old} is a suite's view of the run in {folder.as_posix()}: train there (--out {folder.as_posix()}), "
                 "or let Snakemake do it (docs/runs.md)")
    new = "results/a/runs/simcse/seed1"  # the view's place, before any view is there
    assert_fails(capsys, ["train", "--suite", "a", "--run", "simcse", "--seed", "1", "--corpus", "c.txt", "--senteval", "se",
                          "--out", new], f"{new} is a suite's view of the run in {folder.as_posix()}: train there")
    assert not Path(new).exists()
    assert_fails(capsys, ["show-config", "--seed", "1"], "name the run: --suite SUITE --run RUN (or --key KEY")
    assert_fails(capsys, ["show-config", "--seed", "1", "--key", "0123456789abcdef"], "no run of params.yaml has the key 0123456789abcdef")
    assert_fails(capsys, ["show-config", "--seed", "1", "--key", "0123456789abcdef", "--suite", "b"], "give either --key or --suite and --run")


def test_show_config_by_key_names_the_first_suite_and_prints_the_key(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = _two_suites()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    key = Runs(params).key("b", "copy")
    capsys.readouterr()
    from csebench.cli import main

    assert main(["show-config", "--key", key, "--seed", "1"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["suite"], shown["name"], shown["key"]) == ("a", "simcse", key)
    assert main(["runs", "--suites", "a", "b"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^b/copy seed 1\s+results/runs/{key}/seed1  same run as a/simcse$", out, re.M), out
    assert "3 runs listed, 2 distinct" in out


def test_teacher_cycles_and_a_suite_named_runs_are_refused(tmp_path, capsys):
    over = write_config(tmp_path / "over.yaml", {"suites": {"ci": {"runs": [
        {"name": "x", "backbone": "tiny", "method": "distillcse", "objectives": {"distillation": {"teachers": {"run": "y"}}}},
        {"name": "y", "backbone": "tiny", "method": "distillcse", "objectives": {"distillation": {"teachers": {"run": "x"}}}}]}}})
    assert_fails(capsys, ["show-config", "--config", str(over), "--suite", "ci", "--run", "x", "--seed", "1"],
                 "suites.ci: the teachers of method distillcse (objectives.distillation.teachers) go round in a circle "
                 "(x -> y -> x); a teacher must be a run that does not learn from its student")
    # its own other seeds (teacher caches given by hand) are no circle: the teacher is named "self" in its key
    own = write_config(tmp_path / "own.yaml", {"methods": {"simcse": {"objectives": {"distillation": {"teachers": {"run": "simcse", "seeds": [2]}}}}}})
    cfg = resolve_run(load_params(ROOT / "params.yaml", [own]), "ci", "simcse", 1)
    assert cfg.teacher_keys == {"simcse": "self"} and cfg.identity()["objectives"]["distillation"]["teachers"] == [{"run": "self", "seeds": [2]}]
    over = write_config(tmp_path / "runs.yaml", {"suites": {"runs": {"data": "ci", "runs": [{"name": "s", "backbone": "tiny", "method": "simcse"}]}}})
    assert_fails(capsys, ["show-config", "--config", str(over), "--suite", "runs", "--run", "s", "--seed", "1"],
                 "suites.runs: the name 'runs' is taken by the runs' own folders (results/runs/); rename the suite")


SELF_TEACHER = {"suites": {"ci": {"seeds": [1, 2], "runs": {
    "simcse": {"backbone": "tiny", "method": "simcse"},
    "r": {"backbone": "tiny", "method": "rankcse", "objectives": {"ranking_distillation": {"teachers": {"run": "r"}}}}}}}}


def test_a_run_that_is_its_own_teacher_is_refused_for_every_method_with_teachers(tmp_path, capsys):
    """RankCSE naming itself (no seeds: its own seed) passed `csebench runs` (rc 0) and `snakemake -n` stopped with
    Snakemake's CyclicGraphException. DCLR and RankCSE read teachers as DistillCSE does: every such method is checked,
    and the message names it."""
    over = write_config(tmp_path / "self.yaml", SELF_TEACHER)
    assert_fails(capsys, ["runs", "--config", str(over), "--suites", "ci"],
                 "csebench runs: error: suites.ci: run r (method rankcse) is its own teacher "
                 "(objectives.ranking_distillation.teachers names run r without seeds, i.e. at the student's own seed); a "
                 "teacher must be another run of the suite, or other seeds of this one")
    # seeds that hold the student's own: refused at that seed; other seeds of itself are teachers like any run
    runs = copy.deepcopy(SELF_TEACHER)
    runs["suites"]["ci"]["runs"]["r"]["objectives"]["ranking_distillation"]["teachers"]["seeds"] = [2]
    over = write_config(tmp_path / "seeds.yaml", runs)
    assert_fails(capsys, ["show-config", "--config", str(over), "--suite", "ci", "--run", "r", "--seed", "2"],
                 "suites.ci: run r (method rankcse) is its own teacher (objectives.ranking_distillation.teachers names "
                 "run r at seeds 2, its own seed 2 among them)")
    assert resolve_run(load_params(ROOT / "params.yaml", [over]), "ci", "r", 1).teacher_keys == {"r": "self"}
    # a circle through DCLR names DCLR
    circle = write_config(tmp_path / "circle.yaml", {"suites": {"ci": {"runs": {
        "x": {"backbone": "tiny", "method": "dclr", "objectives": {"debiased_negatives": {"teachers": {"run": "y"}}}},
        "y": {"backbone": "tiny", "method": "rankcse", "objectives": {"ranking_distillation": {"teachers": {"run": "x"}}}}}}}})
    assert_fails(capsys, ["runs", "--config", str(circle)],
                 "suites.ci: the teachers of method rankcse (objectives.ranking_distillation.teachers) go round in a "
                 "circle (x -> y -> x); a teacher must be a run that does not learn from its student")


@pytest.mark.slow(seconds=1)
@needs_pipeline
def test_settings_no_run_can_train_with_are_one_line_at_snakemake_dry_run(tmp_path):
    """`snakemake -n` resolves every run before planning: a run that is its own teacher was a CyclicGraphException, a
    PromptBERT template without {mask} passed (it failed in the train job); both are the one csebench line, exit 1."""
    from runhelpers import run_snakemake, tool_env

    nomask = {"methods": {"simcse": {"objectives": {"prompt": {"template": {"prefix": "It is ", "suffix": " indeed ."}}}}}}
    for name, over, message in (
            ("self", SELF_TEACHER, "suites.ci: run r (method rankcse) is its own teacher"),
            ("nomask", nomask, "objectives.prompt.template: the suffix must hold {mask} exactly once and the prefix none "
                               "(got 'It is ', ' indeed .')")):
        cfg = write_config(tmp_path / f"{name}.yaml", over)
        proc = run_snakemake(["-n", "--configfile", "config/ci.yaml", "--config", f"params_overrides=[{cfg}]", "plan=false"],
                             cwd=ROOT, env=tool_env(), timeout=300)
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if not l.startswith("Config file config/paper.yaml")]
        assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("csebench: error: "), lines
        assert message in lines[0], lines


def test_a_teacher_cache_is_checked_by_the_teacher_key(tmp_path):
    from csebench.model.teacher_cache import TeacherBank
    from csebench.training.teachers import save_teacher_cache

    import numpy as np

    cache = tmp_path / "embeddings.npy"
    meta = {"format": 1, "model": "m", "rows": 2, "dim": 2, "dtype": "float32", "normalized": True, "max_seq_length": 32,
            "tokenizer": "t", "corpus": "c", "corpus_sha256": "h",
            "teacher_run": {"suite": "a", "name": "simcse", "seed": 1, "key": "aaaaaaaaaaaaaaaa"}}
    save_teacher_cache(cache, np.eye(2, dtype=np.float32), meta)
    TeacherBank([cache], expected_runs=[("b", "copy", 1, "aaaaaaaaaaaaaaaa")])  # another suite's name for the same run
    with pytest.raises(DataError, match=r"belongs to run a/simcse/seed1 \(key aaaaaaaaaaaaaaaa\), expected teacher 1 to be "
                                        r"b/copy/seed1 \(key bbbbbbbbbbbbbbbb\)"):
        TeacherBank([cache], expected_runs=[("b", "copy", 1, "bbbbbbbbbbbbbbbb")])
    with pytest.raises(DataError, match="expected teacher 1 to be b/copy/seed2"):
        TeacherBank([cache], expected_runs=[("b", "copy", 2, "aaaaaaaaaaaaaaaa")])


# ----------------------------------------------------------------------------- the DAG


def _project_with_two_suites(proj: Path) -> Path:
    from runhelpers import copy_project

    copy_project(proj)
    params = yaml.safe_load((proj / "params.yaml").read_text())
    two = _two_suites()
    for suite in ("a", "b"):  # capped evaluation sets (a suite of one's own in the README takes these): the end-to-end
        # test evaluates them for real
        two["suites"][suite].update(evaluation={"max_sts_pairs": 50}, transfer={"max_train_sentences": 64, "max_test_sentences": 64})
    params["suites"].update(a=two["suites"]["a"], b=two["suites"]["b"])
    (proj / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return proj


@needs_pipeline
def test_snakemake_plans_a_run_two_suites_share_once(tmp_path):
    from runhelpers import run_snakemake, tool_env

    proj = _project_with_two_suites(tmp_path / "proj")
    proc = run_snakemake(["-n", "--quiet", "rules", "--config", "suites=[a,b]", "reproduce=none"], cwd=proj, env=tool_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, re.M))
    assert (counts["train"], counts["embed"], counts["eval_sts"], counts["eval_transfer"]) == ("2", "2", "2", "2")
    assert (counts["view_trained"], counts["view_evaluated"], counts["report"]) == ("3", "3", "2")
    assert counts["model_card"] == "2"  # one card per run, in its own folder: every view shows it
    assert "csebench plan" not in proc.stderr  # a dry run prints Snakemake's plan only (the cost: `csebench plan`)


@pytest.mark.slow(seconds=20)
@needs_pipeline
def test_two_suites_sharing_a_run_train_it_once(tmp_path, shared_dir, warm_jobs):
    from runhelpers import run_snakemake, tool_env

    proj = _project_with_two_suites(tmp_path / "proj")
    # two one-thread jobs at a time, as make demo runs on 2 cores (their warm server: the session's)
    cmd = ["--cores", "2", "--profile", "workflow/profiles/default", "--resources", "gpu=2",
           "--config", "suites=[a,b]", "reproduce=none", "plan=false", "threads=1", "warm_start=false"]
    proc = run_snakemake(cmd, cwd=proj, env={**tool_env(shared_dir), **warm_jobs}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(re.findall(r"^(?:local)?rule train:", proc.stdout + proc.stderr, re.M)) == 2
    params = load_params(proj / "params.yaml")
    runs = Runs(params)
    assert sorted(p.name for p in (proj / "results/runs").iterdir() if p.is_dir()) == sorted({runs.key("a", "simcse"), runs.key("b", "hotter")})
    shared = proj / runs.folder("a", "simcse", 1)
    for view in ("results/a/runs/simcse/seed1", "results/b/runs/copy/seed1"):
        assert (proj / view / "model").resolve() == (shared / "model").resolve()
        assert (proj / view / "model" / "README.md").read_text() == (shared / "model_card.md").read_text()
    b_sts = json.loads((proj / "results/b/runs/copy/seed1/sts.json").read_text())
    a_sts = json.loads((proj / "results/a/runs/simcse/seed1/sts.json").read_text())
    assert (b_sts["run_info"]["name"], b_sts["same_run_as"], a_sts["same_run_as"]) == ("copy", "a/simcse", None)
    assert b_sts["tasks"] == a_sts["tasks"]
    table = (proj / "results/b/tables/sts.md").read_text()
    assert "copy" in table and "hotter" in table and "| simcse |" not in table
    # changing b's override of the shared run makes it b's own: one more training, a's untouched
    params_yaml = yaml.safe_load((proj / "params.yaml").read_text())
    params_yaml["suites"]["b"]["runs"][0]["training"] = {"learning_rate": 2.0e-4}
    (proj / "params.yaml").write_text(yaml.safe_dump(params_yaml, sort_keys=False))
    again = run_snakemake([*cmd, "-n", "--quiet", "rules"], cwd=proj, env=tool_env(shared_dir))
    assert again.returncode == 0, again.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", again.stdout + again.stderr, re.M))
    assert counts["train"] == "1" and counts["model_card"] == "1" and "report" in counts


# Alternative values of every training setting (csebench.study.params.TrainingConfig): one that is valid and different.
OTHER_TRAINING = {"temperature": 0.07, "max_seq_length": 48, "batch_size": 96, "learning_rate": 7e-5, "epochs": 2,
                  "max_steps": 77, "eval_steps": 33, "weight_decay": 0.01, "warmup_steps": 10, "max_grad_norm": 0.5,
                  "adam_epsilon": 1e-6, "precision": "fp32", "log_steps": 7, "checkpoint_steps": 99,
                  "eval_batch_size": 32, "eval_precision": "bf16", "compile": True, "num_workers": 2, "dropout": 0.2,
                  "projection_dim": 96, "projection_head": "linear_tanh", "num_layers": 3, "dev_max_pairs": 300,
                  "dev_metric": "avg_sts", "prefix": "query: "}


def test_a_runs_key_hashes_only_the_settings_that_change_its_outputs():
    """Changing a training default re-keys the trained runs that resolve it and no evaluation-only run,
    unless the untrained model or its dev scores read it (csebench.study.resolve.EVAL_ONLY_SETTINGS); settings
    that only change how a run is carried out re-key nothing (RESULT_NEUTRAL)."""
    import dataclasses

    from csebench.study.resolve import EVAL_ONLY_SETTINGS, RESULT_NEUTRAL
    from csebench.study.params import TrainingConfig

    params = load_params(ROOT / "params.yaml")
    runs = [(s, r) for s in list_suites(params) for r, _ in suite_jobs(params, s)]
    runs = list(dict.fromkeys(runs))
    assert set(OTHER_TRAINING) | {"dev_set"} == {f.name for f in dataclasses.fields(TrainingConfig)}

    def keys(p):
        out = {}
        for s, r in runs:
            try:
                cfg = resolve_run(p, s, r, 0)
            except ConfigError:  # a composed method refuses a default one of its parts overrides (docs/methods.md)
                continue
            out[(s, r)] = (cfg.key(), cfg)
        return out

    base = keys(params)
    evalonly = [sr for sr, (_, cfg) in base.items() if not cfg.train]
    trained = [sr for sr, (_, cfg) in base.items() if cfg.train]
    assert evalonly and trained
    tested = 0
    for setting, value in OTHER_TRAINING.items():
        changed = copy.deepcopy(params)
        changed["training"][setting] = value
        after = keys(changed)
        moved = {sr for sr in after if after[sr][0] != base[sr][0]}
        def effective(cfg):  # a head's kind means nothing without a head
            t = cfg.training
            return None if setting == "projection_head" and t.projection_dim is None else getattr(t, setting)

        resolved = {sr for sr in after if effective(after[sr][1]) != effective(base[sr][1])}
        if setting in RESULT_NEUTRAL:
            assert not moved, setting
            continue
        for sr in (sr for sr in trained if sr in after):  # re-keyed exactly when the setting it resolves changed, or its teachers were
            taught = after[sr][1].teacher_keys != base[sr][1].teacher_keys
            assert (sr in moved) == (sr in resolved or taught), (setting, sr)
        tested += any(sr in moved for sr in trained)
        for sr in (sr for sr in evalonly if sr in after):
            assert (sr in moved) == (setting in EVAL_ONLY_SETTINGS and sr in resolved), (setting, sr)
    assert tested >= len(OTHER_TRAINING) - len(RESULT_NEUTRAL) - 3  # most defaults reach some trained run


def test_the_positives_setting_changes_no_existing_run_key():
    """Added later, at its default (dropout positives) the setting is left out of run identities, so the
    one-layer SSCL runs trained before it keep their keys; the released SSCL-BERT's self positives count."""
    one = resolve_run(P, "ablation-sscl-layer", "layer-5", 42)
    assert one.objectives["layer_negatives"]["positives"] == "dropout"
    assert "positives" not in one.identity()["objectives"]["layer_negatives"]
    released = resolve_run(P, "paper-sscl", "sscl_bert_released-256", 42)
    assert released.identity()["objectives"]["layer_negatives"]["positives"] == "self"


def test_the_plan_figures_docs_runs_md_states_are_the_plan_s():
    """docs/runs.md states the default target's runs and GPU-hours: they are what `csebench plan` computes
    now (a count that goes stale fails here, not in a reader's hands)."""
    import re as _re

    from csebench.results.plan import distinct, plan
    from csebench.results.registry import default_suites

    params = P
    suites = default_suites(params)
    plans = plan(params, suites)
    text = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    stated = _re.search(r"the (\d+) suites, .*?: (\d+) runs requested \(and (\d+) evaluation-only\), (\d+) trained;\s+"
                        r"([\d.]+) GPU-hours if each suite trained its own, ([\d.]+) for the distinct runs", text, _re.S)
    assert stated, "docs/runs.md no longer states the plan's figures in the form this test reads"
    from csebench.results.plan import measured_throughput

    m = measured_throughput(ROOT)
    hours = (lambda p: p.gpu_hours(m["peak"], m["small_mfu"], m["large_mfu"])) if m else (lambda p: p.gpu_hours(989e12))
    once = distinct(plans)
    assert [int(x) for x in stated.groups()[:4]] == [len(suites), sum(p.training_runs for p in plans),
                                                     sum(p.evaluation_only for p in plans), once.training_runs]
    assert float(stated.group(5)) == pytest.approx(sum(hours(p) for p in plans), abs=0.05)
    assert float(stated.group(6)) == pytest.approx(hours(once), abs=0.05)
