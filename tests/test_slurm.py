"""The SLURM profile (workflow/profiles/slurm): static checks, and the CI suite through a real SLURM.

The real-SLURM test (marker `slurm`) installs Debian's slurm-wlm and munge, starts a one-node
cluster on localhost (tests/slurm/cluster.sh), builds one tiny run of the ci data (tests/slurm/suite.yaml)
through the production profile (deep-merged with tests/slurm/ci-overrides.yaml: no GPUs, small memory,
squeue status checks)
in a temporary copy of the project, checks the outputs and the jobs SLURM saw, and stops the
daemons. It runs only as root with apt-get, and only when CSEBENCH_SLURM_TEST=1 or CI=true.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "workflow" / "profiles" / "slurm" / "config.yaml"
CLUSTER_SH = REPO / "tests" / "slurm" / "cluster.sh"
OVERRIDES = REPO / "tests" / "slurm" / "ci-overrides.yaml"
BIN = Path(sys.executable).parent
CI_MEM_CAP_MB = 1500
RUN_TIMEOUT_S = 540  # the suite through SLURM; SIGKILL beyond this
# One run through every per-run rule (tests/slurm/suite.yaml: 13 jobs, where the ci suite without its
# analyses is 32 and each SLURM job costs two Snakemake start-ups); CSEBENCH_SLURM_FULL=1 builds the whole
# ci suite, analyses included.
FULL = os.environ.get("CSEBENCH_SLURM_FULL") == "1"
SUITE = "ci" if FULL else "slurm"
CI_EXTRA = [] if FULL else ["--config", "suites=[slurm]", 'params_overrides=["tests/slurm/suite.yaml"]', "analyses=[]"]
# not copied into the temporary project: outputs, environments, caches
SKIP_COPY = {".git", ".venv", "results", "data", ".snakemake", ".dvc", ".pytest_cache", "logs", "benchmarks"}


def load_profile() -> dict:
    return yaml.safe_load(PROFILE.read_text())


def gpu_rules() -> dict[str, int]:
    """Rules whose `resources:` block declares gpu=N (N > 0), from the rule files' text."""
    found = {}
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        chunks = re.split(r"^rule\s+(\w+)\s*:", path.read_text(), flags=re.M)
        for name, body in zip(chunks[1::2], chunks[2::2]):
            block = re.search(r"^\s+resources:\s*\n((?:\s{8,}.*\n)+)", body, flags=re.M)
            m = block and re.search(r"\bgpu\s*=\s*(\d+)", block.group(1))
            if m and int(m.group(1)) > 0:
                found[name] = int(m.group(1))
    from csebench.analysis.pipeline import AnalysisPipeline  # analysis.smk's rules are generated, one per analysis

    found.update({f"analysis_{a.name}": 1 for a in AnalysisPipeline.built() if a.gpu})
    return found


def scored_rows(markdown: str, run: str) -> list[list[str]]:
    """Rows of a Markdown table whose Run cell is `run` and that carry at least 8 scores (7 STS + avg)."""
    rows = []
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and run in cells and sum(bool(re.fullmatch(r"-?\d+\.\d+", c)) for c in cells) >= 8:
            rows.append(cells)
    return rows


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def ci_profile(production: dict, overrides: dict, mem_cap_mb: int = CI_MEM_CAP_MB) -> dict:
    """The production profile scaled to the one-node test cluster: no GPU requests, small memory."""
    prof = deep_merge(production, overrides)
    for res in [prof.get("default-resources", {}), *prof.get("set-resources", {}).values()]:
        if "mem_mb" in res:
            res["mem_mb"] = min(int(res["mem_mb"]), mem_cap_mb)
    for rule in set(gpu_rules()) | set(prof.get("set-resources", {})):
        res = prof.setdefault("set-resources", {}).setdefault(rule, {})
        if rule in gpu_rules() or res.get("gpu") or "gres" in res:
            res["gpu"] = 0
            res.pop("gres", None)
            res.pop("gpu_model", None)
    return prof


# ---------------------------------------------------------------- static checks (fast, always run)


def test_gpu_rules_request_gpu_partition_memory_and_time():
    prof = load_profile()
    rules = gpu_rules()
    assert "train" in rules, "the rule parser no longer finds train's gpu=1"
    default = prof["default-resources"]
    for rule in rules:
        res = prof["set-resources"].get(rule)
        assert res, f"rule {rule} declares gpu but has no set-resources entry in {PROFILE}"
        assert res.get("slurm_partition") and res["slurm_partition"] != default["slurm_partition"], rule
        assert res.get("gpu", rules[rule]) >= 1 and "gres" not in res, rule  # plugin: gpu and gres exclusive
        assert int(res["mem_mb"]) >= 16000 and int(res["runtime"]) >= 60, rule
        assert prof["set-threads"].get(rule, 0) >= 4, rule
    # every CPU rule inherits the CPU partition: no other rule names a GPU partition
    gpu_parts = {prof["set-resources"][r]["slurm_partition"] for r in rules}
    for rule, res in prof["set-resources"].items():
        if rule not in rules:
            assert res.get("slurm_partition", default["slurm_partition"]) not in gpu_parts, rule
            assert not res.get("gpu") and "gres" not in res, rule
    assert prof["executor"] == "slurm" and int(prof["jobs"]) > 1
    assert default["slurm_partition"] and int(default["mem_mb"]) > 0 and int(default["runtime"]) > 0


