"""dvc.yaml (docs/dvc.md): a stage per suite and per paper item, which cannot drift from the Snakemake DAG."""

import difflib
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from csebench.study.params import list_suites, load_params
from csebench.study.typed import Params
from csebench.workflow.dvcgen import group_record, paper_items
from csebench.results import render
from runhelpers import (BIN, ROOT, needs_pipeline, readme_block, readme_checkout, run_command, run_csebench, run_snakemake,
                        user_env)
ENV = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{BIN}:{os.environ['PATH']}")


def _dvc() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())


def _outs(stage: dict) -> list[str]:
    return [o if isinstance(o, str) else next(iter(o)) for o in stage.get("outs", [])]


def test_every_suite_and_paper_item_has_one_stage():
    from csebench.study.jobs import suite_params

    params = load_params(ROOT / "params.yaml")
    spec = _dvc()
    stages = spec["stages"]
    built = [o.removeprefix("results/") for s in stages.values() for o in _outs(s)]
    suites = list_suites(params)
    assert sorted(b for b in built if b in suites) == sorted(suites)  # each suite exactly once
    assert sorted(spec["metrics"]) == sorted(f"results/{s}/metrics.json" for s in suites)  # the only DVC metrics
    items = paper_items(params)
    assert len(items) >= 40
    for name, item, read in items:
        stage = stages[name]
        # the item's files, and the record of their build times (csebench.workflow.stamps)
        assert _outs(stage) == [*render.item_outputs(item, "results", "paper"), group_record(_outs(stage)[0])]
        assert stage["cmd"].endswith(f"-- {_outs(stage)[0]}")
        # no folder as a dep (`dvc repro --dry` on a fresh clone, treeverse/dvc#9818): the params of the
        # suites its renderer reads (Snakemake's inputs of the item), which Snakemake builds for it
        assert not [d for d in stage["deps"] if d.startswith("results/")]
        assert set(read) <= set(suites)
        for f in render.input_files(item, params, "results", "paper"):
            assert f.split("/")[1] in read, (name, f)
        assert set(stage["params"]) == {p for s in read for p in suite_params(params, s)} or not read
    assert _outs(stages["front-page"]) == ["results/README.md", "results/.README.csebench-times.json"]


def test_a_stage_lists_the_params_its_runs_read():
    """Editing one method marks only the stages whose runs use it (or compose it) changed."""
    from csebench.study.jobs import suite_params

    params = load_params(ROOT / "params.yaml")
    stages = _dvc()["stages"]
    assert stages["suite-ablation-iscse-k"]["params"] == suite_params(params, "ablation-iscse-k")
    assert "methods.iscse" in stages["suite-ablation-iscse-k"]["params"]
    suite_stages = [s for n, s in stages.items() if n.startswith("suite-") or n in ("demo", "ci")]
    assert not any(p in ("methods", "backbones") for s in suite_stages for p in s["params"])
    using = [n for n, s in stages.items() if "methods.gs_infonce" in s.get("params", [])]
    assert "suite-paper-gs-infonce" in using and "suite-ablation-iscse-k" not in using
    composed = [m for m, spec in params["methods"].items() if spec.get("compose")]
    for m in composed:  # a composed method's stages also list the methods it composes
        for n, s in stages.items():
            if f"methods.{m}" in s.get("params", []):
                assert all(f"methods.{part}" in s["params"] for part in params["methods"][m]["compose"]), (n, m)


