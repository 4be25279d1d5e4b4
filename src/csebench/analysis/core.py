"""The papers' analyses as plain functions of an encoder (or an ``encode`` function) and data.

Every function returns a JSON-serialisable dict; the CLI writes it, the plots module draws it.
``encode`` maps a list of sentences to an (n, d) tensor (SentenceEncoder.encode in practice).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from csebench.evaluation.sts import PairSet, cap_pairs, cosine_rows, evaluate_sts, load_stsb, spearman100
from csebench.analysis import measures as M
from csebench.results.analysis_plots import GROUP_LABELS

log = logging.getLogger(__name__)

EncodeFn = Callable[[list[str]], torch.Tensor]


def _pair_embeddings(encode: EncodeFn, ps: PairSet) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sent1 rows, sent2 rows, all distinct sentences) embedded with one encode call."""
    uniq = sorted(set(ps.sent1) | set(ps.sent2))
    emb = encode(uniq)
    row = {s: i for i, s in enumerate(uniq)}
    return emb[torch.as_tensor([row[s] for s in ps.sent1])], emb[torch.as_tensor([row[s] for s in ps.sent2])], emb


def stsb_pairs(senteval_root: str | os.PathLike, split: str = "test", max_pairs: int | None = None) -> PairSet:
    """An STS-B split as the analyses read it: whole, or at a capped evaluation (``max_pairs``: the suite's
    evaluation.max_sts_pairs, CPU demo scale) the seeded subset that eval-sts scores at that cap, so that the
    embeddings table `csebench embed --max-sts-pairs` writes holds every sentence of it."""
    return cap_pairs(load_stsb(Path(senteval_root), split), max_pairs)


def stsb_data(split: str, max_pairs: int | None = None) -> str:
    """What an analysis of STS-B sentences read, for its result's ``data``."""
    return f"STS-B {split}" + (f", a seeded subset of about {max_pairs} pairs (max_sts_pairs)" if max_pairs else "")


# ------------------------------------------------------------------ IS-CSE Fig. 3

def align_uniform(encode: EncodeFn, senteval_root: str | os.PathLike, split: str = "test",
                  threshold: float = 4.0, alpha: float = 2.0, t: float = 2.0, max_pairs: int | None = None) -> dict:
    """Alignment over STS-B pairs with gold score > threshold, uniformity over all STS-B sentences."""
    ps = stsb_pairs(senteval_root, split, max_pairs)
    e1, e2, allemb = _pair_embeddings(encode, ps)
    pos = torch.as_tensor(ps.scores > threshold)
    return {"analysis": "align_uniform", "data": stsb_data(split, max_pairs), "alignment": M.alignment(e1[pos], e2[pos], alpha),
            "uniformity": M.uniformity(allemb, t), "alpha": alpha, "t": t, "threshold": threshold,
            "n_positive_pairs": int(pos.sum()), "n_sentences": int(len(allemb))}


# ------------------------------------------------------------------ IS-CSE Fig. 4

def cosine_distribution(encode: EncodeFn, senteval_root: str | os.PathLike, split: str = "test",
                        max_pairs: int | None = None) -> dict:
    """Cosine similarity of every STS-B pair, grouped by gold score into [0,1), ..., [4,5]."""
    ps = stsb_pairs(senteval_root, split, max_pairs)
    e1, e2, _ = _pair_embeddings(encode, ps)
    sims = cosine_rows(e1, e2)
    g = M.score_groups(ps.scores)
    groups = {}
    for i, label in enumerate(GROUP_LABELS):
        s = sims[g == i]
        groups[label] = {"n": int(len(s)), "mean": float(s.mean()) if len(s) else None,
                         "std": float(s.std()) if len(s) else None,
                         "quartiles": [float(v) for v in np.percentile(s, [25, 50, 75])] if len(s) else None,
                         "cosines": [round(float(v), 6) for v in s]}
    return {"analysis": "cosine_dist", "data": stsb_data(split, max_pairs), "spearman": spearman100(sims, ps.scores), "groups": groups}


