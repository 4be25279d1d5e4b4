"""`csebench compare RUN_DIR RUN_DIR [...]`: runs side by side, read from their folders alone (no params.yaml, no
suite): each run's STS scores (and transfer's, where it was evaluated), the mean over its seeds, and the paired test
of its average against the first run's, the test the suite tables use (csebench.core.stats): a paired t-test over
the seeds both have when they share two or more, else (STS) a paired bootstrap over the STS sentence pairs of one
common seed. Printed as a table, and written as Markdown, LaTeX or CSV on request, each with the capped-evaluation
caveat where a score was scored on capped sets, and the provenance line.

A RUN_DIR is one seed of a run (its own folder, results/runs/KEY/seedN; a suite's view of it,
results/SUITE/runs/RUN/seedN; any run folder `csebench train --out` wrote) or a folder whose ``seedN/`` folders are
seeds of one run (results/runs/KEY). In a seed's folder the STS scores are, first found: its sts.json (a view),
its evaluation folder's (eval-fp32, else the first eval-*/ by name), the trained side of `csebench train`'s closing
comparison (sts_vs_untrained.json, a run of your own). The per-pair cosines beside them (sts_pairs.npz,
sts_vs_untrained_pairs.npz) are what the bootstrap resamples.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from csebench.core.errors import ConfigError, DataError
from csebench.core.provenance import blocks_of, summary_line
from csebench.core.stats import TestResult, paired_bootstrap_sts, paired_ttest
from csebench.results.runs import KINDS, caveat_line, number, read_json_cached
from csebench.results.tables import DASH, Table, csv_number, fmt, fmt_p, latex_escape

COMPARISON_FILE, COMPARISON_PAIRS = "sts_vs_untrained.json", "sts_vs_untrained_pairs.npz"  # csebench.training.compare's


@dataclass
class Scores:
    """One kind of result (STS or transfer) of one seed: its scores, the file's dict, the per-pair file (STS)."""
    tasks: dict[str, float | None]
    avg: float | None
    result: dict
    pairs: str | None = None


@dataclass
class Run:
    """One run as compare reads it: its label, folder, and per seed its STS and transfer scores."""
    label: str
    folder: Path
    sts: dict[int, Scores] = field(default_factory=dict)
    transfer: dict[int, Scores] = field(default_factory=dict)
    train: dict[int, dict] = field(default_factory=dict)

    def seeds(self, kind: str) -> list[int]:
        return sorted(getattr(self, kind))

    def mean_std(self, kind: str) -> tuple[list[float | None], list[float | None]]:
        """Per task then the average: the mean over the seeds that have it, and its sample std (None under 2)."""
        got = getattr(self, kind)
        means, stds = [], []
        for task in [*KINDS[kind].tasks, None]:
            vals = [v for s in got.values() if (v := (s.avg if task is None else s.tasks.get(task))) is not None]
            means.append(float(np.mean(vals)) if vals else None)
            stds.append(float(np.std(vals, ddof=1)) if len(vals) > 1 else None)
        return means, stds


def _scores(path: Path, kind: str, pairs: Path | None = None) -> Scores | None:
    res = read_json_cached(path)
    if not isinstance(res, dict):
        return None
    if path.name == COMPARISON_FILE:  # a run of your own: the trained side of its closing comparison
        res = {**res, **(res.get("trained") or {}), "protocol": res.get("protocol", "full")}
    tasks = {t: number((res.get("tasks") or {}).get(t)) for t in KINDS[kind].tasks}
    avg = number(res.get("avg")) if all(v is not None for v in tasks.values()) else None
    if avg is None and all(v is not None for v in tasks.values()):
        avg = float(np.mean(list(tasks.values())))
    return Scores(tasks, avg, res, str(pairs) if pairs is not None and pairs.is_file() else None)


