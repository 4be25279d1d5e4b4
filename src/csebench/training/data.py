"""Training corpus and evaluation-data preparation.

A corpus is a UTF-8 text file, one sentence per line ("\n"; a "\r" before it is dropped); blank
lines are dropped, a line of control characters only (a binary file, a wrong encoding) is an error. Full scale
downloads wiki1m_for_simcse.txt and senteval.tar from the hub dataset
princeton-nlp/datasets-for-simcse (cached and resumable by huggingface_hub); the demo reads
the shared copies (``paths.shared`` in params.yaml or $CSEBENCH_SHARED).
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from csebench.study.params import ProbingSourceConfig, SourceConfig
from csebench.core.errors import DataError
from csebench.core.io import atomic_path, write_text
from csebench.core.provenance import (SOURCE_FILE, file_sha256, record_hub, hub_commit,
    write_source)
from csebench.model.tokens import TokenizedCorpus, tokenizer_fingerprint
from csebench.core.corpus import read_corpus

log = logging.getLogger(__name__)

# Files the STS evaluation needs, relative to the SentEval data root (downstream/ folder).
STS_REQUIRED = [
    "STS/STS12-en-test", "STS/STS13-en-test", "STS/STS14-en-test", "STS/STS15-en-test",
    "STS/STS16-en-test", "STS/STSBenchmark/sts-dev.csv", "STS/STSBenchmark/sts-test.csv",
    "SICK/SICK_trial.txt", "SICK/SICK_test_annotated.txt",
]


def hub_download(repo: str, filename: str, cache_dir: str | None = None) -> Path:
    """Download one file of a hub *dataset* repo; offline (HF_HUB_OFFLINE=1) serves the cache only."""
    from huggingface_hub import hf_hub_download

    from csebench.study.fetch import hub_unreachable, offline

    down = None if offline() else hub_unreachable()  # the cache only, at once, rather than retries for a minute
    try:
        path = Path(hf_hub_download(repo_id=repo, filename=filename, repo_type="dataset", cache_dir=cache_dir,
                                    local_files_only=down is not None))
        record_hub(f"datasets/{repo}/{filename}", hub_commit(path))
        return path
    except Exception as exc:  # network errors, offline mode with an empty cache
        from csebench.study.fetch import offline_hint

        if offline():  # a cluster job: the submitting host prepares the data (prepare_* are localrules)
            raise DataError(offline_hint(f"{filename} of hub dataset {repo}",
                                         "`csebench prepare-corpus` / `prepare-senteval --data NAME` there")) from None
        why = f"the Hugging Face hub cannot be reached ({down})" if down else f"{exc.__class__.__name__}: {exc}"
        raise DataError(
            f"could not fetch {filename} from hub dataset {repo}: {' '.join(why.split())}. "
            f"Offline? Point the data source at a local file instead (params.yaml data.*.path, "
            f"or the demo suite, which reads ../shared)."
        ) from None


def prepare_corpus(source: SourceConfig, out: str | os.PathLike) -> int:
    """Write the training corpus (optionally a seeded sample) to ``out``; return its size."""
    path = Path(source.path) if source.path else hub_download(source.hub_repo, source.hub_file)
    sentences = read_corpus(path)
    if source.sample is not None and source.sample < len(sentences):
        rng = random.Random(source.sample_seed)
        keep = sorted(rng.sample(range(len(sentences)), source.sample))
        sentences = [sentences[i] for i in keep]
    write_text(out, "\n".join(sentences) + "\n")
    note = Path(f"{out}{SOURCE_FILE}")
    if source.hub_repo:  # which hub commit it came from: the training results record it (provenance.read_source)
        write_source(note, source.hub_repo, source.hub_file, path)
    else:
        note.unlink(missing_ok=True)
    log.info("corpus: %d sentences from %s -> %s", len(sentences), path, out)
    return len(sentences)


def check_senteval_dir(root: str | os.PathLike, required: list[str] = STS_REQUIRED) -> Path:
    root = Path(root)
    if (root / "downstream").is_dir():
        root = root / "downstream"
    missing = [r for r in required if not (root / r).exists()]
    if missing:
        raise DataError(
            f"SentEval data at {root} is missing {', '.join(missing)}; expected SentEval's downstream/ layout "
            f"(set paths.shared in params.yaml or ${'{'}CSEBENCH_SHARED{'}'}, or download senteval.tar)"
        )
    return root


def extract_tar(tar_path: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Extract a downloaded tarball into ``dest``, refusing what could write outside it or make special files:
    tarfile's "data" filter where Python has it (3.11.4 and later, PEP 706); on 3.11.0-3.11.3, which have no
    filters (Debian 12's python3.11 is 3.11.2), the members :func:`_checked_members` lets through."""
    with tarfile.open(tar_path) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest, members=_checked_members(tar, tar_path))