def test_ci_profile_requests_no_gpu_and_fits_the_node():
    prof = ci_profile(load_profile(), yaml.safe_load(OVERRIDES.read_text()))
    for rule in gpu_rules():
        assert prof["set-resources"][rule]["gpu"] == 0
        assert prof["set-resources"][rule]["slurm_partition"] == load_profile()["set-resources"][rule]["slurm_partition"]
    mems = [r["mem_mb"] for r in prof["set-resources"].values() if "mem_mb" in r] + [prof["default-resources"]["mem_mb"]]
    assert max(mems) <= CI_MEM_CAP_MB
    assert prof["slurm-status-command"] == "squeue" and prof["max-threads"] == 1
    # the production profile itself is untouched
    assert load_profile()["set-resources"]["train"]["mem_mb"] > CI_MEM_CAP_MB


def test_profile_dry_run_submits_train_to_gpu_and_the_rest_to_cpu(tmp_path):
    """Snakemake itself reads the profile: each job's resources as they would go to sbatch."""
    if importlib.util.find_spec("snakemake") is None:
        pytest.skip("snakemake not installed")
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    from runhelpers import run_snakemake

    # forked from this process (Snakemake and its executor plugins imported once); the profile is read by the child
    proc = run_snakemake(["-n", "--forceall", "--nolock", "--profile", str(PROFILE.parent), "--configfile", "config/ci.yaml"],
                         cwd=REPO, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):\n(?:(?!(?:local)?rule ).*\n)*?\s+resources: (.*)$", out, flags=re.M)
    seen = {}
    for rule, res in jobs:
        seen.setdefault(rule, dict(kv.split("=", 1) for kv in res.split(", ") if "=" in kv))
    assert {"train", "eval_sts", "report"} <= set(seen), sorted(seen)
    assert seen["train"]["slurm_partition"] == "gpu" and seen["train"]["gpu"] == "1"
    assert int(seen["train"]["mem_mb"]) >= 16000
    for rule, res in seen.items():
        if rule not in gpu_rules() and rule != "all":
            assert res.get("slurm_partition") == "cpu" and res.get("gpu", "0") == "0", (rule, res)


# ---------------------------------------------------------------- a real one-node SLURM


def _gate() -> str | None:
    if not (os.environ.get("CSEBENCH_SLURM_TEST") == "1" or os.environ.get("CI") == "true"):
        return "set CSEBENCH_SLURM_TEST=1 (or CI=true) to install and start a one-node SLURM"
    if os.geteuid() != 0:
        return "needs root (installs slurm-wlm and munge, starts daemons)"
    if not shutil.which("apt-get"):
        return "needs apt-get (Debian's slurm-wlm and munge packages)"
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _sh(args, timeout, **kw) -> subprocess.CompletedProcess:
    """Run bounded: SIGKILL after `timeout` seconds (a hung Snakemake ignores SIGTERM)."""
    return subprocess.run(["timeout", "-s", "KILL", str(timeout), *map(str, args)], text=True, **kw)


