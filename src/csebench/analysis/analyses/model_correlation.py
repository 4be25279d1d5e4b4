"""DistillCSE Table 8: how a student's STS-B dev cosines correlate with those of its own teachers (S.T.),
of other teachers (O.T.) and of other students (O.S.). The groups are the suite's: computed per suite."""

from __future__ import annotations

import os

from csebench.core.commands import option
from csebench.core.errors import ConfigError
from csebench.analysis.base import Analysis, NoSettings, model_label, unique_labels

GROUPS = {"self_teacher": "the student's own teacher(s) (S.T.)", "other_teachers": "teachers not used by the student (O.T.)",
          "other_students": "students of other teachers (O.S.)"}


def _table_encoders(ctx, models: list[str]) -> dict:
    """model path -> encode function: served by the --embeddings table made from that model (matched
    by the weights' fingerprint, else by the recorded model path), else by the model itself. The
    function's ``table`` attribute is the table used (None: encoded)."""
    from csebench.evaluation.embeddings import EmbeddingTable, model_encoder, model_fingerprint, table_encode

    tables = [EmbeddingTable(t) for t in ctx.embeddings or []]
    used, out = set(), {}
    for m in models:
        fp = model_fingerprint(m) if tables else None  # folders, packaged:minilm and hub ids alike
        match = [t for t in tables if (fp is not None and t.meta.get("model_fingerprint") == fp)
                 or os.path.normpath(str(t.meta.get("model", ""))) == os.path.normpath(m)]
        if match:
            t = match[0]
            used.add(t.path)
            use = ctx.precision or t.meta.get("precision") or "auto"
            out[m] = table_encode(t, m, lambda m=m, use=use: model_encoder(m, ctx.pooler, ctx.batch_size, use),
                                  settings={"precision": ctx.precision}, pooler=ctx.pooler)
        else:
            enc = ctx.encoder(m)
            out[m] = ctx.encode_with(enc)
            out[m].table, out[m].pooler = None, enc.pooler
    unused = [str(t.path) for t in tables if t.path not in used]
    if unused:
        raise ConfigError(f"--embeddings {', '.join(unused)}: made from none of the models given")
    return out


def run(ctx) -> dict:
    from csebench.analysis import distill
    from csebench.analysis.core import stsb_data, stsb_pairs

    groups = {g: getattr(ctx, g) for g in GROUPS}
    paths = [ctx.model] + [m for ms in groups.values() for m in ms]
    encoders = _table_encoders(ctx, list(dict.fromkeys(paths)))
    others = list(dict.fromkeys(paths[1:]))
    labels = dict(zip(others, unique_labels([model_label(p) for p in others])))
    res = distill.model_correlation(encoders[ctx.model], {k: [(labels[m], encoders[m]) for m in ms] for k, ms in groups.items()},
                                    stsb_pairs(ctx.senteval_root, "dev", ctx.max_sts_pairs))
    res["data"] = stsb_data("dev", ctx.max_sts_pairs)
    res["paths"] = {k: {labels[m]: m for m in ms} for k, ms in groups.items()}
    res["tables"] = {p: str(encoders[p].table.path) if encoders[p].table is not None else None for p in encoders}
    res["pooler"] = {p: encoders[p].pooler for p in encoders}
    ctx.tables += [e.table for e in encoders.values()]
    return res


def check(args) -> None:
    if not any(getattr(args, g) for g in GROUPS):
        raise ConfigError("analyze model_correlation needs --self-teacher, --other-teachers and/or --other-students")


def pipeline(job) -> None:
    job.view_models([(job.run, int(job.seed))])
    for group, jobs in job.params.suite(job.suite).correlation_groups(job.run, job.seed).items():
        job.view_models(jobs, name=group)
    job.senteval()


ANALYSIS = Analysis(__name__, "DistillCSE Table 8: a student's cosines against teachers' and students'", reads="model",
                    run=run, Settings=NoSettings, needs=("model", "senteval"), takes=("embeddings",),
                    options=tuple(option(f"--{g.replace('_', '-')}", nargs="+", default=[], help=h) for g, h in GROUPS.items()),
                    check=check, pipeline=pipeline, listed=False, shared=False, gpu=True)