def _checked_members(tar: tarfile.TarFile, tar_path: str | os.PathLike) -> list[tarfile.TarInfo]:
    """Every member, if each is a regular file or folder under a relative path without "..", its mode as the data
    filter leaves it (no set-id bits, no write for group and others, the owner's read and write); else one error
    naming the first that is not."""
    members = tar.getmembers()
    for m in members:
        path = Path(m.name)
        if not (m.isfile() or m.isdir()) or path.is_absolute() or ".." in path.parts:
            kind = ("a link" if m.issym() or m.islnk() else "a special file" if not (m.isfile() or m.isdir())
                    else "a path out of the folder")
            raise DataError(f"{tar_path}: member {m.name!r} is {kind}; refused (delete the file and download it again, "
                            f"or use Python 3.11.4 or later, whose tarfile filters such members)")
        m.mode = (m.mode | 0o600) & 0o755 if m.isfile() else 0o755
    return members


def prepare_senteval(source: SourceConfig, out_dir: str | os.PathLike) -> Path:
    """Resolve evaluation data to a SentEval downstream/ folder; write a pointer file ``out_dir/ROOT``.

    A local folder is used in place (never copied); the hub tarball is extracted once under out_dir.
    """
    out_dir = Path(out_dir)
    if source.path:
        root = check_senteval_dir(source.path)
    else:
        tar_path = hub_download(source.hub_repo, source.hub_file)
        target = out_dir / "extracted"
        if not target.exists():
            with atomic_path(target, is_dir=True) as tmp:
                extract_tar(tar_path, tmp)
        candidates = [p for p in target.rglob("downstream") if p.is_dir()] or [target]
        root = check_senteval_dir(candidates[0])
        write_source(out_dir / SOURCE_FILE, source.hub_repo, source.hub_file, tar_path)
    if source.path:
        (out_dir / SOURCE_FILE).unlink(missing_ok=True)
    write_text(out_dir / "ROOT", str(root.resolve()) + "\n")
    return root



# ----------------------------------------------------------------------------- probing tasks


