"""What made a result: software, git commit, device, precision and the sha256 of every data file read.

Every result JSON (train.json, sts.json, transfer.json, probing and analysis JSONs, embeddings and
teacher-cache metadata) carries ``collect()`` under the key ``"provenance"``; tables and figures
carry ``summary_line()`` of the blocks they were made from. The block holds no time, host name or
path (data files are named relative to their SentEval root), so the same command in the same
environment still writes byte-identical files (docs/reliability.md, "Determinism").

Data files are hashed once per process and cached by (path, size, mtime). Loaders call
``record_data`` after parsing a file: that records its hash and checks it against the manifest of
SentEval's published files (``resources/senteval-manifest.yaml``: line count and sha256 of every
file of senteval.tar's downstream/ folder). ``CSEBENCH_DATA_CHECK=0`` turns the check off for
deliberately modified data; the block then lists the files that differ from the published ones.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import os
import platform
import subprocess
from collections import Counter
from pathlib import Path

from csebench.core.errors import DataError

_HASHES: dict[tuple, tuple[str, int]] = {}  # (path, size, mtime_ns) -> (sha256, lines)
_DATA: dict[str, str] = {}  # files read by this command: name -> sha256
_NOT_PUBLISHED: set[str] = set()
_CORPUS: dict[str, str] = {}
_HUB: dict[str, str] = {}  # "models/ID" or "datasets/REPO/FILE" -> the hub commit it was read at
SOURCE_FILE = ".hub.json"  # beside a prepared file (corpus.txt.hub.json) or in a prepared folder (senteval/.hub.json)


def reset() -> None:
    """Forget the files read so far (the CLI calls this when a command starts)."""
    _DATA.clear()
    _NOT_PUBLISHED.clear()
    _CORPUS.clear()
    _HUB.clear()


def hub_commit(path: str | os.PathLike) -> str | None:
    """The commit of a file in the Hugging Face cache, from its place there: .../snapshots/<commit>/<file>."""
    parts = Path(path).parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i - 1] == "snapshots" and len(parts[i]) == 40:
            return parts[i]
    return None


def record_hub(name: str, commit: str | None) -> None:
    """A backbone ("models/ID") or data file ("datasets/REPO/FILE") read from the hub, at this commit."""
    if commit:
        _HUB[name] = commit


def record_model_revision(model: str) -> str | None:
    """The commit at which a hub id's files are in the local cache (what from_pretrained just read), recorded;
    None for anything that is not a hub id in the cache (a folder, packaged:minilm, random)."""
    if Path(model).expanduser().exists() or ":" in model or model == "random":
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, "config.json")
    except Exception:  # not a valid repo id
        return None
    commit = hub_commit(found) if isinstance(found, str) else None
    record_hub(f"models/{model}", commit)
    return commit


def write_source(path: str | os.PathLike, repo: str, filename: str, downloaded: str | os.PathLike) -> None:
    """Note beside a file prepared from a hub dataset file which commit it came from; results made from the
    prepared file record it (read_source)."""
    from csebench.core.io import dumps_json, write_text

    write_text(path, dumps_json({"repo": repo, "file": filename, "revision": hub_commit(downloaded)}) + "\n")


def read_source(path: str | os.PathLike) -> None:
    """Record the hub commit noted by write_source, if there is a note."""
    import json

    p = Path(path)
    if p.is_file():
        note = json.loads(p.read_text(encoding="utf-8"))
        record_hub(f"datasets/{note['repo']}/{note['file']}", note.get("revision"))


def file_digest(path: str | os.PathLike) -> tuple[str, int]:
    """(sha256, number of lines) of a file, computed once per (path, size, mtime)."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h, lines, last = hashlib.sha256(), 0, b"\n"
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        _HASHES[key] = (h.hexdigest(), lines + (last != b"\n"))  # a last line without newline counts
    return _HASHES[key]


def file_sha256(path: str | os.PathLike) -> str:
    return file_digest(path)[0]


@functools.cache
def manifest() -> dict[str, dict]:
    """SentEval's published files: downstream-relative path -> {lines, sha256}."""
    from csebench.core.schema import load_yaml_text

    text = importlib.resources.files("csebench").joinpath("resources/senteval-manifest.yaml").read_text(encoding="utf-8")
    return load_yaml_text(text, "resources/senteval-manifest.yaml")["files"]


def manifest_name(path: Path) -> str | None:
    """The manifest entry a file stands for, from the end of its path (SentEval's layout is fixed)."""
    parts = Path(path).parts
    for n in (3, 2):
        name = "/".join(parts[-n:])
        if name in manifest():
            return name
    return None