def _planned_outputs(args: list[str]) -> set[str]:
    proc = run_snakemake(["-n", "--forceall", "--cores", "1", *args], cwd=ROOT, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {p.strip() for m in re.finditer(r"^    output: (.*)$", proc.stdout + proc.stderr, re.M) for p in m[1].split(", ")}


@needs_pipeline
def test_snakemake_writes_only_inside_the_stage_outs():
    # the demo stage's command, as Snakemake plans it: every file lies in a declared out, the run
    # store (runs.dvc) or the prepared data; and each suite it builds is one of its outs
    stage = _dvc()["stages"]["demo"]
    cmd = stage["cmd"].split()
    planned = _planned_outputs(cmd[cmd.index("--configfile"):])
    outs = _outs(stage)
    stray = {p for p in planned if not any(p.startswith(o + "/") for o in [*outs, "results/runs", "data"])}
    assert not stray, f"written outside the demo stage's outs: {sorted(stray)[:5]}"
    assert {p.split("/")[1] for p in planned if p.startswith("results/") and not p.startswith("results/runs/")} == \
        {o.removeprefix("results/") for o in outs}


def test_suite_metrics_is_tidy(tmp_path):
    """metrics.json: run -> seed -> STS-B dev, STS and transfer averages, and the mean over seeds."""
    import copy
    import json

    from csebench.evaluation import STS_TASKS, TRANSFER_TASKS
    from csebench.results.tidy import suite_metrics

    params = copy.deepcopy(load_params(ROOT / "params.yaml"))
    params["suites"]["ci"]["seeds"] = [1, 2]
    for run, base in (("simcse", 70.0), ("backbone", 50.0), ("distillcse", 60.0)):
        for seed in (1, 2):
            d = tmp_path / "ci" / "runs" / run / f"seed{seed}"
            d.mkdir(parents=True)
            (d / "train.json").write_text(json.dumps({"stsb_dev_best": base + seed}))
            if run != "distillcse":  # not evaluated yet: its train.json alone
                (d / "sts.json").write_text(json.dumps({"tasks": {t: base + seed for t in STS_TASKS}}))
                (d / "transfer.json").write_text(json.dumps({"tasks": {t: base for t in TRANSFER_TASKS}}))
    m = suite_metrics(Params.of(params).suite("ci"), str(tmp_path))
    assert m["simcse"] == {"seed1": {"stsb_dev": 71.0, "sts_avg": 71.0, "transfer_avg": 70.0},
                           "seed2": {"stsb_dev": 72.0, "sts_avg": 72.0, "transfer_avg": 70.0},
                           "mean": {"stsb_dev": 71.5, "sts_avg": 71.5, "transfer_avg": 70.0}}
    assert m["distillcse"]["mean"] == {"stsb_dev": 61.5}


# ----------------------------------------------------------------------------- `dvc exp run -S` and params.yaml


def _set_param(tmp_path, override: str) -> tuple[list[str], list[str]]:
    """params.yaml's lines before and after DVC's own rewrite for `dvc exp run -S override`
    (dvc.utils.hydra.apply_overrides: what `exp run` calls on the params file before it runs)."""
    from dvc.utils.hydra import apply_overrides

    copy = tmp_path / "params.yaml"
    copy.write_bytes((ROOT / "params.yaml").read_bytes())
    apply_overrides(copy, [override])
    return (ROOT / "params.yaml").read_text().splitlines(keepends=True), copy.read_text().splitlines(keepends=True)


@pytest.mark.parametrize("override,old,new", [
    ("suites.demo.training.learning_rate=1e-4", "      learning_rate: 3.0e-5\n", "      learning_rate: 0.0001\n"),
    ("suites.ci.runs.simcse.method=gs_infonce", "      simcse: {backbone: tiny, method: simcse}\n",
     "      simcse: {backbone: tiny, method: gs_infonce}\n"),
    ("suites.paper-distillcse.runs.bert-base-simcse.seeds=1-4",
     "      bert-base-simcse: {backbone: bert-base, method: simcse, seeds: 1-16}\n",
     "      bert-base-simcse: {backbone: bert-base, method: simcse, seeds: 1-4}\n"),
], ids=["suite-training", "run", "seed-range"])
@needs_pipeline
def test_dvc_exp_set_param_changes_one_line_of_params_yaml(tmp_path, override, old, new):
    before, after = _set_param(tmp_path, override)
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert len(after) == len(before) and len(changed) == 1, "".join(difflib.unified_diff(before, after, n=0))
    assert (before[changed[0]], after[changed[0]]) == (old, new)


@needs_pipeline
def test_params_yaml_is_in_the_form_dvc_writes_back(tmp_path):
    """Any `-S` rewrites the whole file (every list and scalar re-emitted by ruamel at 80 columns):
    a hand edit that DVC would reformat (a long {...} line, a flow list outside {...}, a comment after
    a list) fails here, before an experiment turns it into a diff of hundreds of lines."""
    before, after = _set_param(tmp_path, "training.batch_size=64")  # the value it has: nothing may change
    assert after == before, "params.yaml is not in the form `dvc exp run -S` writes back (see its header):\n" + \
        "".join(difflib.unified_diff(before, after, "params.yaml", "as DVC writes it", n=1))
    anchors = [e for e in yaml.parse((ROOT / "params.yaml").read_text())
               if getattr(e, "anchor", None) or isinstance(e, yaml.AliasEvent)]
    assert not anchors, "an anchor in params.yaml: `-S` on one of its uses would change every use"


@needs_pipeline
def test_dvc_reads_params_and_dvc_yaml_with_its_c_parser():
    """DVC parses params.yaml and dvc.yaml (every revision, in `dvc exp show`) with ruamel.yaml's C parser, the
    pipeline extra's ruamel.yaml.clib (8.0 s -> 1.6 s a `dvc exp show` here). That parser is libyaml's older
    YAML: a ':' inside an unquoted value in {...} (`{model: packaged:minilm}`) is an error to it, which
    PyYAML and csebench accept; so every file DVC reads is checked with DVC's own reader."""
    from dvc.utils.serialize import YAMLFileCorruptedError, parse_yaml
    from ruamel.yaml import YAML

    assert YAML(typ="safe").Parser.__module__.startswith("ruamel.yaml.clib"), "ruamel.yaml.clib is not installed"
    for name in ("params.yaml", "dvc.yaml"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert parse_yaml(text, name) == yaml.safe_load(text), name
    with pytest.raises(YAMLFileCorruptedError):  # what the check would catch
        parse_yaml("backbones:\n  minilm: {model: packaged:minilm}\n", "params.yaml")


# ----------------------------------------------------------------------------- nothing from outside the repository into DVC's cache


def _tracked_project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A DVC project (its .dvc/ folder, runs.dvc, a stage with a suite folder), a run in the store, a
    suite's view linking into it, and a secret outside the project."""
    proj = tmp_path / "proj"
    (proj / ".dvc").mkdir(parents=True)
    (proj / "runs.dvc").write_text("outs:\n- path: results/runs\n")
    (proj / "dvc.yaml").write_text("stages:\n  ci:\n    cmd: snakemake\n    outs:\n    - results/ci: {persist: true}\n")
    store = proj / "results/runs/k/seed1"
    (store / "model").mkdir(parents=True)
    (store / "train.json").write_text("{}")
    view = proj / "results/ci/runs/simcse/seed1"
    view.mkdir(parents=True)
    (view / "model").symlink_to("../../../../runs/k/seed1/model")  # csebench's own link: inside the repository
    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("token=hf_abc\n")
    return proj, store, secret


def test_dvc_commit_refuses_a_link_out_of_the_repository(tmp_path, capsys, monkeypatch):
    """`ln -s /etc/hostname results/runs/...; dvc commit -f runs.dvc` copied /etc/hostname into .dvc/cache,
    and `dvc push` would upload it: `csebench dvc-commit` refuses the link by name and DVC never runs."""
    from runhelpers import assert_fails

    from csebench.cli import main

    proj, store, secret = _tracked_project(tmp_path)
    calls = []
    monkeypatch.setattr("subprocess.call", lambda argv, **k: calls.append(argv[1:]) or 0)
    monkeypatch.chdir(proj)
    assert main(["dvc-commit"]) == 0 and calls == [["-m", "dvc", "commit", "--force", "runs.dvc"]]
    (store / "model" / "notes.txt").symlink_to(secret)
    line = assert_fails(capsys, ["dvc-commit"], f"csebench dvc-commit: error: results/runs/k/seed1/model/notes.txt is a "
                        f"symbolic link to {secret}, outside the repository {proj}: DVC would copy what it points to into "
                        ".dvc/cache and `dvc push` would upload it; csebench makes no such link: remove it")
    assert len(calls) == 1 and "\n" not in line.strip()
    (store / "model" / "notes.txt").unlink()
    (proj / "results/ci/extra").symlink_to(secret.parent, target_is_directory=True)  # a stage's output folder
    assert_fails(capsys, ["dvc-commit", "runs.dvc", "ci"], "results/ci/extra is a symbolic link to")
    assert len(calls) == 1
    assert_fails(capsys, ["dvc-commit", "nope"], f"nope is neither a .dvc file nor a stage of {proj / 'dvc.yaml'}")
    (proj / "results/ci/extra").unlink()
    assert main(["dvc-commit", "runs.dvc", "ci"]) == 0 and calls[-1][-2:] == ["runs.dvc", "ci"]


def test_a_stage_stops_before_dvc_commits_a_link_out_of_the_repository(tmp_path):
    """`dvc repro` commits a stage's outputs after its command, Snakemake, ends: the Snakefile's first step
    (and its onsuccess) refuses a link out of the repository in the suites it builds and in the run store."""
    from csebench.workflow.steps import refuse_outside_links
    from csebench.core.errors import DataError

    proj, store, secret = _tracked_project(tmp_path)
    results = str(proj / "results")
    refuse_outside_links(results, ["ci"], workdir=str(proj))  # the views' links stay inside: fine
    (proj / "results/ci/runs/simcse/seed1/notes").symlink_to(secret)
    with pytest.raises(DataError, match=f"^{proj}/results/ci/runs/simcse/seed1/notes is a symbolic link to {secret}, "
                                        f"outside the repository {proj}: "):
        refuse_outside_links(results, ["ci"], workdir=str(proj))
    refuse_outside_links(results, ["other"], workdir=str(proj))  # a suite this build does not commit
    (proj / "results/ci/runs/simcse/seed1/notes").unlink()
    (store / "link").symlink_to("/etc/hostname")
    with pytest.raises(DataError, match="seed1/link is a symbolic link to /etc/hostname, outside the repository"):
        refuse_outside_links(results, [], workdir=str(proj))
    (store / "link").unlink()
    elsewhere = tmp_path / "scratch" / "results"  # paths.results outside the project: the views link into it
    elsewhere.parent.mkdir()
    (proj / "results").rename(elsewhere)
    refuse_outside_links(str(elsewhere), ["ci"], workdir=str(proj))
    (elsewhere / "ci/leak").symlink_to(secret)
    with pytest.raises(DataError, match="ci/leak is a symbolic link to"):
        refuse_outside_links(str(elsewhere), ["ci"], workdir=str(proj))


# ----------------------------------------------------------------------------- experiments, sweeps, remotes

# A suite of one tiny run (2 steps, STS capped, transfer capped), and a config of its own so that it is
# a stage like ci (csebench.workflow.dvcgen.config_stages): the README's commands for ci, with ci read as exp,
# run as typed. Its stage builds in ~30 s on 2 cores; the ci suite takes minutes.
EXP_SUITE = """\
  exp:
    description: one tiny run for the DVC tests
    seeds:
    - 1
    data: ci
    training:
      max_steps: 2
      eval_steps: 2
      batch_size: 8
      learning_rate: 3.0e-5
      log_steps: 1
      checkpoint_steps: 2
      dev_max_pairs: 100
    evaluation: {max_sts_pairs: 50}
    transfer: false
    runs:
      simcse: {backbone: tiny, method: simcse}
"""
# warm_start: false: an experiment's build starts no warm server of its own (6-7 CPU-s of imports each); its jobs go to
# the test session's (conftest warm_jobs, named in the commands' environment), as they would go to the build's
EXP_CONFIG = "suites: [exp]\nprogress: false\nthreads: 1\nreproduce: none\nanalyses: []\nwarm_start: false\n"
GIT_ID = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.org", "GIT_COMMITTER_NAME": "test",
          "GIT_COMMITTER_EMAIL": "test@example.org"}


def _sh(cmd: str | list[str], cwd: Path, env: dict, timeout: int = 600, ok: bool = True) -> str:
    """Run ``cmd`` as typed (runhelpers.run_command: output to files, so the sweep's `dvc exp run --run-all` returns
    without waiting for DVC's queue worker to exit: 13.6 s of the sweep test's 58 s, no CPU)."""
    proc = run_command(cmd, cwd, {**env, **GIT_ID}, timeout=timeout)
    assert (proc.returncode == 0) == ok, f"{cmd} (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _exp_repo(base: Path, env: dict) -> Path:
    """The project as the README lays it out (base/proj, base/shared), a git repository whose
    params.yaml has the suite `exp`, config/exp.yaml builds it, and dvc.yaml has its stage `exp`."""
    proj = readme_checkout(base)
    with open(proj / "params.yaml", "a", encoding="utf-8") as f:  # suites: is params.yaml's last section
        f.write(EXP_SUITE)
    (proj / "config/exp.yaml").write_text(EXP_CONFIG)
    made = run_csebench(["dvc-yaml"], cwd=proj, env_=env)  # the stage of exp (forked: no second start of Python)
    assert made.returncode == 0, made.stderr[-3000:]
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "project"]):
        _sh(cmd, proj, env)
    return proj


