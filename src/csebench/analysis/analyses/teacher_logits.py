"""DistillCSE Fig. 1 and Tables 1-2: the in-batch logits of teacher models on training batches and on
STS-B dev (means, spreads, KL, sharpness), and how much the teachers agree. The suite's teachers:
``run`` at ``seeds`` (default: the components its DistillCSE runs distil from)."""

from __future__ import annotations

from dataclasses import dataclass

from csebench.analysis.base import Analysis, Settings, setting


@dataclass
class TeacherLogitsSettings(Settings):
    run: str | None = setting(None, "the teachers' run (default: the suite's DistillCSE teachers, else simcse, else its "
                                    "first run)", cli=False)
    seeds: list[int] | None = setting(None, "the teachers' seeds (default: those DistillCSE runs distil from, else the "
                                            "suite's seeds of the run)", minimum=0, cli=False)
    logit_batch_size: int = setting(64, "in-batch size N", minimum=1)
    n_batches: int = setting(20, "training batches", minimum=1)
    temperature: float = setting(0.05, "softmax temperature of sharpness")
    seed: int = setting(0, "sampling seed")


def run(ctx) -> dict:
    from csebench.analysis.core import stsb_data, stsb_pairs, teacher_logit_stats

    s = ctx.settings
    encs = [ctx.encode_with(ctx.encoder(p, "--teacher"), precision=None) for p in ctx.teacher]
    res = teacher_logit_stats(encs, ctx.corpus(), stsb_pairs(ctx.senteval_root, "dev", ctx.max_sts_pairs), batch_size=s.logit_batch_size,
                              n_batches=s.n_batches, temperature=s.temperature, seed=s.seed)
    res["teachers_paths"] = list(ctx.teacher)
    res["testing_data"] = stsb_data("dev", ctx.max_sts_pairs)
    if ctx.figure:
        from csebench.results.analysis_plots import plot_teacher_logits

        plot_teacher_logits(res, ctx.figure, title=f"Teacher logits ({len(ctx.teacher)} teacher(s)), batch size "
                                                   f"{s.logit_batch_size}", footer=ctx.footer())
    return res


def pipeline(job) -> None:
    runs, suite = job.runs(), job.params.suite(job.suite)
    names = [r for r, _ in runs]
    distill = sorted((suite.teacher_jobs(r, s) for r, s in runs), key=len)
    run = job.settings.run or (distill[-1][0][0] if distill and distill[-1] else ("simcse" if "simcse" in names else names[0]))
    seeds = job.settings.seeds or sorted({s for t in distill for r, s in t if r == run}) or [s for r, s in runs if r == run]
    job.view_models([(run, int(s)) for s in seeds], name="teacher")
    job.corpus(), job.senteval()


ANALYSIS = Analysis(__name__, "DistillCSE Fig. 1, Tables 1-2: teachers' in-batch logits", reads="suite", run=run,
                    Settings=TeacherLogitsSettings, needs=("teacher", "corpus", "senteval"), writes=("figure",),
                    pipeline=pipeline)