def _tail(path: Path, n: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else f"({path} missing)"


@pytest.fixture()
def slurm_cluster():
    reason = _gate()
    if reason:
        pytest.skip(reason)
    t0 = time.monotonic()
    inst = _sh(["bash", CLUSTER_SH, "install"], 300, capture_output=True)
    assert inst.returncode == 0, f"installing slurm-wlm/munge failed:\n{inst.stdout}\n{inst.stderr}"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pip = _sh([sys.executable, "-m", "pip", "install", "--quiet", "snakemake-executor-plugin-slurm"], 300,
                  capture_output=True)
        assert pip.returncode == 0, pip.stderr
    t_install = time.monotonic() - t0
    cluster = Path(tempfile.mkdtemp(prefix="csebench-slurm.", dir="/tmp"))  # munge user must reach it
    ctld, slurmd = _free_ports(2)
    try:
        start = _sh(["bash", CLUSTER_SH, "start", cluster, ctld, slurmd], 120, capture_output=True)
        assert start.returncode == 0, (
            f"starting the cluster failed:\n{start.stdout}\n{start.stderr}\n"
            f"{_tail(cluster / 'log' / 'slurmctld.log')}\n{_tail(cluster / 'log' / 'slurmd.log')}"
        )
        yield {"dir": cluster, "conf": cluster / "slurm.conf", "t_install": t_install,
               "t_start": time.monotonic() - t0 - t_install}
    finally:
        stop = _sh(["bash", CLUSTER_SH, "stop", cluster], 60, capture_output=True)
        print(stop.stdout, stop.stderr)
        for pidfile in [cluster / "run" / "slurmd.pid", cluster / "run" / "slurmctld.pid", cluster / "munge" / "munged.pid"]:
            if pidfile.exists() and pidfile.read_text().strip().isdigit():
                assert not Path(f"/proc/{pidfile.read_text().strip()}").exists(), f"{pidfile} still running"
        shutil.rmtree(cluster, ignore_errors=True)


@pytest.mark.slurm(seconds=200)
def test_a_suite_runs_through_a_real_slurm(slurm_cluster, tmp_path):
    t0 = time.monotonic()
    project = tmp_path / "project"
    shutil.copytree(REPO, project, symlinks=True,
                    ignore=lambda d, names: [n for n in names if Path(d) == REPO and n in SKIP_COPY])
    profile = tmp_path / "profile"
    profile.mkdir()
    merged = ci_profile(load_profile(), yaml.safe_load(OVERRIDES.read_text()))
    (profile / "config.yaml").write_text(yaml.safe_dump(merged, sort_keys=False))

    shared = os.environ.get("CSEBENCH_SHARED") or str((REPO / "../shared").resolve())
    env = dict(os.environ, SLURM_CONF=str(slurm_cluster["conf"]), CSEBENCH_SHARED=shared, TOKENIZERS_PARALLELISM="false",
               PATH=f"{BIN}:{os.environ.get('PATH', '')}")
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):  # the jobs set it themselves
        env.pop(var, None)
    log = tmp_path / "snakemake.log"
    with log.open("w") as fh:
        run = _sh([BIN / "snakemake", "--profile", profile, "--configfile", "config/ci.yaml", *CI_EXTRA], RUN_TIMEOUT_S,
                  cwd=project, env=env, stdout=fh, stderr=subprocess.STDOUT)
    t_run = time.monotonic() - t0
    jobs = _sh(["squeue", "-h", "-t", "all", "-o", "%i|%P|%T|%C|%k"], 30, env=env, capture_output=True)
    print(f"\nSLURM test timings: install {slurm_cluster['t_install']:.0f} s, cluster start "
          f"{slurm_cluster['t_start']:.0f} s, {SUITE} suite via SLURM {t_run:.0f} s\n{jobs.stdout}")
    assert run.returncode == 0, (
        f"snakemake via SLURM failed (rc {run.returncode}; -9 = killed after {RUN_TIMEOUT_S} s):\n{_tail(log, 80)}\n"
        + "".join(f"\n--- {p}\n{_tail(p, 15)}" for p in sorted((project / ".snakemake" / "slurm_logs").rglob("*.log")))
        + "\n--- slurmctld.log\n"
        f"{_tail(slurm_cluster['dir'] / 'log' / 'slurmctld.log', 30)}"
    )
    log_text = log.read_text()

    # outputs: the STS table has a result row for the SimCSE run
    table = project / "results" / SUITE / "tables" / "sts.md"
    assert table.exists(), log_text[-3000:]
    assert scored_rows(table.read_text(), "simcse"), table.read_text()

    # SLURM ran the jobs: squeue still lists them (MinJobAge 900 s), by rule, partition and state
    assert jobs.returncode == 0, jobs.stderr
    seen = [line.split("|") for line in jobs.stdout.splitlines() if line.strip()]
    by_rule: dict[str, list[tuple[str, str]]] = {}
    for _, part, state, _cpus, comment in seen:
        m = re.match(r"rule_(\w+?)_wildcards|rule_(\w+)$", comment)
        if m:
            by_rule.setdefault(m.group(1) or m.group(2), []).append((part, state))
    for rule in ["train", "eval_sts", "report"]:
        assert rule in by_rule, f"no SLURM job for rule {rule}: {jobs.stdout}"
    # what downloads ran on the submitting host (localrules, csebench.study.fetch); every submitted job ran offline
    assert "prepare_corpus" not in by_rule and "prepare_senteval" not in by_rule, jobs.stdout
    assert (project / "data" / "ci" / "corpus.txt").is_file()
    train_logs = sorted((project / "results" / "runs").glob("*/seed*/logs/train.log"))
    assert train_logs and all("hub downloads: off (HF_HUB_OFFLINE=1)" in p.read_text() for p in train_logs)
    assert all(state == "COMPLETED" for jl in by_rule.values() for _, state in jl), jobs.stdout
    for rule in gpu_rules():  # train, teacher_cache: the production profile's GPU partition
        assert all(part == "gpu" for part, _ in by_rule.get(rule, [])), jobs.stdout
    assert all(part == "cpu" for rule, jl in by_rule.items() if rule not in gpu_rules() for part, _ in jl), jobs.stdout
    # the job-completion log agrees
    jobcomp = (slurm_cluster["dir"] / "log" / "jobcomp.txt").read_text()
    assert jobcomp.count("JobState=COMPLETED") >= len(seen) > 0, jobcomp
