"""DistillCSE Table 9: a student's distillation loss (Eq. 2, the objective's own term) on batches of its
training corpus and of STS-B test sentences, against its teachers."""

from __future__ import annotations

from dataclasses import dataclass

from csebench.analysis.base import Analysis, Settings, setting


@dataclass
class DistillLossSettings(Settings):
    logit_batch_size: int = setting(64, "in-batch size N", minimum=1)
    n_batches: int = setting(20, "batches per split", minimum=1)
    seed: int = setting(0, "sampling seed")
    student_temperature: float | None = setting(None, "tau_s (default: the student's run)")
    teacher_temperature: float | None = setting(None, "tau_t (default: the student's run)")
    reduction: str | None = setting(None, "over anchors (default: the run's)", choices=("mean", "sum"))
    max_seq_length: int | None = setting(None, "truncation (default: the run's, else 32)")
    student_representation: str = setting("training", "training = pooler + MLP head as in training; eval = "
                                                      "evaluation embedding", choices=("training", "eval"))


def run(ctx) -> dict:
    from csebench.analysis import distill
    from csebench.analysis.core import stsb_data, stsb_sentences

    s = ctx.settings
    settings, trained_len = distill.run_settings(ctx.model)
    max_len = s.max_seq_length or trained_len or 32
    student = ctx.encoder()
    head = distill.attach_training_head(student, ctx.model) if s.student_representation == "training" else False
    train_head = head or bool(student.projection_dim)
    teachers = [distill.batch_embedder(ctx.encoder(t, pooler=None), max_len, train_head=False) for t in ctx.teacher]
    res = distill.distillation_loss(
        distill.batch_embedder(student, max_len, train_head=train_head), teachers,
        {"train": ctx.corpus(), "test": stsb_sentences(ctx.senteval_root, "test", ctx.max_sts_pairs)},
        settings=distill.measurement_settings(settings, student_temperature=s.student_temperature,
                                              teacher_temperature=s.teacher_temperature, reduction=s.reduction),
        batch_size=s.logit_batch_size, n_batches=s.n_batches, seed=s.seed)
    res.update({"data": {"train": ctx.args.corpus, "test": stsb_data("test", ctx.max_sts_pairs) + " sentences"}, "max_seq_length": max_len,
                "student_representation": s.student_representation, "student_head": train_head,
                "settings_source": "training_config.json" if settings else "defaults", "teachers_paths": list(ctx.teacher)})
    return res


def pipeline(job) -> None:
    suite, run = job.first_listed()
    teachers = job.params.suite(suite).teacher_jobs(run, job.seed)  # a student's teachers are part of the run
    job.model(), job.run_models(teachers, name="teacher"), job.corpus(), job.senteval(), job.label()


ANALYSIS = Analysis(__name__, "DistillCSE Table 9: distillation loss on training vs test batches", reads="model", run=run,
                    Settings=DistillLossSettings, needs=("model", "teacher", "corpus", "senteval"), pipeline=pipeline,
                    listed=False, gpu=True)