def _as_exp(cmd: str) -> str:
    return re.sub(r"\b(?:demo-sweep|ci)\b", "exp", cmd)


@pytest.mark.slow(seconds=78)
@needs_pipeline
def test_readmes_queued_sweep_gives_two_experiments_with_their_metrics(tmp_path, warm_jobs):
    env = {**user_env(), **warm_jobs}  # the user's environment, and the session's warm server for the jobs
    proj = _exp_repo(tmp_path, env)
    commands = [_as_exp(c) for c in readme_block("Experiments and sweeps")]
    block = [c for c in commands if "--queue" in c or "--run-all" in c]
    assert len(block) == 2, block  # the README's queue and run commands, as typed
    _sh(block[0], proj, env)
    # a third experiment that fails (a negative learning rate is refused): visible as failed
    _sh(["dvc", "exp", "run", "--queue", "-S", "suites.exp.training.learning_rate=-1", "exp"], proj, env)
    ran = _sh(block[1], proj, env)  # DVC's --run-all exits 0 whatever failed, and says so
    assert "Failed to reproduce experiment(s)" in ran and "learning_rate" in ran, ran[-3000:]
    # each experiment shows its progress, job by job (the stages' Snakemake is not --quiet about it)
    assert re.search(r"^Finished jobid: \d+ \(Rule: train\)$", ran, re.M), ran[-3000:]
    assert re.search(r"^\d+ of \d+ steps \(100%\) done$", ran, re.M), ran[-3000:]
    shown = json.loads(_sh(["dvc", "exp", "show", "--json"], proj, env))
    exps = [e for row in shown for e in row.get("experiments") or []]
    assert sorted(e["executor"]["state"] for e in exps) == ["failed", "success", "success"], exps
    failed = next(e["revs"][0] for e in exps if e["executor"]["state"] == "failed")
    assert failed["error"]["msg"] == "Experiment run failed"
    assert not (failed["data"]["metrics"].get("results/exp/metrics.json") or {}).get("data")  # no result shown as its own
    assert "Failed" in _sh(["dvc", "queue", "status"], proj, env)
    revs = [e["revs"][0] for e in exps if e["executor"]["state"] == "success"]
    lr = {r["rev"]: r["data"]["params"]["params.yaml"]["data"]["suites"]["exp"]["training"]["learning_rate"] for r in revs}
    metrics = {lr[r["rev"]]: r["data"]["metrics"]["results/exp/metrics.json"]["data"]["simcse"]["seed1"] for r in revs}
    assert sorted(metrics) == [1e-5, 1e-4], shown  # neither is the suite's own 3e-5
    for m in metrics.values():  # transfer: false, so no transfer_avg
        assert sorted(m) == ["sts_avg", "stsb_dev"] and all(isinstance(v, float) for v in m.values())
    assert metrics[1e-5] != metrics[1e-4]  # two learning rates, two models
    for rev, value in lr.items():  # what each experiment committed: params.yaml with its one line changed
        diff = _sh(["git", "diff", "--unified=0", "HEAD", rev, "--", "params.yaml"], proj, env)
        assert [l for l in diff.splitlines() if l.startswith(("-  ", "+  "))] == [
            "-      learning_rate: 3.0e-5", f"+      learning_rate: {value}"], diff
    # the README's compact view, as typed: the swept parameter and the STS metrics, nothing else
    show = next(c for c in commands if c.startswith("dvc exp show"))
    table = _sh(show, proj, env)
    header = next(line for line in table.splitlines() if "Experiment" in line).split()
    assert header == ["Experiment", "State", "simcse.seed1.stsb_dev", "simcse.seed1.sts_avg",
                      "suites.exp.training.learning_rate"], table
    assert max(len(line) for line in table.splitlines()) <= 130, table  # about 390 before: every hash and time