def _results_folder(seed_dir: Path) -> Path:
    """Where a seed folder's sts.json and transfer.json are: itself (a suite's view), else its evaluation folder
    (eval-fp32, the papers' protocol, else the first eval-*/ by name), else itself."""
    if (seed_dir / "sts.json").is_file() or (seed_dir / "transfer.json").is_file():
        return seed_dir
    evaluated = sorted(p.parent for p in seed_dir.glob("eval-*/sts.json"))
    return next((p for p in evaluated if p.name == "eval-fp32"), evaluated[0] if evaluated else seed_dir)


def _seed_of(seed_dir: Path, train: dict) -> int:
    m = re.fullmatch(r"seed(\d+)", seed_dir.name)
    if m:
        return int(m.group(1))
    seed = train.get("seed")
    return int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else 0


def read_run(folder: str | os.PathLike) -> Run:
    """A RUN_DIR: one seed's folder, or a folder of seedN/ folders (every seed with a result)."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"{folder}: no such run folder (a run's folder, results/runs/KEY/seedN, a suite's view of it, "
                          "results/SUITE/runs/RUN/seedN, or results/runs/KEY holding its seeds)")
    seeds = sorted((p for p in root.glob("seed*") if p.is_dir() and re.fullmatch(r"seed\d+", p.name)),
                   key=lambda p: int(p.name[4:]))
    has_own = any((root / f).is_file() for f in ("train.json", "sts.json", COMPARISON_FILE)) or any(root.glob("eval-*/sts.json"))
    run = Run(str(folder), root)
    for seed_dir in ([root] if has_own or not seeds else seeds):
        train = read_json_cached(seed_dir / "train.json") or {}
        seed = _seed_of(seed_dir, train)
        where = _results_folder(seed_dir)
        sts = _scores(where / "sts.json", "sts", where / "sts_pairs.npz")
        if sts is None:
            sts = _scores(seed_dir / COMPARISON_FILE, "sts", seed_dir / COMPARISON_PAIRS)
        transfer = _scores(where / "transfer.json", "transfer")
        if sts is not None:
            run.sts[seed] = sts
        if transfer is not None and transfer.result.get("protocol") != "off":
            run.transfer[seed] = transfer
        if train:
            run.train[seed] = train
    if not run.sts and not run.transfer:
        raise DataError(f"{folder}: no STS or transfer result (sts.json, eval-*/sts.json, {COMPARISON_FILE}, transfer.json) "
                        "in it or its seed folders: evaluate the run first (`csebench eval-sts --model "
                        f"{Path(folder) / 'model'} --out {Path(folder) / 'sts.json'} --pairs-out {Path(folder) / 'sts_pairs.npz'}`)")
    name = next((str(t["run"]).rsplit("/seed", 1)[0] for t in run.train.values() if t.get("run")), None)
    suite = next((t["suite"] for t in run.train.values() if t.get("suite")), None)
    run.label = f"{suite}/{name}" if name and suite else name or root.name
    return run


def _bootstrap(a: Run, b: Run, n_boot: int) -> TestResult:
    """The paired bootstrap over STS pairs of one seed of each: a common seed's where there is one, else each run's
    first; both must have per-pair cosines of the same pairs."""
    from csebench.evaluation.sts import TEST_TASKS, load_pairs

    common = sorted(set(a.sts) & set(b.sts))
    sa, sb = (common[0], common[0]) if common else (min(a.sts), min(b.sts))
    pa, pb = a.sts[sa].pairs, b.sts[sb].pairs
    if not (pa and pb):
        return TestResult("none", None, None, 0, {"reason": "fewer than 2 common seeds and no per-pair similarities "
                                                            "(sts_pairs.npz: eval-sts --pairs-out)"})
    try:
        res = paired_bootstrap_sts(load_pairs(pa), load_pairs(pb), TEST_TASKS, n_boot=n_boot)
    except (ValueError, KeyError) as exc:  # other pairs (another cap or SentEval copy): nothing to pair
        return TestResult("none", None, None, 0, {"reason": f"not the same STS pairs ({exc})"})
    res.detail.update(seed_run=sa, seed_baseline=sb)
    return res


def paired_test(run: Run, base: Run, kind: str, n_boot: int = 1000) -> TestResult:
    """``run``'s average against ``base``'s, as the suite tables test it: a paired t-test over two or more common
    seeds, else (STS) a paired bootstrap over the sentence pairs; a TestResult "none" with its reason otherwise."""
    a = {s: r.avg for s, r in getattr(run, kind).items() if r.avg is not None}
    b = {s: r.avg for s, r in getattr(base, kind).items() if r.avg is not None}
    if not (a and b):
        return TestResult("none", None, None, 0, {"reason": "no average to compare"})
    if len(set(a) & set(b)) >= 2:
        return paired_ttest(a, b)
    if kind == "sts":
        return _bootstrap(run, base, n_boot)
    return TestResult("none", None, None, 0, {"reason": "fewer than 2 common seeds (no per-item bootstrap for transfer)"})


def p_cells(test: TestResult | None) -> tuple[str, str]:
    """(p cell, test cell); the first run is the baseline."""
    if test is None:
        return "baseline", DASH
    if test.p_value is None:
        return DASH, "none: " + test.detail.get("reason", "")
    if test.test.startswith("paired t-test"):
        return fmt_p(test.p_value), f"paired t-test, {test.n} seeds"
    return fmt_p(test.p_value), f"paired bootstrap, {test.n} resamples"


@dataclass
class Comparison:
    kind: str
    runs: list[Run]
    tests: list[TestResult | None]  # None for the first run, the baseline

    @property
    def columns(self) -> list[str]:
        return [*KINDS[self.kind].columns, "Avg."]

    def results(self) -> list[dict]:
        return [s.result for r in self.runs for s in getattr(r, self.kind).values()]

    @property
    def caveat(self) -> str:
        return caveat_line(self.results())

    @property
    def provenance(self) -> str:
        train = [t for r in self.runs for t in r.train.values()]
        return summary_line([b for res in [*self.results(), *train] for b in blocks_of(res)])


def compare(folders: list[str | os.PathLike], n_boot: int = 1000) -> list[Comparison]:
    """The STS comparison, and the transfer one where a run has transfer results (a run without shows dashes)."""
    if len(folders) < 2:
        raise ConfigError("compare: give two run folders or more")
    runs = [read_run(f) for f in folders]
    labels = [r.label for r in runs]
    for i, r in enumerate(runs):  # one run name for two runs (two runs of your own with other settings): numbered
        if labels.count(r.label) > 1:
            r.label = f"{r.label} #{i + 1}"
    out = []
    for kind in ("sts", "transfer"):
        present = [r for r in runs if getattr(r, kind)]
        if not present:
            continue
        base = runs[0] if getattr(runs[0], kind) else None
        tests = [None] + [paired_test(r, base, kind, n_boot) if base is not None and getattr(r, kind)
                          else TestResult("none", None, None, 0, {"reason": f"no {kind} result" if base is not None
                                                                  else f"the first run has no {kind} result"})
                          for r in runs[1:]]
        out.append(Comparison(kind, runs, tests))
    return out


def _cells(c: Comparison, run: Run) -> tuple[list[float | None], list[float | None]]:
    return run.mean_std(c.kind) if getattr(run, c.kind) else ([None] * len(c.columns), [None] * len(c.columns))


def _legend(c: Comparison) -> str:
    return (f"{KINDS[c.kind].title} ({KINDS[c.kind].unit}); ours: the mean over a run's seeds (± sample std with two or "
            f"more). p: two-sided paired test of the average against the first run, {c.runs[0].label} (a paired t-test "
            "over two or more common seeds, else a paired bootstrap over the STS sentence pairs).")


def terminal_lines(c: Comparison) -> list[str]:
    """The comparison as the terminal shows it: a row per run, its seeds, scores, p and test."""
    names = [r.label for r in c.runs]
    width = max(len(n) for n in [*names, "run"]) + 2
    head = f"{'run':<{width}}{'seeds':>6}" + "".join(f"{n:>9}" for n in c.columns) + f"{'p':>9}  test"
    lines = [_legend(c), head]
    for run, test in zip(c.runs, c.tests):
        means, _ = _cells(c, run)
        p, which = p_cells(test)
        lines.append(f"{run.label:<{width}}{len(getattr(run, c.kind)):>6}" + "".join(f"{fmt(m):>9}" for m in means)
                     + f"{p:>9}  {which}")
    lines += [f"{i + 1}. {r.label}: {r.folder}" for i, r in enumerate(c.runs)]
    return lines + ([c.caveat] if c.caveat else []) + [c.provenance]


def markdown(cs: list[Comparison]) -> str:
    out = ["# Runs compared", ""]
    for c in cs:
        t = Table(["Run", "Seeds", *c.columns, "p", "Paired test"], "lr" + "r" * len(c.columns) + "rl")
        for run, test in zip(c.runs, c.tests):
            means, stds = _cells(c, run)
            cells = [fmt(m) + (f" ± {fmt(s)}" if s is not None else "") for m, s in zip(means, stds)]
            t.rows.append([f"**{run.label}**", str(len(getattr(run, c.kind))), *cells, *p_cells(test)])
        out += [f"## {KINDS[c.kind].title}", "", _legend(c), "", *([f"**{c.caveat}**", ""] if c.caveat else []),
                *t.markdown(), ""]
    folders = cs[0].runs if cs else []
    out += ["Folders: " + "; ".join(f"{r.label}: `{r.folder}`" for r in folders) + ".", ""]
    out += [cs[0].provenance if cs else "", ""]
    return "\n".join(out)


def latex(cs: list[Comparison]) -> str:
    lines = [r"% Generated by csebench compare; needs \usepackage{booktabs}."]
    for c in cs:
        t = Table(["Run", *map(latex_escape, c.columns), "$p$"], "l" + "r" * len(c.columns) + "l")
        for run, test in zip(c.runs, c.tests):
            means, stds = _cells(c, run)
            cells = [latex_escape(fmt(m)) + (rf"$_{{\pm {s:.2f}}}$" if s is not None else "") for m, s in zip(means, stds)]
            p = latex_escape(p_cells(test)[0]).replace("<", "$<$")
            if test is not None and test.p_value is not None:
                p += "$^{t}$" if test.test.startswith("paired t-test") else "$^{b}$"
            t.rows.append([latex_escape(f"{run.label} (n={len(getattr(run, c.kind))})"), *cells, p])
        caption = (_legend(c).replace("(a paired t-test", "(t: a paired t-test").replace(", else a paired", "; b: a paired")
                   + (f" {c.caveat}" if c.caveat else ""))
        lines += ["% " + c.provenance, r"\begin{table*}[t]", r"\centering", r"\small", *t.latex(),
                  r"\caption{" + latex_escape(caption) + "}", r"\label{tab:compare-" + c.kind + "}", r"\end{table*}", ""]
    return "\n".join(lines)


CSV_HEADER = ["kind", "run", "folder", "seeds", "column", "mean", "std", "p_vs_first", "test", "caveat", "provenance"]


def csv_rows(cs: list[Comparison]) -> list[list]:
    rows = []
    for c in cs:
        for run, test in zip(c.runs, c.tests):
            means, stds = _cells(c, run)
            p = "" if test is None or test.p_value is None else f"{test.p_value:.6g}"
            which = "baseline" if test is None else test.test
            seeds = " ".join(map(str, run.seeds(c.kind)))
            rows += [[c.kind, run.label, str(run.folder), seeds, col, csv_number(m), csv_number(s), p, which, c.caveat,
                      c.provenance] for col, m, s in zip(c.columns, means, stds)]
    return rows