def data_check_on() -> bool:
    return os.environ.get("CSEBENCH_DATA_CHECK", "").strip().lower() not in ("0", "off", "false", "no")


def record_data(path: str | os.PathLike, name: str | None = None) -> str:
    """Record an evaluation data file read by this command; a SentEval file must match the published
    one (line count, then sha256) unless CSEBENCH_DATA_CHECK=0. Returns its sha256."""
    path = Path(path)
    sha, lines = file_digest(path)
    published = manifest_name(path)
    name = name or published or path.name
    if published is not None:
        want = manifest()[published]
        if (sha, lines) != (want["sha256"], want["lines"]):
            if data_check_on():
                how = (f"has {lines} lines, SentEval's published {published} has {want['lines']} (truncated or another "
                       "version?)" if lines != want["lines"] else
                       f"differs from SentEval's published {published} (same {lines} lines, sha256 {sha[:12]}… "
                       f"instead of {want['sha256'][:12]}…)")
                raise DataError(f"{path} {how}: restore it from senteval.tar, or set CSEBENCH_DATA_CHECK=0 to use "
                                "it anyway (the results then name it in their provenance)")
            _NOT_PUBLISHED.add(name)
    _DATA[name] = sha
    return sha


def record_corpus(path: str | os.PathLike) -> str:
    sha = file_sha256(path)
    _CORPUS.clear()
    _CORPUS.update(file=Path(path).name, sha256=sha)
    read_source(f"{path}{SOURCE_FILE}")  # prepared from the hub: at which commit
    return sha


def git_info() -> dict | None:
    """Commit and dirty flag of the csebench source checkout; None when csebench is not run from one
    (an installed package, or a tree that git finds only as part of another repository)."""
    return package_git_info(Path(__file__).resolve().parents[1])  # src/csebench (this file is in its core/)


@functools.cache
def package_git_info(pkg: Path) -> dict | None:
    """git_info of the package folder ``pkg``: it must be ``src/csebench`` of the repository's top."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(pkg), *args], capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    try:
        top = Path(git("rev-parse", "--show-toplevel")).resolve()
        if top / "src" / "csebench" != pkg:
            return None
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return None


@functools.cache
def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_name(device) -> str:
    import torch

    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def collect(device=None, world_size: int = 1, precision: str | None = None, autocast: str | None = None) -> dict:
    """The provenance block of a result written now (``device``: where the numbers were computed;
    default the evaluation device, CUDA when available)."""
    import torch
    import transformers

    from csebench._version import __version__

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    out = {"csebench": __version__, "git": git_info(), "python": platform.python_version(),
           "torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
           "device_type": device.type, "device": device_name(device), "world_size": world_size,
           "precision": precision, "autocast": autocast}
    if _CORPUS:
        out["corpus"] = dict(_CORPUS)
    out["data"] = dict(sorted(_DATA.items()))
    if _HUB:  # the hub commit of every backbone and data file read from the hub
        out["hub"] = dict(sorted(_HUB.items()))
    out["data_check"] = "published" if data_check_on() else "off"
    if _NOT_PUBLISHED:
        out["data_not_published"] = sorted(_NOT_PUBLISHED)
    if _REHEARSAL is not None:  # random-weight stand-ins of the paper backbones: not results (csebench.model.standins)
        out["rehearsal"] = _REHEARSAL.describe()
    return out


# set by csebench.model.standins while a rehearsal is active (that module registers itself here, so that this
# low-level one imports nothing above it)
_REHEARSAL = None


def set_rehearsal(rehearsal) -> None:
    """The active rehearsal (an object with ``describe() -> dict``), or None."""
    global _REHEARSAL
    _REHEARSAL = rehearsal


# ------------------------------------------------------------------------------------- a result as written

def scores_digest(result: dict, keys) -> str:
    """sha256 of a result's scores (its ``keys``: what the command computed, before the envelope), as JSON with
    sorted keys and an undefined number as null, so that the same scores give the same digest whether they are
    read back from the file or still in memory."""
    from csebench.core.io import dumps_json, nulled

    part = {k: result.get(k) for k in sorted(keys)}
    text = dumps_json(nulled(part), indent=None, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scores_record(result: dict, keys) -> dict:
    """What a result's provenance block records of its scores when they are written (``"scores"``): which keys they
    are and their digest. A reader recomputes it (written_as_recorded): a number edited after the file was written
    no longer matches."""
    return {"keys": sorted(keys), "sha256": scores_digest(result, keys)}


def written_as_recorded(result) -> bool | None:
    """Whether a result's scores are those its provenance recorded when it was written: True or False, None where it
    recorded none (a file of an older csebench, or no result)."""
    block = result.get("provenance") if isinstance(result, dict) else None
    record = block.get("scores") if isinstance(block, dict) else None
    if not (isinstance(record, dict) and isinstance(record.get("keys"), list) and isinstance(record.get("sha256"), str)):
        return None
    try:
        return scores_digest(result, record["keys"]) == record["sha256"]
    except (TypeError, ValueError):  # a key that is no text, a value JSON cannot hold
        return False


CHANGED = "changed_after_written"  # a reader's mark on a block whose scores no longer match (csebench.results.runs)


# ------------------------------------------------------------------------------------- summaries

def _software(b: dict) -> str:
    git = b.get("git")
    commit = f" git {git['commit'][:10]}{' dirty' if git.get('dirty') else ''}" if git else ""
    return f"{b.get('csebench')}{commit}"


# (label, value of a block): differences in these are stated as such
_FIELDS = [("csebench", _software), ("Python", lambda b: b.get("python")), ("torch", lambda b: b.get("torch")),
           ("transformers", lambda b: b.get("transformers")), ("CUDA", lambda b: b.get("cuda") or "none"),
           ("cuDNN", lambda b: b.get("cudnn") or "none"), ("device", lambda b: b.get("device")),
           ("corpus sha256", lambda b: (b.get("corpus") or {}).get("sha256", "")[:12] or None)]


def blocks_of(result: dict | None) -> list[dict | None]:
    """A result's provenance block, and that of the embeddings table it was scored from, if any."""
    if not isinstance(result, dict):
        return [None]
    block = result.get("provenance")
    return [block] + (list(block.get("embeddings") or []) if isinstance(block, dict) else [])


