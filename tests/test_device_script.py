"""benchmarks/device.sh rehearsed here: in a fresh venv holding only torch, transformers and
sentence-transformers, with PIP_NO_INDEX=1 and no csebench installed, its --tiny run on CPU passes every
section but torch.compile (CPU inductor compiles for minutes; it is the last section on the device), and a
budget too short for any section still writes gpu_results.json and gpu.md. The runs take about 20 s (the --tiny
run reads a sample of the bundle's corpus): marked slow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A plain venv that sees this environment's torch, transformers and sentence-transformers, and not
    csebench: one .pth line naming this environment's site-packages, a plain path entry (the .pth files
    in there, csebench's editable install among them, are not processed). A copy of torch would take a
    minute to install and test nothing more."""
    import sysconfig

    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    here = Path(sysconfig.get_paths()["purelib"])
    there = next((venv / "lib").glob("python3*/site-packages"))
    (there / "libraries-of-the-test-environment.pth").write_text(f"{here}\n")
    return venv / "bin"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, shared_dir):
    import runpy

    from runhelpers import run_program

    out = tmp_path_factory.mktemp("bundle") / "device-bundle"
    script = str(ROOT / "benchmarks" / "device_bundle.py")  # the script, forked from this process (its imports loaded)
    proc = run_program(lambda: runpy.run_path(script, run_name="__main__"), [script, str(out)], timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _device_sh(bin_dir: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", PIP_NO_INDEX="1")  # the machine's python3 only
    return subprocess.run([str(ROOT / "benchmarks" / "device.sh"), str(out), *args], env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow(seconds=15)
def test_device_script_tiny_in_a_bare_venv(bare_python, bundle, tmp_path):
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    check = subprocess.run([str(bare_python / "python3"), "-c", "import csebench"], capture_output=True, text=True, env=bare)
    assert check.returncode != 0, "csebench must come from the checkout's src/, not be installed"
    out = tmp_path / "out"
    proc = _device_sh(bare_python, out, "--tiny", "--bundle", str(bundle), "--sections",
                      "correctness,training,large,eval,group_p")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("device: ") and "torch 2.13.0" in proc.stdout.splitlines()[0]
    res = json.loads((out / "gpu_results.json").read_text())
    secs = res["sections"]
    assert list(secs) == ["correctness", "training", "large", "eval", "group_p"]
    assert not [n for n, s in secs.items() if "error" in s or "skipped" in s], secs
    rows = secs["correctness"]["rows"]
    from csebench.study.params import load_params

    terms = {k for m in load_params(ROOT / "params.yaml")["methods"].values() for k in ((m or {}).get("objectives") or {})}
    assert len(terms) >= 11  # the five core terms and the zoo's six
    assert secs["correctness"]["ok"] and {r["terms"] for r in rows} == terms | {"simcse", "all"}
    assert all(r["differs_from_simcse"] for r in rows if r["terms"] not in ("simcse", "all") and r["model"] == "bert-base")
    assert {r["model"] for r in rows} == {"bert-base", "roberta-base"}
    assert all(r["resumed_from"] == 1 and r["resume_rel_diff"] == 0.0 for r in rows if r["terms"] == "all")  # CPU: bitwise
    assert secs["training"]["ratio"] > 0 and secs["eval"]["agree_within_0.01"]
    assert "## GPU check" in (out / "gpu.md").read_text()


@pytest.mark.slow(seconds=2)
def test_a_budget_too_short_still_writes_the_results(bundle, tmp_path):
    """device.py as device.sh runs it (its environment, the same arguments), forked from this process: what is
    checked here is the budget, and the script's start in a bare venv is the test above's."""
    import runpy

    from runhelpers import run_program

    script = str(ROOT / "benchmarks" / "device.py")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PIP_NO_INDEX": "1", "CSEBENCH_DATA_CHECK": "1"}
    proc = run_program(lambda: runpy.run_path(script, run_name="__main__"),
                       [script, "--out", str(tmp_path / "out"), "--tiny", "--bundle", str(bundle), "--budget", "1"],
                       env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    secs = json.loads((tmp_path / "out" / "gpu_results.json").read_text())["sections"]
    assert list(secs) == ["correctness", "training", "large", "eval", "group_p", "compile"]
    assert all("skipped" in s for s in secs.values())


def test_a_correctness_row_that_failed_before_its_first_step_is_rendered_as_failed(monkeypatch):
    """A row whose trainer was refused while building has no losses: gpu.md says so in its cell and in the section's
    line (it was a KeyError that lost the whole report, the rows that passed too)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import device

    ok = {"model": "bert-base", "precision": "fp32", "terms": "simcse", "ok": True, "losses": [2.1, 1.9]}
    refused = {"model": "bert-base", "precision": "fp32", "terms": "debiased_negatives", "ok": False,
               "error": "DataError: teacher cache ..."}
    text = device.render({"versions": {}, "sections": {"correctness": {"rows": [ok, refused], "complete": True}}})
    assert "| simcse | 1.900 |" in text
    assert "| debiased_negatives | no step FAILED |" in text
    assert "FAILED: bert-base fp32 debiased_negatives" in text
