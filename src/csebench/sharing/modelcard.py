"""Model cards: a README.md in every run's model/ folder, made from a run folder alone.

The card follows the hub's model-card conventions (a YAML block with tags, datasets, base_model,
library_name, pipeline_tag and a model-index of the STS scores, then Markdown). It says what the model
is (method and papers, backbone, pooler, which output is the sentence embedding), every resolved
hyperparameter (model/training_config.json), the training data, the results the run folder holds
(train.json's development scores, sts.json, transfer.json, and MTEB's result files under mteb/ where
that evaluation ran), how to load it with sentence-transformers and with transformers, its provenance
and the citations. Nothing in it depends on when or where it is made: the same run gives the same card.

A run folder is either a run's own folder (RESULTS/runs/KEY/seedN: train.json and model/ there, the
results in its evaluation folder, eval-fp32 first) or a suite's view of it (RESULTS/SUITE/runs/RUN/seedN:
that suite's names and results in one place, MTEB's included, model/ a link to the run's). A run has one
model/, so one card: it is written as model/README.md and, beside that model/ in the run's own folder,
as model_card.md (docs/runs.md).

Under Snakemake (workflow/rules/card.smk) the card is made once per run, from the view of the first suite
of params.yaml that evaluates it, after its evaluations: model/ is the train rule's output and is complete
before any result exists. The model_card rule declares RUN/model_card.md and installs the same text as
model/README.md. No rule takes model/ as an input (they read it through train.json), so that file reruns
nothing; the embeddings fingerprint skips README.md (it is no weight), and .dvcignore keeps it out of
DVC's hash of the train stage's model/ output.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import os
from pathlib import Path

from csebench.core.errors import DataError
from csebench.core.io import dumps_json, write_text

CARD_FILE = "model_card.md"  # RUN/model_card.md: the model_card rule's output
README = "README.md"  # RUN/model/README.md: the same card, where the hub and sentence-transformers look
HUB_IDS = {"packaged:minilm": "sentence-transformers/all-MiniLM-L6-v2"}  # what the packaged backbones are
SENTEVAL_REPO = "princeton-nlp/datasets-for-simcse"  # senteval.tar, the evaluation data
STS_TASKS = [("STS12", "STS12"), ("STS13", "STS13"), ("STS14", "STS14"), ("STS15", "STS15"), ("STS16", "STS16"),
             ("STSBenchmark", "STS-B"), ("SICKRelatedness", "SICK-R")]
TRANSFER_TASKS = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
EMBEDDING = {  # evaluation pooler -> (what the sentence embedding is, how transformers computes it)
    "cls_before_pooler": ("`last_hidden_state[:, 0]`, the [CLS] vector before any pooler (SimCSE's `cls_before_pooler`)",
                          "out.last_hidden_state[:, 0]"),
    "avg": ("the attention-masked mean of `last_hidden_state` (SimCSE's `avg`)",
            "masked_mean(out.last_hidden_state)"),
    "avg_first_last": ("the attention-masked mean of (`hidden_states[1]` + `hidden_states[-1]`) / 2, the first and "
                       "last transformer layers (SimCSE's `avg_first_last`)",
                       "masked_mean((out.hidden_states[1] + out.hidden_states[-1]) / 2)"),
    "avg_top2": ("the attention-masked mean of (`hidden_states[-2]` + `hidden_states[-1]`) / 2, the last two layers "
                 "(SimCSE's `avg_top2`)", "masked_mean((out.hidden_states[-2] + out.hidden_states[-1]) / 2)"),
}


@functools.cache
def citations() -> dict:
    from csebench.core.schema import load_yaml_text

    text = importlib.resources.files("csebench").joinpath("resources/citations.yaml").read_text(encoding="utf-8")
    return load_yaml_text(text, "resources/citations.yaml")


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (ValueError, UnicodeDecodeError):
        raise DataError(f"{path} is not valid JSON: rerun the step that writes it") from None


def _evaluation(path: Path, kind: str) -> dict | None:
    """sts.json or transfer.json as the tables read them (csebench.results.runs): a number changed by hand is one line."""
    from csebench.results.runs import check_scores, read_result

    if not path.is_file():
        return None
    data = read_result(path)
    check_scores(path, data, kind)
    return data


def results_folder(run: Path) -> Path:
    """Where a run folder's sts.json and transfer.json are: in a suite's view, the folder itself; in a
    run's own folder, its evaluation folder (eval-fp32, the papers' protocol, else the first by name)."""
    if (run / "sts.json").is_file() or (run / "transfer.json").is_file():
        return run
    evaluated = sorted(p.parent for p in run.glob("eval-*/sts.json"))
    return next((p for p in evaluated if p.name == "eval-fp32"), evaluated[0] if evaluated else run)


def load_run(run_dir: str | os.PathLike) -> dict:
    """Everything a card is made from: the run folder's train.json, model/ metadata and results. The
    names are the folder's (a suite's view has that suite's in train.json and sts.json)."""
    run = Path(run_dir)
    train, config = _json(run / "train.json"), _json(run / "model" / "training_config.json")
    if train is None or config is None:
        missing = "train.json" if train is None else "model/training_config.json"
        raise DataError(f"{run} has no {missing}: not a finished csebench run folder (RESULTS/runs/KEY/seedN, or a "
                        "suite's view of it RESULTS/SUITE/runs/RUN/seedN); train it first")
    results = results_folder(run)
    sts, transfer = _evaluation(results / "sts.json", "sts"), _evaluation(results / "transfer.json", "transfer")
    info = (sts or transfer or {}).get("run_info") or {}
    names = {"suite": train.get("suite"), "name": str(train.get("run", "")).rsplit("/seed", 1)[0],
             "method_label": info.get("method_label")}
    config = {**config, **{k: v for k, v in names.items() if v}}
    from csebench.training.compare import COMPARISON_FILE

    return {"dir": run, "train": train, "config": config, "meta": _json(run / "model" / "csebench_encoder.json") or {},
            "hf": _json(run / "model" / "config.json") or {}, "sts": sts, "transfer": transfer,
            "mteb": mteb_rows(run / "mteb"), "comparison": None if sts is not None else _json(run / COMPARISON_FILE)}