def summary_line(blocks: list[dict | None]) -> str:
    """One line for a table or figure footer: the common values of the blocks, and explicitly every
    field in which they differ (software versions, device, corpus) and any unpublished data file."""
    have = [b for b in blocks if isinstance(b, dict)]
    if not blocks:
        return "Provenance: no result files yet (nothing was run)."
    if not have:
        return f"Provenance: not recorded in the {len(blocks)} result file(s) this was made from."
    same, differ = [], []
    for label, get in _FIELDS:
        counts = Counter(v for v in map(get, have) if v is not None)
        if len(counts) == 1:
            same.append(f"{label} {next(iter(counts))}")
        elif counts:
            differ.append(f"{label} " + " / ".join(f"{v} ({n})" for v, n in counts.most_common()))
    sizes = sorted({b.get("world_size") or 1 for b in have})
    same.append(f"{'/'.join(map(str, sizes))} process{'es' if sizes != [1] else ''}")
    autocast = sorted({str(b.get("autocast")) for b in have if b.get("autocast")})
    if autocast:
        same.append(f"autocast {'/'.join(autocast)}")
    unpublished = sorted({f for b in have for f in b.get("data_not_published") or []})
    checked = any(b.get("data") for b in have)
    if unpublished:
        same.append(f"data NOT as published: {', '.join(unpublished)}")
    elif checked:
        same.append("SentEval data sha256-checked")
    n = len(blocks)
    line = f"Provenance ({n} result file{'s' if n != 1 else ''}): " + " · ".join(same) + "."
    if differ:
        line += " Made with DIFFERENT " + "; ".join(differ) + " (number of result files)."
    changed = sorted({str(b[CHANGED]) for b in have if b.get(CHANGED)})
    if changed:
        line += (f" CHANGED after it was written: {', '.join(changed)} (its scores differ from those its provenance "
                 "recorded when csebench wrote it: these numbers are not csebench's).")
    if len(have) < n:
        line += f" {n - len(have)} file(s) record no provenance."
    return line


def mixed_note(line: str) -> str:
    """The part of a summary line that says the results differ or were changed after they were written (for a LaTeX
    caption), else ""."""
    starts = [line.index(k) for k in ("Made with DIFFERENT", "CHANGED after it was written") if k in line]
    return " " + line[min(starts):] if starts else ""


def result_json(path: str | os.PathLike) -> Path | None:
    """The result JSON that carries the provenance of an output file: the file itself (.json), its
    .json sibling (an analysis's .md or .png), else the train.json of its run folder (curves)."""
    p = Path(path)
    for cand in (p, p.with_suffix(".json"), p.with_name("train.json")):
        if cand.suffix == ".json" and cand.is_file():
            return cand
    return None