@pytest.mark.slow(seconds=21)
@needs_pipeline
def test_readmes_push_and_pull_restore_a_suite_that_snakemake_counts_as_built(tmp_path, warm_jobs):
    """The README's team workflow, as typed (ci read as exp): build, commit, push; a fresh clone
    pulls, `dvc status` is up to date and the stage's command, dry, plans nothing, with no hand step."""
    env = {**user_env(), **warm_jobs}  # the user's environment, and the session's warm server for the jobs
    proj = _exp_repo(tmp_path, env)
    _sh(["dvc", "remote", "add", "-d", "team", str(tmp_path / "remote")], proj, env)  # docs/dvc.md: once per project
    _sh(["git", "commit", "-qam", "remote"], proj, env)
    block = [_as_exp(c) for c in readme_block("Sharing results with a team")]
    split = next(i for i, c in enumerate(block) if c.startswith("# a teammate"))
    for cmd in block[:split]:
        _sh(cmd, proj, env)
    clone = tmp_path / "clone"
    _sh(["git", "clone", "-q", str(proj), str(clone)], tmp_path, env)
    out = [_sh(cmd, clone, env) for cmd in block[split + 1:]]
    assert "Data and pipelines are up to date" in out[0]
    assert "Nothing to be done" in out[1] and "csebench:" in out[1]  # the restored times, said in one line each
    assert (clone / "results/exp/metrics.json").read_text() == (proj / "results/exp/metrics.json").read_text()
    models = sorted(p.relative_to(proj) for p in (proj / "results/runs").glob("*/seed1/model/model.safetensors"))
    assert len(models) == 1 and (clone / models[0]).read_bytes() == (proj / models[0]).read_bytes()
    view = clone / "results/exp/runs/simcse/seed1/model"  # the suite's link into the run store, made again
    assert view.is_symlink() and (view / "model.safetensors").read_bytes() == (proj / models[0]).read_bytes()
    assert "up to date" in _sh(["dvc", "status", "exp", "runs.dvc"], clone, env)  # restoring changed nothing DVC hashes
    assert "Nothing to be done" in _sh(block[-1], clone, env)