def offline() -> bool:
    """Downloads disabled: CSEBENCH_OFFLINE or HF_HUB_OFFLINE set to a true value."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("CSEBENCH_OFFLINE", "HF_HUB_OFFLINE"))


def url_download(url: str, dest: Path, timeout: float = 120) -> Path:
    """Fetch ``url`` to ``dest`` once (atomic); a cached file is reused, also offline."""
    if dest.is_file():
        return dest
    if offline():
        raise DataError(f"{dest.name} is not in the download cache ({dest}) and downloads are disabled "
                        f"(CSEBENCH_OFFLINE/HF_HUB_OFFLINE): fetch {url} into {dest.parent}, or point "
                        f"params.yaml data.<source>.probing at a local folder ({{path: ...}})")
    log.info("downloading %s", url)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, atomic_path(dest) as tmp:
            with open(tmp, "wb") as fh:
                shutil.copyfileobj(resp, fh, 1 << 20)
    except (urllib.error.URLError, OSError) as exc:  # HTTPError, timeouts, DNS failures
        raise DataError(f"could not download {url}: {exc}. Offline? Put the file in {dest.parent} or point "
                        f"params.yaml data.<source>.probing at a local folder ({{path: ...}})") from None
    return dest


def check_probing_dir(root: str | os.PathLike, tasks) -> Path:
    from csebench.evaluation.probing import PROBING_FILES, resolve_tasks

    root = Path(root)
    if not root.is_dir():
        raise DataError(f"probing data folder not found: {root}")
    if (root / "data" / "probing").is_dir():  # a SentEval checkout
        root = root / "data" / "probing"
    missing = [PROBING_FILES[t] for t in resolve_tasks(tasks) if not (root / PROBING_FILES[t]).is_file()]
    if missing:
        raise DataError(f"probing data at {root} is missing {', '.join(missing)} (SentEval's data/probing files)")
    return root


def prepare_probing(source: ProbingSourceConfig, out_dir: str | os.PathLike, tasks=None) -> Path:
    """Resolve SentEval's probing files to a folder; write a pointer file ``out_dir/ROOT``.

    A local folder is used in place; a URL source downloads ``URL/<file>`` into the download cache
    (:func:`csebench.core.paths.user_cache_dir`, one folder per URL), where later runs and offline runs find it.
    Every file is parsed once here, so a truncated or wrong download fails now, naming the file.
    """
    from csebench.evaluation.probing import PROBING_FILES, SSCL_TASKS, load_probing_task, resolve_tasks

    tasks = resolve_tasks(tasks or SSCL_TASKS)
    if source.path:
        root = check_probing_dir(source.path, tasks)
    else:
        base = source.url.rstrip("/")
        from csebench.core.paths import user_cache_dir

        root = user_cache_dir() / "probing" / hashlib.sha256(base.encode()).hexdigest()[:12]
        for t in tasks:
            url_download(f"{base}/{PROBING_FILES[t]}", root / PROBING_FILES[t])
    for t in tasks:
        load_probing_task(root, t)
    write_text(Path(out_dir) / "ROOT", str(root.resolve()) + "\n")
    log.info("probing data for %s: %s", ", ".join(tasks), root)
    return root



# ----------------------------------------------------------------------------- tokenized corpus



def tokenize_corpus(sentences: list[str], tokenizer, max_length: int, chunk: int = 10000) -> TokenizedCorpus:
    id_lists: list[list[int]] = []
    for start in range(0, len(sentences), chunk):
        enc = tokenizer(sentences[start : start + chunk], truncation=True, max_length=max_length,
                        padding=False, return_attention_mask=False)
        id_lists.extend(enc["input_ids"])
    return TokenizedCorpus.from_lists(id_lists)


def load_tokenized_corpus(corpus_path: str | os.PathLike, tokenizer, max_length: int,
                          cache_dir: str | os.PathLike | None, prefix: str = "") -> TokenizedCorpus:
    """Tokenize once per (corpus content, tokenizer, max length, prefix); reuse the cached arrays after.
    ``prefix``: a text put before every sentence (training.prefix), its tokens counted in the max length."""
    corpus_path = Path(corpus_path)
    sentences = read_corpus(corpus_path)
    if prefix:
        sentences = [prefix + s for s in sentences]
    if cache_dir is None:
        return tokenize_corpus(sentences, tokenizer, max_length)
    h = file_sha256(corpus_path)[:16]  # hashed once: read_corpus recorded it for the provenance
    key = f"{h}-{tokenizer_fingerprint(tokenizer)}-L{max_length}-n1"  # n1: lines split at "\n" only (read_corpus)
    if prefix:
        key += "-p" + hashlib.sha256(prefix.encode("utf-8")).hexdigest()[:12]
    cache = Path(cache_dir) / f"tokens-{key}.npz"
    if cache.is_file():
        cached = _cached_tokens(cache, len(sentences))
        if cached is not None:
            return cached
    tc = tokenize_corpus(sentences, tokenizer, max_length)
    with atomic_path(cache) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, ids=tc.ids, offsets=tc.offsets)
    return tc


def _cached_tokens(cache: Path, sentences: int) -> TokenizedCorpus | None:
    """The tokenized corpus a cache file holds, checked: whole arrays, one row per corpus sentence, offsets that
    index the ids. A damaged file (truncated by a full disk or a copy, edited) is a cache miss, said in a warning:
    the corpus is tokenized again and the file written anew (None), never a traceback or a wrong batch."""
    import zipfile
    import zlib

    try:
        with np.load(cache, allow_pickle=False) as z:
            ids, offsets = z["ids"], z["offsets"]
        ok = (ids.ndim == 1 and offsets.ndim == 1 and ids.dtype.kind in "iu" and offsets.dtype.kind in "iu"
              and len(offsets) == sentences + 1 and offsets[0] == 0 and offsets[-1] == len(ids)
              and bool(np.all(np.diff(offsets) >= 0)))
        why = "its arrays do not match the corpus" if not ok else ""
    except (OSError, ValueError, EOFError, KeyError, TypeError, zipfile.BadZipFile, zlib.error) as exc:
        ok, why = False, f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    if ok:
        return TokenizedCorpus(ids, offsets)
    log.warning("tokenized-corpus cache %s is damaged (%s): tokenizing the corpus again and writing it anew", cache, why)
    return None
