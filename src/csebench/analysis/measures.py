"""Pure metric functions of the papers' analyses (tensors / arrays in, numbers out; no models).

Definitions:
  alignment      Wang & Isola (2020): E_{(x,y)~p_pos} ||f(x) - f(y)||_2^alpha on l2-normalized
                 embeddings, alpha = 2 (as SimCSE / IS-CSE Fig. 3).
  uniformity     log E_{x,y~p_data} exp(-t ||f(x) - f(y)||_2^2) over distinct pairs, t = 2.
  SetSim         SSCL Eq. 2: cosine of one sentence's representations at adjacent layers.
  TokSim         SSCL Eq. 1: 1/(m(m-1)) sum_{u != v} cos(x_u, x_v) over a sentence's m tokens.
  top-k neighbours GS-InfoNCE Fig. 1 (v1's text): the batch's N x N cosine matrix, diagonal masked, each
                 column sorted and its top k rows kept (each sentence's k nearest other sentences), each
                 rank averaged over the N sentences; the same of each sentence against Gaussian noise vectors.
  sharpness, KL  DistillCSE Fig. 1 / Table 1: sorted logit curves, Gaussian and histogram KL.
  teacher variance DistillCSE Table 2: std across teachers, Gaussian differential entropy.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr


def _t(x) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))


# ------------------------------------------------------------------ Wang & Isola

def alignment(x, y, alpha: float = 2.0) -> float:
    """Mean ||x_i - y_i||^alpha of l2-normalized positive pairs (rows of x and y)."""
    x, y = F.normalize(_t(x).double(), dim=-1), F.normalize(_t(y).double(), dim=-1)
    return float((x - y).norm(dim=-1).pow(alpha).mean())


def uniformity(x, t: float = 2.0) -> float:
    """log mean_{i<j} exp(-t ||x_i - x_j||^2) of l2-normalized rows (Wang & Isola's pdist form)."""
    x = F.normalize(_t(x).double(), dim=-1)
    sq = torch.pdist(x, p=2).pow(2)
    # log-mean-exp, stable
    return float(torch.logsumexp(-t * sq, dim=0) - math.log(sq.numel()))


# ------------------------------------------------------------------ SSCL

def inter_layer_similarity(layers) -> np.ndarray:
    """Mean cosine between adjacent layers' sentence representations.

    ``layers``: (L, n, d) tensor or list of (n, d); returns L-1 values, entry i = SetSim(layer i, i+1)
    averaged over the n sentences."""
    x = torch.stack([_t(a).double() for a in layers]) if not isinstance(layers, torch.Tensor) else layers.double()
    return F.cosine_similarity(x[:-1], x[1:], dim=-1).mean(dim=-1).numpy()


def toksim(hidden, mask) -> np.ndarray:
    """TokSim (SSCL Eq. 1) of every sentence: hidden (n, T, d), mask (n, T) of the tokens counted.

    Uses sum_{u != v} cos(x_u, x_v) = ||sum_u x_u/|x_u| ||^2 - m, so it is O(n T d).
    Sentences with fewer than 2 tokens give NaN."""
    h = F.normalize(_t(hidden).double(), dim=-1) * _t(mask).double().unsqueeze(-1)
    m = _t(mask).double().sum(-1)
    s = h.sum(1).pow(2).sum(-1)
    out = (s - m) / (m * (m - 1))
    out[m < 2] = float("nan")
    return out.numpy()


# ------------------------------------------------------------------ GS-InfoNCE

def topk_neighbour_similarities(emb, k: int = 4) -> np.ndarray:
    """GS-InfoNCE Fig. 1 of one batch (rows of ``emb``): the (k,) curve whose entry r is the cosine of each
    sentence's r-th most similar other sentence of the batch, averaged over the N sentences."""
    return topk_neighbours_batched(emb, np.arange(len(emb))[None, :], k)[0]


def topk_neighbours_batched(emb, batch_idx, k: int = 4) -> np.ndarray:
    """``topk_neighbour_similarities`` of many batches at once: emb (P, d) pool, batch_idx (R, N) rows of the
    pool; returns (R, k). As GS-InfoNCE v1 says: the N x N cosine matrix of a batch, its diagonal (a sentence
    with itself) masked, each column sorted descending and its top k rows kept (the k closest neighbours of
    each sentence), each of those rows averaged over the N columns. Vectorized over the R batches; in the
    embeddings' precision (float32 at least)."""
    e = _t(emb)
    x = F.normalize(e.to(torch.promote_types(e.dtype, torch.float32)), dim=-1)[_t(batch_idx).long()]  # (R, N, d)
    n = x.shape[1]
    if not 1 <= k < n:
        raise ValueError(f"top-{k} neighbours need a batch of more than {k} sentences, got {n}")
    sim = x @ x.transpose(1, 2)
    sim.diagonal(dim1=1, dim2=2).fill_(float("-inf"))
    # the matrix is symmetric, so sentence j's column is its row (contiguous): its k largest, then each rank's mean
    return torch.topk(sim, k, dim=2).values.mean(1).double().numpy()


def topk_noise_batched(emb, batch_idx, noise, k: int = 4) -> np.ndarray:
    """The Gaussian side of GS-InfoNCE Fig. 1 for R batches: each sentence's k largest cosines to its batch's
    noise vectors ``noise`` (R, M, d), each rank averaged over the N sentences; returns (R, k). In the
    noise's dtype (float32 noise: the sentences are cast to it)."""
    noise = _t(noise)
    x = F.normalize(_t(emb).to(noise.dtype), dim=-1)[_t(batch_idx).long()]  # (R, N, d)
    if not 1 <= k <= noise.shape[1]:
        raise ValueError(f"top-{k} noise similarities need at least {k} noise vectors, got {noise.shape[1]}")
    sim = x @ F.normalize(noise, dim=-1).transpose(1, 2)  # (R, N, M)
    return torch.topk(sim, k, dim=2).values.mean(1).double().numpy()


# ------------------------------------------------------------------ DistillCSE

def in_batch_logits(emb) -> np.ndarray:
    """(N, N-1) cosine logits t_ij, j != i, of one batch (rows = anchors), diagonal removed."""
    x = F.normalize(_t(emb).double(), dim=-1)
    sim = x @ x.T
    n = len(x)
    return sim[~torch.eye(n, dtype=torch.bool)].reshape(n, n - 1).numpy()


def sorted_curve(values, points: int = 100) -> np.ndarray:
    """Values sorted in descending order, read at ``points`` evenly spaced relative ranks in [0, 1]
    (so distributions of different sizes share one x-axis, as in DistillCSE Fig. 1)."""
    v = np.sort(np.asarray(values, dtype=np.float64).ravel())[::-1]
    q = np.linspace(0.0, 1.0, points)
    return np.interp(q * (len(v) - 1), np.arange(len(v)), v)


def sharpness(logits, temperature: float = 0.05) -> float:
    """1 - H(softmax(t/tau)) / log(n), averaged over rows of ``logits`` (rows x n).

    0 for equal logits (a uniform target distribution), -> 1 when one logit dominates: how peaked the
    distillation target q(t_ij) (DistillCSE Eq. 2) built from these logits is."""
    z = torch.as_tensor(np.atleast_2d(np.asarray(logits, dtype=np.float64))) / temperature
    logp = torch.log_softmax(z, dim=-1)
    h = -(logp.exp() * logp).sum(-1)
    return float((1.0 - h / math.log(z.shape[-1])).mean())


def gaussian_kl(mu1: float, sd1: float, mu2: float, sd2: float) -> float:
    """KL(N(mu1, sd1^2) || N(mu2, sd2^2)) in nats."""
    return float(math.log(sd2 / sd1) + (sd1 ** 2 + (mu1 - mu2) ** 2) / (2 * sd2 ** 2) - 0.5)


def histogram_kl(p_samples, q_samples, bins: int = 50, eps: float = 1e-10) -> float:
    """KL(P || Q) in nats between two samples' histograms on shared bins (eps-smoothed)."""
    p_samples, q_samples = np.asarray(p_samples).ravel(), np.asarray(q_samples).ravel()
    lo, hi = min(p_samples.min(), q_samples.min()), max(p_samples.max(), q_samples.max())
    if hi <= lo:
        return 0.0
    edges = np.linspace(lo, hi, bins + 1)
    p = np.histogram(p_samples, edges)[0].astype(np.float64) + eps
    q = np.histogram(q_samples, edges)[0].astype(np.float64) + eps
    p, q = p / p.sum(), q / q.sum()
    return float(np.sum(p * np.log(p / q)))


def gaussian_entropy(sd: float) -> float:
    """Differential entropy (nats) of a Gaussian with standard deviation sd: 0.5 log(2 pi e sd^2).
    DistillCSE Table 2's entropies are this of its average stds (-1.7853 for 0.0406)."""
    return float(0.5 * math.log(2 * math.pi * math.e * sd ** 2))


def teacher_variance(values) -> float:
    """Average over items of the std across teachers: values (M teachers, ...items)."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.std(axis=0).mean())


def topk_spearman_across_teachers(logits, k: int = 12) -> float:
    """Mean Spearman correlation between pairs of teachers over each anchor's top-k logits.

    logits (M teachers, rows, n); the top-k of a row are chosen by the teachers' mean logit."""
    v = np.asarray(logits, dtype=np.float64)
    m = v.shape[0]
    if m < 2:
        return float("nan")
    top = np.argsort(-v.mean(0), axis=-1)[:, :k]  # (rows, k)
    sel = np.take_along_axis(v, np.broadcast_to(top, (m, *top.shape)), axis=-1)  # (M, rows, k)
    rs = []
    for a in range(m):
        for b in range(a + 1, m):
            for row in range(sel.shape[1]):
                r = spearmanr(sel[a, row], sel[b, row])[0]
                if not np.isnan(r):
                    rs.append(r)
    return float(np.mean(rs)) if rs else float("nan")


# ------------------------------------------------------------------ IS-CSE retrieval

def knn(buffer, queries, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Cosine k nearest buffer rows for each query: (indices (q, k), similarities (q, k)), best first."""
    b = F.normalize(_t(buffer).double(), dim=-1)
    q = F.normalize(_t(queries).double(), dim=-1)
    top = torch.topk(q @ b.T, k, dim=-1)
    return top.indices.numpy(), top.values.numpy()


# ------------------------------------------------------------------ STS score groups

def score_groups(scores, edges=(0, 1, 2, 3, 4, 5)) -> np.ndarray:
    """Group index of each gold score: [0,1), [1,2), [2,3), [3,4), [4,5] (IS-CSE / SimCSE Fig. 4)."""
    s = np.asarray(scores, dtype=np.float64)
    return np.clip(np.searchsorted(np.asarray(edges[1:-1], dtype=np.float64), s, side="right"), 0, len(edges) - 2)
