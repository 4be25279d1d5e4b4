"""CPU smoke test of the GPU benchmark (benchmarks/gpu.py --tiny): the script runs end to end on a
tiny model without CUDA, writes its marked section into a copy of the report (never the real
BENCHMARKS.md), keeps the rest of that file, and every number it writes is finite."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_benchmark_tiny_on_cpu(tmp_path, shared_dir):
    import runpy

    from runhelpers import run_program

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import run as bench

    report, raw = tmp_path / "BENCHMARKS.md", tmp_path / "gpu.json"
    report.write_text("# Benchmarks\n\nthe CPU report\n", encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    script = str(ROOT / "benchmarks" / "gpu.py")  # the script as a program, forked from this process (torch loaded)
    proc = run_program(lambda: runpy.run_path(script, run_name="__main__"), [script, "--tiny", "--out", str(report),
                       "--json", str(raw)], cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    text = report.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\nthe CPU report\n")  # the rest of the report is kept
    section = bench.gpu_section(report)
    assert section and "## GPU (measured)" in section and "NOT A GPU MEASUREMENT" in section
    for heading in ("### a. Correctness", "### b. Training throughput", "### c. STS evaluation", "### d. Group-P"):
        assert heading in section
    assert "nan" not in section.lower() and "inf " not in section.lower()

    res = json.loads(raw.read_text())
    assert res["info"]["device"] == "cpu"
    grid = res["correctness"]["grid"]
    ran = [r for r in grid if "note" not in r]
    assert ran and all(r["finite"] and all(math.isfinite(x) for x in r["losses"]) for r in ran)
    assert {r["terms"] for r in ran} >= {"simcse", "gaussian_negatives", "instance_smoothing", "layer_negatives", "all"}
    assert all(r["resumed"] and r["bitwise"] and r["ok"] and r["loss_rtol"] == 0.0 for r in res["correctness"]["resume"])
    assert all(r["ok"] for r in res["correctness"]["curve"])
    row = res["training"]["rows"][0]
    assert math.isfinite(row["ours"]["sps"]) and row["ours"]["sps"] > 0 and math.isfinite(row["epoch_s"])
    assert row["mfu"] is None  # no GPU peak for a CPU
    for p in ("bf16", "fp32"):
        assert math.isfinite(res["eval"][p]["ours_s"]) and all(math.isfinite(v) for v in res["eval"][p]["ours"].values())
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 for r in res["group_p"]["rows"])

    # a second run replaces the section instead of appending another
    bench.put_gpu_section(report, "## GPU (measured)\n\nreplaced\n")
    assert report.read_text(encoding="utf-8").count("## GPU (measured)") == 1


def test_compile_rows_start_from_a_fresh_dynamo():
    """Every "compile" row of the correctness grid compiles again: without
    torch._dynamo.reset() between rows, the rows past dynamo's recompile limit ran uncompiled."""
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu

    # torch's own patch: a monkeypatch of its config module deletes recompile_limit when undone (torch 2.13),
    # and every later torch.compile of the worker then fails
    with torch._dynamo.config.patch(recompile_limit=2):

        class Net(torch.nn.Module):  # each row's trainer: the same forward code under new guards
            def __init__(self, k: int):
                super().__init__()
                self.k = k

            def forward(self, x):
                return x * self.k + 1

        def row(k: int, reset: bool) -> int:
            if reset:
                gpu.fresh_compile_state()
            before = gpu.graphs_compiled()
            torch.compile(Net(k), backend="eager")(torch.ones(3))
            return gpu.graphs_compiled() - before

        assert [row(k, reset=True) for k in range(4)] == [1, 1, 1, 1]
        gpu.fresh_compile_state()
        assert [row(k, reset=False) for k in range(4)] == [1, 1, 0, 0]  # what the grid did before
        gpu.fresh_compile_state()