# ------------------------------------------------------------------ SSCL Fig. 1, 4 and 5

@torch.no_grad()
def layer_similarities(enc, sentences: Sequence[str], batch_size: int | None = None, exclude_special: bool = True) -> dict:
    """Inter-layer SetSim between adjacent transformer layers and TokSim per layer (SSCL Eq. 1-2).

    Sentence representations of layer l use the encoder's own pooler applied to layer l (CLS of that
    layer for cls poolers, masked mean for avg). TokSim counts the sentence's tokens (special tokens
    [CLS]/[SEP] excluded unless ``exclude_special`` is False). Layers are 1..L (0 = embeddings left out)."""
    from csebench.model.encoder import pool

    uniq = sorted(set(sentences))
    tok = enc.tokenizer
    limit = min(getattr(enc.backbone.config, "max_position_embeddings", 512), 512)
    enc_ids = tok(uniq, truncation=True, max_length=limit, padding=False, return_special_tokens_mask=True)
    lengths = np.array([len(x) for x in enc_ids["input_ids"]])
    order = np.argsort(lengths, kind="stable")
    pad = tok.pad_token_id or 0
    n_layers = enc.num_layers
    reps = torch.zeros(n_layers, len(uniq), enc.hidden_size, dtype=torch.float64)
    tsim = np.zeros((n_layers, len(uniq)))
    was_training = enc.training
    enc.eval()
    device = next(enc.parameters()).device
    from csebench.model.encoder import default_encode_batch_size

    batch_size = batch_size or default_encode_batch_size(device)
    try:
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            width = int(lengths[idx].max())
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            special = torch.ones((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):
                L = lengths[i]
                ids[r, :L] = torch.as_tensor(enc_ids["input_ids"][i])
                mask[r, :L] = 1
                special[r, :L] = torch.as_tensor(enc_ids["special_tokens_mask"][i])
            hs = enc.forward_hidden(ids.to(device), mask.to(device), all_layers=True)
            tokmask = (mask * (1 - special)) if exclude_special else mask
            for layer in range(1, n_layers + 1):
                reps[layer - 1, torch.as_tensor(idx)] = pool(enc.pooler, hs, mask.to(device), layer=layer).double().cpu()
                tsim[layer - 1, idx] = M.toksim(hs[layer].float().cpu(), tokmask)
    finally:
        enc.train(was_training)
    inter = M.inter_layer_similarity(reps)
    return {"analysis": "layers", "pooler": enc.pooler, "n_sentences": len(uniq), "exclude_special": exclude_special,
            "inter_layer": {f"{i}-{i + 1}": float(v) for i, v in enumerate(inter, start=1)},
            "toksim": {str(i): float(np.nanmean(tsim[i - 1])) for i in range(1, n_layers + 1)}}


@torch.no_grad()
def token_similarity_matrix(enc, sentence: str, layer: int = -1, exclude_special: bool = True) -> dict:
    """SSCL Fig. 5: cosine similarity between every two tokens of ``sentence`` at one layer
    (hidden_states index; -1 = the last layer), [CLS]/[SEP] left out unless ``exclude_special`` is False."""
    tok = enc.tokenizer
    limit = min(getattr(enc.backbone.config, "max_position_embeddings", 512), 512)
    e = tok([sentence], truncation=True, max_length=limit, return_special_tokens_mask=True)
    ids = torch.as_tensor(e["input_ids"])
    keep = torch.as_tensor(e["special_tokens_mask"][0]) == 0 if exclude_special else torch.ones(ids.shape[1], dtype=torch.bool)
    was_training = enc.training
    enc.eval()
    device = next(enc.parameters()).device
    try:
        hs = enc.forward_hidden(ids.to(device), torch.ones_like(ids).to(device), all_layers=True)
    finally:
        enc.train(was_training)
    x = torch.nn.functional.normalize(hs[layer][0].double().cpu()[keep], dim=-1)
    sim = x @ x.T
    m = sim.shape[0]
    return {"tokens": tok.convert_ids_to_tokens(ids[0][keep].tolist()), "layer": layer % len(hs),
            "matrix": [[round(float(v), 6) for v in row] for row in sim],
            "toksim": float((sim.sum() - sim.trace()) / (m * (m - 1))) if m > 1 else None}


def token_matrices(encoders: dict, sentence: str, layer: int = -1, exclude_special: bool = True) -> dict:
    """``token_similarity_matrix`` of one sentence for each model (``encoders``: label -> encoder)."""
    models = {label: token_similarity_matrix(enc, sentence, layer, exclude_special) for label, enc in encoders.items()}
    return {"analysis": "token_matrix", "sentence": sentence, "exclude_special": exclude_special, "models": models}


def stsb_sentences(senteval_root: str | os.PathLike, split: str = "test", max_pairs: int | None = None) -> list[str]:
    ps = stsb_pairs(senteval_root, split, max_pairs)
    return sorted(set(ps.sent1) | set(ps.sent2))


# ------------------------------------------------------------------ GS-InfoNCE Fig. 1

def topk_negatives(encode: EncodeFn, corpus: Sequence[str], batch_sizes: Sequence[int] = (16, 32, 64, 128, 256, 512, 1024),
                   k: int = 4, repeats: int = 100, pool_size: int = 4096, seed: int = 0,
                   gaussian_ratio: int = 3) -> dict:
    """GS-InfoNCE Fig. 1 as its v1 text computes it: for each batch size N, ``repeats`` random batches of N
    corpus sentences; in each, the N x N cosine matrix with its diagonal masked, each column sorted and its
    top k rows kept (every sentence's k nearest other sentences), each rank averaged over the N sentences,
    then over the batches (``topk_mean``; ``topk_std``: the std of the per-batch means over the batches).

    The Gaussian side, over the same batches: each batch gets gaussian_ratio x N standard normal vectors
    (GS-InfoNCE's noise negatives, M = 3 x batch size), and the same statistic is taken of every sentence's
    cosines to them (``gaussian_topk_mean``, ``gaussian_topk_std``).

    A pool of ``pool_size`` distinct corpus sentences is embedded once; each batch draws N of them without
    replacement. A batch size of at most k sentences (no k other sentences) or above the pool is skipped."""
    rng = np.random.default_rng(seed)
    uniq = sorted(set(corpus))
    pool = [uniq[i] for i in rng.choice(len(uniq), size=min(pool_size, len(uniq)), replace=False)]
    emb = encode(pool).float()  # float32 cosines: the statistic's error about 1e-7, half double's time
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for n in batch_sizes:
        if n > len(pool) or n <= k:
            log.warning("batch size %d: %s; skipped", n, f"exceeds the pool of {len(pool)} sentences" if n > len(pool)
                        else f"a sentence has fewer than k = {k} other sentences")
            continue
        idx = np.stack([rng.choice(len(pool), size=n, replace=False) for _ in range(repeats)])
        chunk = max(1, 2 ** 22 // (n * n))  # batches per vectorized step: about 4M cosines of the batch matrices
        tops, gtops = [], []
        for i in range(0, repeats, chunk):
            b = idx[i:i + chunk]
            tops.append(M.topk_neighbours_batched(emb, b, k))
            noise = torch.randn(len(b), gaussian_ratio * n, emb.shape[1], generator=gen)  # float32: cosines near 0
            gtops.append(M.topk_noise_batched(emb, b, noise, k))
        top, gtop = np.concatenate(tops), np.concatenate(gtops)  # (repeats, k) each
        out[str(n)] = {"topk_mean": [float(v) for v in top.mean(0)], "topk_std": [float(v) for v in top.std(0)],
                       "mean_of_topk": float(top.mean()),
                       "gaussian_topk_mean": [float(v) for v in gtop.mean(0)],
                       "gaussian_topk_std": [float(v) for v in gtop.std(0)]}
    return {"analysis": "topk_negatives", "statistic": "per-sentence top-k (diagonal masked), mean over the batch's "
            "sentences, then over batches (GS-InfoNCE v1)", "k": k, "repeats": repeats, "pool_size": len(pool),
            "seed": seed, "gaussian_ratio": gaussian_ratio, "batch_sizes": out}


# ------------------------------------------------------------------ DistillCSE Fig. 1, Tables 1-2

def teacher_logit_stats(encoders: Sequence[EncodeFn], corpus: Sequence[str], dev: PairSet, batch_size: int = 64,
                        n_batches: int = 20, temperature: float = 0.05, topk: int = 12, seed: int = 0,
                        points: int = 100) -> dict:
    """DistillCSE's logit analysis with teacher(s) ``encoders`` (l2-normalized embeddings throughout).

    Per teacher, "training" = n_batches random batches of ``batch_size`` corpus sentences:
      1st order  (1/D) sum_d h_{i,d} of each sentence;  2nd order  in-batch logits t_ij (j != i).
    "testing" = STS-B dev: 1st order over its sentences, 2nd order = cosine of its sentence pairs.
    Reported: mean/std of each (Table 1), KL(train || test) of fitted Gaussians and of histograms,
    descending sorted curves on relative rank (Fig. 1), sharpness of the distillation target
    softmax(t/temperature) (rows of batch_size-1 logits; dev logits cut into random rows of that size).
    Across teachers (Table 2): std over teachers of the 1st-order value of each sentence and of each
    in-batch logit, averaged, their Gaussian differential entropies, and the mean Spearman between
    teachers over each anchor's top-``topk`` logits."""
    rng = np.random.default_rng(seed)
    uniq = sorted(set(corpus))
    idx = np.stack([rng.choice(len(uniq), size=batch_size, replace=False) for _ in range(n_batches)])
    train_sents = [uniq[i] for i in np.unique(idx)]
    row = {s: i for i, s in enumerate(train_sents)}
    bidx = np.vectorize(lambda i: row[uniq[i]])(idx)
    dev_uniq = sorted(set(dev.sent1) | set(dev.sent2))
    drow = {s: i for i, s in enumerate(dev_uniq)}
    d1, d2 = torch.as_tensor([drow[s] for s in dev.sent1]), torch.as_tensor([drow[s] for s in dev.sent2])
    per_teacher, first_all, logits_all = [], [], []
    for encode in encoders:
        tr = torch.nn.functional.normalize(encode(train_sents).double(), dim=-1)
        te = torch.nn.functional.normalize(encode(dev_uniq).double(), dim=-1)
        first_tr, first_te = tr.mean(-1).numpy(), te.mean(-1).numpy()
        logits = np.stack([M.in_batch_logits(tr[torch.as_tensor(b)]) for b in bidx])  # (B, N, N-1)
        dev_logits = (te[d1] * te[d2]).sum(-1).numpy()
        first_all.append(first_tr[bidx])  # (B, N)
        logits_all.append(logits.reshape(-1, batch_size - 1))
        n_rows = len(dev_logits) // (batch_size - 1)
        dev_rows = rng.permutation(dev_logits)[: n_rows * (batch_size - 1)].reshape(n_rows, batch_size - 1)
        stats = {}
        for name, a, b in (("first_order", first_tr, first_te), ("logits", logits.ravel(), dev_logits)):
            stats[name] = {"train_mean": float(a.mean()), "train_std": float(a.std()), "test_mean": float(b.mean()),
                           "test_std": float(b.std()), "kl_gaussian": M.gaussian_kl(a.mean(), a.std(), b.mean(), b.std()),
                           "kl_histogram": M.histogram_kl(a, b),
                           "train_sorted": [float(v) for v in M.sorted_curve(a, points)],
                           "test_sorted": [float(v) for v in M.sorted_curve(b, points)]}
        stats["logits"]["train_sharpness"] = M.sharpness(logits.reshape(-1, batch_size - 1), temperature)
        stats["logits"]["test_sharpness"] = M.sharpness(dev_rows, temperature) if n_rows else None
        per_teacher.append(stats)
    out = {"analysis": "teacher_logits", "n_teachers": len(encoders), "batch_size": batch_size, "n_batches": n_batches,
           "temperature": temperature, "dev_pairs": len(dev.scores), "teachers": per_teacher}
    if len(encoders) >= 2:
        sd1, sd2 = M.teacher_variance(first_all), M.teacher_variance(logits_all)
        out["across_teachers"] = {"first_order_std": sd1, "first_order_entropy": M.gaussian_entropy(sd1) if sd1 > 0 else None,
                                  "logits_std": sd2, "logits_entropy": M.gaussian_entropy(sd2) if sd2 > 0 else None,
                                  f"top{topk}_spearman": M.topk_spearman_across_teachers(logits_all, topk),
                                  "mean_logits_sorted": [float(v) for v in M.sorted_curve(np.mean(logits_all, 0), points)]}
    return out


# ------------------------------------------------------------------ SSCL Table 5

def projection_matrix(method: str, dim: int, emb: torch.Tensor | None = None, hidden: int | None = None,
                      seed: int = 0) -> torch.Tensor:
    """A (hidden, dim) linear map: "random" = Gaussian N(0, 1/dim) (Johnson-Lindenstrauss),
    "pca" = the top-``dim`` principal directions of ``emb`` (centred)."""
    if method == "random":
        g = torch.Generator().manual_seed(seed)
        return torch.randn(hidden or emb.shape[1], dim, generator=g, dtype=torch.float64) / math.sqrt(dim)
    if method == "pca":
        x = emb.double() - emb.double().mean(0)
        _, _, v = torch.linalg.svd(x, full_matrices=False)
        return v[:dim].T.contiguous()
    raise ValueError(f"unknown projection method '{method}' (random, pca)")


def projected_sts(encode: EncodeFn, senteval_root: str | os.PathLike, dims: Sequence[int] = (128, 256),
                  methods: Sequence[str] = ("random", "pca"), seed: int = 0, tasks: Sequence[str] | None = None,
                  max_pairs: int | None = None) -> dict:
    """STS (7 tasks + avg) of a model's embeddings through a linear projection to each dim.

    Every sentence is embedded once; the projection is applied to the cached embeddings. PCA is fitted
    on the evaluation sentences themselves (transductive; an upper reference, not a trained head).
    ``max_pairs``: the CPU demo's STS pair cap (evaluation.sts.cap_pairs), the same subsets that
    ``embed`` and ``eval-sts`` use, so the run's embeddings table holds every sentence."""
    cache: dict[str, torch.Tensor] = {}

    def cached(sents: list[str]) -> torch.Tensor:
        todo = [s for s in sents if s not in cache]
        if todo:
            for s, e in zip(todo, encode(todo)):
                cache[s] = e
        return torch.stack([cache[s] for s in sents])

    from csebench.evaluation.sts import load_test_tasks

    sets = load_test_tasks(senteval_root, list(tasks) if tasks else None, max_pairs)  # read once, for every projection
    full = evaluate_sts(cached, senteval_root, pairsets=sets)
    allemb = torch.stack(list(cache.values()))
    res = {"analysis": "embed_dim", "full_dim": int(allemb.shape[1]), "full": {"avg": full.get("avg"), "tasks": full["tasks"]},
           "projected": {}, "protocol": "full"}
    if max_pairs is not None:
        from csebench.evaluation.sts import capped_sts_warning

        res.update(protocol="capped", max_sts_pairs=max_pairs, warning=capped_sts_warning(max_pairs))
    for method in methods:
        for dim in dims:
            if dim > allemb.shape[1]:
                continue
            W = projection_matrix(method, dim, allemb, seed=seed)
            r = evaluate_sts(lambda s: cached(s).double() @ W, senteval_root, pairsets=sets)
            res["projected"][f"{method}-{dim}"] = {"method": method, "dim": dim, "avg": r.get("avg"), "tasks": r["tasks"]}
    return res


# ------------------------------------------------------------------ IS-CSE Table 9

REPRESENTATION_TEXT = {"training": "the training representation (the run's saved training head, dropout off), as "
                                   "IS-CSE's kNN retrieves", "eval": "the evaluation embedding"}


def training_representation(enc, model_dir: str, batch_size: int | None = None) -> tuple[EncodeFn, dict]:
    """What IS-CSE's kNN retrieves on during training, for a saved run: the pooler and the training head the run
    saved (SimCSE's MLP over [CLS]; a run without one: its pooled output, which is then what it trained on),
    the sentences truncated at the run's max_seq_length as training tokenizes them (training_config.json, else
    32), l2-normalized by the retrieval. The released code (dll-wu/IS-CSE simcse/models.py) retrieves on view 2
    of a training step, i.e. with dropout on; here the model is in eval mode (dropout off), so that the table is
    one deterministic function of the run: the dropout-free centre of the views training retrieved on (a
    buffer of training views also mixes older models' outputs, which a finished run cannot give back).
    Returns (encode, what it is: ``representation``, ``head``, ``max_seq_length``)."""
    from csebench.analysis.distill import attach_training_head, batch_embedder, run_settings

    head = attach_training_head(enc, model_dir)
    max_len = run_settings(model_dir)[1] or 32
    embed = batch_embedder(enc, int(max_len), train_head=head)
    size = batch_size or 64

    def encode(sentences: list[str]) -> torch.Tensor:
        parts = [embed(sentences[i:i + size]) for i in range(0, len(sentences), size)]
        return torch.cat(parts) if parts else torch.empty(0, enc.out_dim)

    return encode, {"representation": "training", "head": bool(head), "max_seq_length": int(max_len),
                    "dropout": "off (eval mode)"}


def retrieve_neighbours(encode: EncodeFn, corpus: Sequence[str], queries: Sequence[str] | None = None,
                        buffer_size: int = 1024, k: int = 3, n_queries: int = 4, seed: int = 0) -> dict:
    """Fill a buffer with the embeddings of ``buffer_size`` random corpus sentences (IS-CSE's memory
    of size L) and retrieve each query's k nearest buffer sentences by cosine. Without ``queries``,
    ``n_queries`` other random corpus sentences are the queries. ``encode`` gives the representation
    retrieved on (IS-CSE Table 9: ``training_representation``)."""
    rng = np.random.default_rng(seed)
    uniq = sorted(set(corpus))
    perm = rng.permutation(len(uniq))
    buffer = [uniq[i] for i in perm[:buffer_size]]
    if not queries:
        queries = [uniq[i] for i in perm[buffer_size:buffer_size + n_queries]]
    bemb = encode(buffer)
    qemb = encode(list(queries))
    ind, sim = M.knn(bemb, qemb, min(k, len(buffer)))
    items = [{"query": q, "neighbours": [{"sentence": buffer[j], "cosine": float(s)} for j, s in zip(ir, sr)]}
             for q, ir, sr in zip(queries, ind, sim)]
    return {"analysis": "neighbours", "buffer_size": len(buffer), "k": int(ind.shape[1]), "seed": seed, "items": items}


def neighbours_markdown(res: dict, title: str = "") -> str:
    """IS-CSE Table 9 layout: a query row, then its retrieved sentences ranked 1..k."""
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = [f"## {title}" if title else "", "",
             f"Buffer of L = {res['buffer_size']} corpus sentences; top {res['k']} by cosine similarity of "
             f"{REPRESENTATION_TEXT.get(res.get('representation'), 'the embeddings')}"
             + (" (the run has no training head: its pooled output)" if res.get("representation") == "training"
                and not res.get("head") else "") + ".", "",
             "| | Rank | Sentence | Cosine |", "|---|---|---|---|"]
    for it in res["items"]:
        lines.append(f"| **Query** | | {esc(it['query'])} | |")
        for r, nb in enumerate(it["neighbours"], start=1):
            lines.append(f"| Retrieved | {r} | {esc(nb['sentence'])} | {nb['cosine']:.3f} |")
    return "\n".join(lines).lstrip() + "\n"