@pytest.mark.slow(seconds=5)
@needs_pipeline
def test_the_readmes_dry_run_after_a_hostile_pull_changes_nothing_outside_the_project(tmp_path):
    """The README's `snakemake -n --configfile config/ci.yaml --config front_page=false` after pulling a
    record that names a file outside the project and links to /etc, with a link planted in the run store:
    refused in one line while the link is there, then one warning, and the folder outside the project,
    its files, times and entries, is the same."""
    env = user_env()
    proj = readme_checkout(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "decoy.txt").write_text("not csebench's\n")
    os.utime(outside / "decoy.txt", ns=(10**18, 10**18))

    def snapshot():
        return sorted((str(p.relative_to(tmp_path)), p.is_symlink(), p.lstat().st_mtime_ns)
                      for p in [outside, *outside.rglob("*")])

    before = snapshot()
    suite = proj / "results/ci"
    suite.mkdir(parents=True)
    (suite / "tables.md").write_text("x\n")
    t = 2 * 10**18
    (suite / ".csebench-times.json").write_text(json.dumps({
        "stamp": t, "files": {"../../../outside/decoy.txt": [t, 15], "tables.md": [t, 2], "a": 5},
        "links": {"newdir/deeper/abs_link": ["/etc/hostname", t, None], "inside_link": ["/etc/passwd", t, 10]}}))
    store = proj / "results/runs/0123456789abcdef/seed1"
    store.mkdir(parents=True)
    (store / "notes").symlink_to("/etc/hostname")
    cmd = readme_block("Sharing results with a team")[-1]
    assert cmd == "snakemake -n --configfile config/ci.yaml --config front_page=false"
    out = _sh(cmd, proj, env, ok=False)
    assert (f"csebench: error: results/runs/0123456789abcdef/seed1/notes is a symbolic link to /etc/hostname, outside the "
            f"repository {proj}: DVC would copy") in out, out[-2000:]
    assert snapshot() == before
    (store / "notes").unlink()
    out = _sh(cmd, proj, env)
    assert ("csebench: warning: results/ci/.csebench-times.json: 4 entries ignored (a path out of results/ci, a link out "
            "of results, or malformed)") in out, out[-2000:]
    assert snapshot() == before
    assert sorted(p.name for p in suite.iterdir()) == [".csebench-times.json", "tables.md"]  # no folder, no link made
