"""Training checkpoints without pickle: tensors in one safetensors file, everything else in JSON.

A pickle (``torch.save``/``torch.load``) can run code when it is loaded, so a checkpoint from a shared
folder or a colleague could; these files hold only numbers, text and tensors. A manifest (every file's
size and sha256), written last, says the checkpoint is complete and unchanged; ``verify`` checks it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from csebench.core.io import dumps_json

STATE, TENSORS, MANIFEST = "state.json", "tensors.safetensors", "manifest.json"


def _pack(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """``obj`` as JSON, its tensors moved to ``tensors``. Tuples, non-string keys, numpy arrays and
    non-finite floats are tagged so that ``_unpack`` gives back the same Python objects."""
    if isinstance(obj, torch.Tensor):
        key = str(len(tensors))
        tensors[key] = obj
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype)}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": repr(obj)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, tuple):
        return {"__tuple__": [_pack(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_pack(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _pack(v, tensors) for k, v in obj.items()}
        return {"__items__": [[_pack(k, tensors), _pack(v, tensors)] for k, v in obj.items()]}
    raise TypeError(f"a checkpoint cannot hold a {type(obj).__name__} (only tensors, numbers, text and containers)")


def _unpack(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_unpack(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        return tensors.get(obj["__tensor__"])  # read_state: None
    if "__ndarray__" in obj:
        return np.asarray(obj["__ndarray__"], dtype=obj["dtype"])
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__tuple__" in obj:
        return tuple(_unpack(v, tensors) for v in obj["__tuple__"])
    if "__items__" in obj:
        return {_unpack(k, tensors): _unpack(v, tensors) for k, v in obj["__items__"]}
    return {k: _unpack(v, tensors) for k, v in obj.items()}


def _storable(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """CPU, contiguous, and owning their storage: safetensors refuses tensors that share memory."""
    out, seen = {}, set()
    for key, t in tensors.items():
        t = t.detach().cpu().contiguous()
        storage = t.untyped_storage()
        if storage.data_ptr() in seen or storage.nbytes() != t.numel() * t.element_size():
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        out[key] = t
    return out


def save(folder: str | os.PathLike, state: dict) -> None:
    """Write ``state`` into ``folder`` (the temporary folder of an atomic write), then the manifest of
    everything the folder holds by then."""
    from safetensors.torch import save_file

    folder = Path(folder)
    tensors: dict[str, torch.Tensor] = {}
    tree = _pack(state, tensors)
    save_file(_storable(tensors), str(folder / TENSORS))
    (folder / STATE).write_text(dumps_json(tree, indent=None) + "\n", encoding="utf-8")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    manifest = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": _sha256(p)} for p in files}
    (folder / MANIFEST).write_text(dumps_json({"files": manifest}, indent=1) + "\n", encoding="utf-8")


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def verify(folder: str | os.PathLike, required: tuple[str, ...] = ()) -> str | None:
    """What is wrong with the checkpoint in ``folder`` (None: complete and unchanged). ``required``:
    files the manifest must list besides the state."""
    folder = Path(folder)
    try:
        listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
    except FileNotFoundError:
        legacy = " (a pickle from an older csebench: never loaded, it could run code)" if (folder / "trainer.pt").exists() else ""
        return f"has no {MANIFEST}{legacy}"
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return f"has an unreadable {MANIFEST}"
    for name in (STATE, TENSORS, *required):
        if name not in listed:
            return f"does not match its {MANIFEST}: {name} is not listed"
    for name, entry in listed.items():
        p = folder / name
        if not p.is_file():
            return f"does not match its {MANIFEST}: {name} is missing"
        if p.stat().st_size != entry.get("size") or _sha256(p) != entry.get("sha256"):
            return f"does not match its {MANIFEST}: {name} has changed"
    return None


def load(folder: str | os.PathLike, device: torch.device | str = "cpu") -> dict:
    """The state ``save`` wrote (tensors on ``device``). Call ``verify`` first."""
    from safetensors.torch import load_file

    folder = Path(folder)
    tensors = load_file(str(folder / TENSORS), device=str(device))
    return _unpack(json.loads((folder / STATE).read_text(encoding="utf-8")), tensors)


def read_state(folder: str | os.PathLike) -> dict:
    """The JSON part of the state (no tensors): step, best score, run identity."""
    return _unpack(json.loads((Path(folder) / STATE).read_text(encoding="utf-8")), {})