def mteb_rows(folder: Path) -> list[tuple[str, str, str, float]]:
    """(task, split, subset, main score x100) of MTEB's own result files under ``folder`` (any depth), if any."""
    rows = []
    for f in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
        data = _json(f)
        if not (isinstance(data, dict) and "task_name" in data and isinstance(data.get("scores"), dict)):
            continue  # model_meta.json and the like
        for split, entries in sorted(data["scores"].items()):
            for e in entries or []:
                if isinstance(e, dict) and isinstance(e.get("main_score"), (int, float)):
                    rows.append((data["task_name"], split, str(e.get("hf_subset", "default")), 100 * e["main_score"]))
    return rows


def _num(x) -> str:
    return "–" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{x:.2f}"


def _value(v) -> str:
    return v if isinstance(v, str) else dumps_json(v, indent=None)


def _flat(prefix: str, d: dict) -> list[tuple[str, str]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out += _flat(f"{prefix}{k}.", v)
        else:
            out.append((f"{prefix}{k}", _value(v)))
    return out


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def cited_keys(objectives) -> list[str]:
    """The papers a trained run cites, in order: SimCSE's InfoNCE (every method's base loss), then the paper each
    objective term declares (its class's ``citation``, read from the source), each once."""
    from csebench.objectives import INFONCE_CITATION, term_citation

    return list(dict.fromkeys([INFONCE_CITATION, *(term_citation(t) for t in objectives or {})]))


def _papers(r: dict) -> list[dict]:
    if not r["config"].get("train", True):
        return []
    papers = dict(citations()["papers"])
    from csebench.objectives import TERMS, term_citation

    recorded = ((r.get("train") or {}).get("provenance") or {}).get("term_packages") or {}
    for term in r["config"].get("objectives") or {}:
        if term not in TERMS:  # another package's term, that package not installed here: its citation is its own
            given = f"the package {recorded[term]}" if term in recorded else "a package"
            raise DataError(f"{r.get('dir', 'the run')} was trained with the objective '{term}' of {given}, which is not installed "
                            "here: install it to write the card (its citation is in that package)")

    for term in r["config"].get("objectives") or {}:  # a term of another package may carry its own BibTeX
        key = term_citation(term)
        cls = TERMS.get(term) if term not in TERMS.builtin_names() else None
        bibtex = getattr(cls, "bibtex", None)
        if key not in papers and isinstance(bibtex, str) and bibtex.strip():
            doc = " ".join((cls.__doc__ or "").split())
            papers[key] = {"name": key, "tag": key, "bibtex": bibtex,
                           "term": doc or f"the objective `{term}` of an installed package (its class has no docstring)"}
    keys = cited_keys(r["config"].get("objectives"))
    missing = [k for k in keys if k not in papers]
    if missing:
        raise DataError(f"resources/citations.yaml has no paper {', '.join(missing)}: an objective term cites it "
                        "(its citation), add its BibTeX there (a term of another package: its class's bibtex)")
    return [{**papers[k], "key": k} for k in keys]


def term_packages(r: dict) -> dict[str, str]:
    """Term -> "<package> <version>" of each term of the run that is not csebench's own: as train.json recorded it
    when the run trained (provenance.term_packages), else as installed now (a run trained before that was recorded)."""
    terms = list(r["config"].get("objectives") or {})
    recorded = ((r.get("train") or {}).get("provenance") or {}).get("term_packages") or {}
    from csebench.objectives import TERMS, term_packages as installed

    missing = [t for t in terms if t not in recorded and t not in TERMS.builtin_names()]
    return {t: p for t, p in {**recorded, **(installed(missing) if missing else {})}.items() if t in terms}


def _packages_of(r: dict, paper_key: str) -> list[str]:
    """"objective `t` of the package `p v`" for each term of another package that cites ``paper_key``."""
    from csebench.objectives import term_citation

    return [f"objective `{t}` of the package `{p}`" for t, p in term_packages(r).items() if term_citation(t) == paper_key]


def _base_model(model: str) -> str | None:
    """A hub id for the metadata block; None for a random or local backbone."""
    if model in HUB_IDS:
        return HUB_IDS[model]
    if model == "random" or model.startswith(("/", ".", "~")) or model.count("/") > 1 or os.path.isdir(model):
        return None
    return model


def metadata(r: dict, name: str) -> str:
    """The YAML block (huggingface_hub's ModelCardData writes the hub's field names and model-index)."""
    from huggingface_hub import EvalResult, ModelCardData

    cfg = r["config"]
    sts = r["sts"] or _closing_sts(r)  # a run of your own: `train`'s closing comparison, its trained side
    capped = sts.get("protocol") == "capped"
    metric = "Spearman x100 of cosine similarities" + (" (seeded subset of the pairs, CPU demo scale)" if capped else "")
    results = []
    for key, label in STS_TASKS:
        value = (sts.get("tasks") or {}).get(key)
        if isinstance(value, (int, float)):
            results.append(EvalResult(task_type="sentence-similarity", task_name="Semantic Textual Similarity",
                                      dataset_type=SENTEVAL_REPO, dataset_name=f"{label} (SentEval)", dataset_config=key,
                                      dataset_split="test", metric_type="cosine_spearman", metric_name=metric,
                                      metric_value=round(value, 2)))
    for set_name, res in sorted(((r["sts"] or {}).get("extra_sets") or {}).items()):
        if isinstance(res.get("spearman"), (int, float)):
            results.append(EvalResult(task_type="sentence-similarity", task_name="Semantic Textual Similarity",
                                      dataset_type=set_name, dataset_name=f"{set_name} (own STS data)",
                                      dataset_split=res.get("split"), metric_type="cosine_spearman", metric_name=metric,
                                      metric_value=round(res["spearman"], 2)))
    corpus = cfg["data"]["corpus"]
    tags = ["sentence-transformers", "sentence-similarity", "feature-extraction", "csebench"]
    if cfg.get("train", True):
        tags += ["unsupervised", "contrastive-learning"] + [p["tag"] for p in _papers(r)]
    data = ModelCardData(library_name="sentence-transformers", pipeline_tag="sentence-similarity", tags=tags,
                         base_model=_base_model(cfg["backbone"]["model"]),
                         datasets=[corpus["hub_repo"]] if corpus.get("hub_repo") and cfg.get("train", True) else None,
                         model_name=name if results else None, eval_results=results or None)
    return data.to_yaml()


def _what(r: dict) -> list[str]:
    cfg, train, meta = r["config"], r["train"], r["meta"]
    bb = cfg["backbone"]
    label = bb.get("label") or cfg["backbone_name"]
    out = [f"# {cfg['method_label']} · {label} · seed {cfg['seed']}", ""]
    if not cfg.get("train", True):
        out += [f"The pretrained backbone `{bb['model']}` itself, **not trained**: an evaluation-only run of csebench "
                f"(suite `{cfg['suite']}`, run `{cfg['name']}`, `train: false`), saved with the run's pooler.", ""]
    else:
        papers = _papers(r)
        out += [f"An unsupervised sentence encoder trained by csebench with **{cfg['method_label']}** "
                f"(suite `{cfg['suite']}`, run `{cfg['name']}`, seed {cfg['seed']}) from `{bb['model']}`: "
                f"{train.get('steps')} steps of batch {cfg['training']['batch_size']} on {train.get('corpus_sentences')} "
                "sentences.", "", "## Method", "",
                *[f"- **{p['name']}**: {p['term']}" + "".join(f" ({w}, not csebench's own)" for w in _packages_of(r, p['key']))
                  for p in papers],
                "", _terms_line(cfg.get("objectives") or {}) + " Every setting is listed under [Hyperparameters](#hyperparameters).",
                ""]
    pooler, eval_pooler = meta.get("pooler", bb["pooler"]), meta.get("eval_pooler", "cls_before_pooler")
    proj = meta.get("projection_dim")
    hidden = r["hf"].get("hidden_size")
    emb = EMBEDDING.get(eval_pooler, (f"pooler `{eval_pooler}`", ""))[0]
    if proj:
        kind = "dense + tanh" if meta.get("projection_head") == "linear_tanh" else "dense"
        state = "trained" if cfg.get("train", True) else "untrained (initialised from the seed)"
        emb += f", then the {state} projection head ({kind}, {hidden} → {proj}; `mlp_head.safetensors`)"
    batchnorm = (cfg.get("training") or {}).get("projection_head") == "batchnorm"
    if pooler == "cls" and not proj and cfg.get("train", True) and batchnorm:
        pooler_output = ("The training head was DiffCSE's BatchNorm MLP (`--batchnorm`), dropped at evaluation "
                         "(`--mlp_only_train`; its weights in `mlp_head.safetensors`); not BertPooler's shape, it is not "
                         "saved as the pooler: `pooler_output` is the backbone's own pooler, untouched by training; it is "
                         "not the sentence embedding.")
    elif pooler == "cls" and not proj and cfg.get("train", True):
        pooler_output = ("`pooler_output` is the MLP head (dense + tanh) trained with the contrastive loss and dropped at "
                         "evaluation (SimCSE's `--mlp_only_train`). It is saved as the model's pooler, as in SimCSE's "
                         "released checkpoints, so the folder loads with no weight missing; it is not the sentence embedding.")
    else:
        pooler_output = ("`pooler_output` is the backbone's own pooler, saved untouched by training so the folder loads "
                         "with no weight missing" + (" (a random BERT's: drawn from the seed)" if bb["model"] == "random" else "")
                         + "; it is not the sentence embedding.")
    out += ["## Model", "", f"- Backbone: `{bb['model']}` ({label}), {r['hf'].get('num_hidden_layers', '?')} layers, "
            f"hidden size {hidden}", f"- Training pooler: `{pooler}`; evaluation pooler: `{eval_pooler}`",
            f"- **The sentence embedding** ({proj or hidden} dimensions) is {emb}. Similarity: cosine.",
            f"- {pooler_output}", ""]
    return out


def _terms_line(objectives: dict) -> str:
    """What the run's objective was: SimCSE's InfoNCE alone, or with these terms and their resolved settings."""
    if not objectives:
        return "Objective: SimCSE's InfoNCE alone (no other objective term)."
    return (f"Objective: SimCSE's InfoNCE plus the term{'s' if len(objectives) > 1 else ''} "
            f"{', '.join(f'`{t}`' for t in objectives)}, resolved settings `{dumps_json(objectives, indent=None)}`.")


def _closing_sts(r: dict) -> dict:
    """The trained model's side of `csebench train`'s closing comparison (sts_vs_untrained.json) as an STS result
    (tasks, avg, protocol), or {} without one."""
    c = r.get("comparison") or {}
    trained = c.get("trained") or {}
    return {"tasks": trained.get("tasks") or {}, "avg": trained.get("avg"), "protocol": c.get("protocol")} if trained else {}


def _comparison(c: dict) -> list[str]:
    """The closing comparison of a run of your own (`csebench train --backbone ... --method ...`): this model and the
    untrained backbone with one pooler, their difference."""
    def row(label: str, side: dict, signed: bool = False) -> list[str]:
        cells = [(side.get("tasks") or {}).get(k) for k, _ in STS_TASKS] + [side.get("avg")]
        return [label, *(f"{x:+.2f}" if signed and _num(x) != "–" else _num(x) for x in cells)]

    trained, untrained = c.get("trained") or {}, c.get("untrained") or {}
    diff = {"tasks": {k: trained["tasks"][k] - untrained["tasks"][k] for k, _ in STS_TASKS
                      if isinstance((trained.get("tasks") or {}).get(k), (int, float))
                      and isinstance((untrained.get("tasks") or {}).get(k), (int, float))}}
    if isinstance(trained.get("avg"), (int, float)) and isinstance(untrained.get("avg"), (int, float)):
        diff["avg"] = trained["avg"] - untrained["avg"]
    protocol = ("the full protocol" if c.get("protocol") == "full" else
                f"protocol `capped`: each task on a seeded subset of about {c.get('max_sts_pairs')} pairs, a quick look, "
                "not comparable with published numbers")
    return ["### STS (SentEval): the closing comparison of `csebench train`", "",
            f"Spearman correlation × 100 of cosine similarities, STS12–16 in SimCSE's \"all\" setting, STS-B and SICK-R "
            f"test: this model and the untrained backbone `{c.get('backbone_model') or c.get('backbone')}` it started "
            f"from, both pooled with `{c.get('pooler')}` ({protocol}; {c.get('precision', 'fp32')}; `sts_vs_untrained.json`).",
            "", _table(["", *(t for _, t in STS_TASKS), "Avg."],
                       [row(f"untrained `{c.get('backbone')}`", untrained), row("this model", trained),
                        row("difference", diff, signed=True)]), ""]


def _data(r: dict) -> list[str]:
    cfg, train = r["config"], r["train"]
    corpus = cfg["data"]["corpus"]
    if not cfg.get("train", True):
        return []
    source = (f"`{corpus['hub_file']}` of the hub dataset [{corpus['hub_repo']}](https://huggingface.co/datasets/{corpus['hub_repo']})"
              if corpus.get("hub_repo") else f"the local file `{Path(corpus.get('path') or '?').name}`")
    sample = f", a seeded sample of {corpus['sample']} sentences (seed {corpus['sample_seed']})" if corpus.get("sample") else ""
    sha = ((train.get("provenance") or {}).get("corpus") or {}).get("sha256")
    return ["## Training data", "", f"Data source `{cfg['data_name']}`: {source}{sample}; {train.get('corpus_sentences')} "
            f"sentences, one per line{f' (sha256 `{sha}`)' if sha else ''}. Unlabelled: the positives are the same "
            "sentence under another dropout mask.", ""]


def _hyperparameters(r: dict) -> list[str]:
    cfg = r["config"]
    bb = {k: v for k, v in cfg["backbone"].items() if k not in ("label", "training") and v not in (None, {})}
    rows = [["seed", str(cfg["seed"])]] + [[k, v] for k, v in _flat("backbone.", bb) + _flat("training.", cfg["training"])
                                            + _flat("objectives.", cfg.get("objectives") or {})]
    return ["## Hyperparameters", "", "Every setting of the run as csebench resolved it (params.yaml: defaults < backbone "
            "< method < suite < run; also in `training_config.json`).", "", _table(["setting", "value"], [[f"`{k}`", f"`{v}`"] for k, v in rows]), ""]


def _dev(train: dict) -> str:
    best = f"step {train.get('best_step')} of {train.get('steps')}"
    if train.get("dev_set"):  # your own STS data as the development set (data.<source>.sts_pairs)
        n = f", {train['dev_pairs']} pairs" if train.get("dev_pairs") else ""
        return (f"Checkpoint selection: the best Spearman on the development set `{train['dev_set']}` ({best}{n}): "
                f"{_num(train.get('dev_best'))}.")
    capped = (f" (on a seeded subset of {train.get('stsb_dev_pairs')} STS-B dev pairs, CPU demo scale)"
              if train.get("stsb_dev_protocol") == "capped" else "")
    what = "Development scores of the untrained model" if train.get("trained") is False else \
        f"Checkpoint selection: the best STS-B dev Spearman ({best})"
    return (f"{what}{capped}: STS-B dev {_num(train.get('stsb_dev_best'))}, SICK-R dev {_num(train.get('sickr_dev'))}, "
            f"their mean {_num(train.get('avg_sts_dev'))}.")


def _results(r: dict) -> list[str]:
    out = ["## Results", "", _dev(r["train"]), ""]
    sts, transfer = r["sts"], r["transfer"]
    if sts is None and r.get("comparison"):
        out += _comparison(r["comparison"])
    elif sts is None and transfer is None and not r["mteb"]:
        return out + ["Not evaluated (a training-only run, or its evaluations have not run yet).", ""]
    if sts is not None:
        out += ["### STS (SentEval)", "", "Spearman correlation × 100 of cosine similarities with the gold scores; STS12–16 "
                "over all their subsets together (SimCSE's \"all\" setting), STS-B and SICK-R test.", "",
                _table([t for _, t in STS_TASKS] + ["Avg."], [[_num((sts.get("tasks") or {}).get(k)) for k, _ in STS_TASKS]
                                                          + [_num(sts.get("avg"))]]), ""]
        if sts.get("warning"):
            out += [f"Protocol `{sts.get('protocol')}`: {sts['warning']}.", ""]
        extra = sts.get("extra_sets") or {}
        if extra:
            out += ["Your own STS sets (`sts_pairs`), reported beside the 7 tasks and never in their average:", "",
                    _table(["set", "split", "pairs", "Spearman × 100"], [[f"`{n}`", str(e.get("split")), str(e.get("n_pairs")),
                                                                       _num(e.get("spearman"))] for n, e in sorted(extra.items())]), ""]
    if transfer is not None and transfer.get("protocol") == "off":
        out += ["### Transfer (SentEval)", "", "Not evaluated: the suite switched the transfer tasks off (`transfer: false`).", ""]
    elif transfer is not None:  # Avg. is only ever the 7-task average (a subset's stays out, as in the report)
        out += ["### Transfer (SentEval)", "", "Accuracy of a logistic-regression classifier on the frozen embeddings "
                "(SentEval, SimCSE's settings).", "", _table(TRANSFER_TASKS + ["Avg."], [[_num((transfer.get("tasks") or {}).get(t))
                                                                                        for t in TRANSFER_TASKS] + [_num(transfer.get("avg"))]]), ""]
        if transfer.get("warning"):
            out += [f"Protocol `{transfer.get('protocol')}`: {transfer['warning']}.", ""]
    if r["mteb"]:
        out += ["### MTEB", "", "MTEB protocol (not SentEval's \"all\" setting: STS is scored per split): main score × 100 "
                "from MTEB's result files in the run's `mteb/` folder.", "",
                _table(["task", "split", "subset", "main score"], [[t, s, sub, _num(v)] for t, s, sub, v in r["mteb"]]), ""]
    return out


def _usage(r: dict, where: str) -> list[str]:
    meta = r["meta"]
    eval_pooler, proj = meta.get("eval_pooler", "cls_before_pooler"), meta.get("projection_dim")
    st_note = ""
    if eval_pooler in ("avg_first_last", "avg_top2"):
        st_note = ("sentence-transformers has no first-last or top-2 average: its Pooling module here takes the mean of "
                   "the last layer, close to but not the embedding evaluated above. Use the transformers code for that one.")
    code = EMBEDDING.get(eval_pooler, ("", "out.last_hidden_state[:, 0]"))[1]
    lines = ["import torch", "from transformers import AutoModel, AutoTokenizer", "",
             f'tokenizer = AutoTokenizer.from_pretrained("{where}")', f'model = AutoModel.from_pretrained("{where}").eval()',
             'batch = tokenizer(["A man is playing a guitar.", "Someone plays an instrument."], padding=True, '
             'truncation=True, return_tensors="pt")', "with torch.no_grad():",
             f"    out = model(**batch{', output_hidden_states=True' if 'hidden_states' in code else ''})"]
    if "masked_mean" in code:
        lines += ["mask = batch[\"attention_mask\"].unsqueeze(-1).float()",
                  "masked_mean = lambda h: (h * mask).sum(1) / mask.sum(1)"]
    lines += [f"embeddings = {code}"]
    if proj:
        tanh = meta.get("projection_head") == "linear_tanh"
        lines += ["# the trained projection head (from the hub: huggingface_hub.hf_hub_download(REPO, \"mlp_head.safetensors\"))",
                  "from safetensors.torch import load_file", f'head = load_file("{where}/mlp_head.safetensors")',
                  "embeddings = embeddings @ head[\"dense.weight\"].T + head[\"dense.bias\"]"
                  + ("\nembeddings = torch.tanh(embeddings)" if tanh else "")]
    lines += ["similarity = torch.nn.functional.cosine_similarity(embeddings[0], embeddings[1], dim=0)"]
    return ["## Usage", "", "With sentence-transformers (the folder has its modules.json"
            + (" and a Dense module for the projection head" if proj else "") + "):", "", "```python",
            "from sentence_transformers import SentenceTransformer", "", f'model = SentenceTransformer("{where}")',
            'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
            "print(model.similarity(embeddings, embeddings))", "```", "", *([st_note, ""] if st_note else []),
            "With transformers:", "", "```python", *lines, "```", ""]


def _provenance(r: dict) -> list[str]:
    from csebench.core.provenance import blocks_of, summary_line

    train = summary_line([r["train"].get("provenance")]).replace("Provenance (1 result file): ", "")
    out = ["## Provenance", "", f"- Training (`train.json`): {train}"]
    key, same = r["config"].get("key"), r["train"].get("same_run_as")
    if key:  # a run is its configuration: every suite listing it reads this one training (docs/runs.md)
        out.append(f"- csebench run key `{key}`: trained once in `runs/{key}/seed{r['config']['seed']}` for every suite "
                   "listing this configuration" + (f"; the same run as `{same}`" if same else ""))
    evaluated = [b for res in (r["sts"], r["transfer"]) if res is not None for b in blocks_of(res)]
    if evaluated:
        out.append(f"- Evaluation (`sts.json`, `transfer.json` and the embeddings they were scored from): "
                   f"{summary_line(evaluated).split(': ', 1)[1]}")
    return out + ["", "The full blocks (versions, git commit, device, precision, sha256 of every data file read) are in "
                  "the run folder's result files.", ""]


def _citation(r: dict) -> list[str]:
    papers = _papers(r)
    if not papers:
        return []
    given = [f"`{p['key']}` is the paper of the {w}, which is not part of csebench." for p in papers
             for w in _packages_of(r, p["key"])]
    return ["## Citation", "", *([" ".join(given), ""] if given else []), "```bibtex",
            *[p["bibtex"].rstrip() for p in papers], "```", ""]


def render_card(run_dir: str | os.PathLike, repo_id: str | None = None) -> str:
    """The card of a finished run folder; usage snippets load ``repo_id`` when given, else the model folder."""
    r = load_run(run_dir)
    cfg = r["config"]
    name = repo_id.split("/")[-1] if repo_id else f"{cfg['suite']}-{cfg['name']}-seed{cfg['seed']}"
    where = repo_id or "PATH/TO/model"
    body = [*_what(r), *_data(r), *_results(r), *_usage(r, where), *_hyperparameters(r), *_provenance(r),
            "## License", "", "Not set by csebench: the backbone's and the training data's terms apply; add `license:` "
            "to the metadata block before sharing.", "", *_citation(r)]
    return f"---\n{metadata(r, name)}\n---\n\n" + "\n".join(body).rstrip() + "\n"


def card_file(run_dir: str | os.PathLike) -> Path:
    """model_card.md beside the run's model/: in the run's own folder, also for a suite's view (whose
    model/ links there: a run has one model/, so one card)."""
    return Path(os.path.realpath(Path(run_dir) / "model")).parent / CARD_FILE


def write_card(run_dir: str | os.PathLike, repo_id: str | None = None) -> Path:
    """Write the card as RUN/model/README.md and, without ``repo_id`` (the pipeline's card), also as
    model_card.md in the run's own folder (card_file), the model_card rule's output. Returns model/README.md."""
    run = Path(run_dir)
    text = render_card(run, repo_id)
    if repo_id is None:
        write_text(card_file(run), text)
    write_text(run / "model" / README, text)
    return run / "model" / README
