"""DistillCSE's ``teachers`` setting: which runs (and seeds) of the suite a student distils from, or which models.

A teacher is a run of the same suite, ``{run: NAME, seeds: [..]}`` (its caches planned and built by the workflow),
or a model, ``{model: M}``: a folder trained by `csebench train` (its run folder or its model/ folder), any model
folder, a backbone name of params.yaml (``minilm``) or a hub id, whose cache the train command builds itself
(csebench.training.teachers.model_teacher_caches). A model teacher is named in the student's key by the key and
seed of the run it is (a folder of csebench's), else by its folder's absolute path, else as given (a hub id).

A leaf module (errors and schema only): csebench.study.resolve reads it to key a student by its teachers, the
workflow to plan teacher jobs, and the distillation term to check its cache, without importing torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from csebench.core.errors import ConfigError
from csebench.core.schema import check_keys


def parse_teachers(teachers: Any, where: str) -> list[dict]:
    """Normalize the ``teachers`` setting to a list of {run: str, seeds: list[int] | None} or {model: str}."""
    if teachers is None:
        raise ConfigError(f"{where}.teachers is required: name the teacher run(s) of the same suite, "
                          f"e.g. teachers: {{run: simcse, seeds: [1, 2]}}, or model(s), e.g. teachers: "
                          "{model: results/runs/KEY/seed42} (`csebench train --teacher DIR` for a run of your own)")
    entries = teachers if isinstance(teachers, list) else [teachers]
    if not entries:
        raise ConfigError(f"{where}.teachers: empty list; give at least one teacher run")
    out = []
    for k, entry in enumerate(entries):
        w = f"{where}.teachers" + (f"[{k}]" if isinstance(teachers, list) else "")
        if isinstance(entry, str):
            entry = {"run": entry}
        check_keys(w, entry, ["run", "seeds", "model"])
        if "model" in entry:
            model = entry["model"]
            if set(entry) != {"model"}:
                raise ConfigError(f"{w}: a model teacher is {{model: FOLDER_OR_ID}} alone (no run, no seeds), got {entry!r}")
            if not isinstance(model, str) or not model.strip():
                raise ConfigError(f"{w}.model: expected a model folder, a run folder of `csebench train`, a backbone "
                                  f"name or a hub id, got {model!r}")
            out.append({"model": model})
            continue
        run = entry.get("run")
        if not isinstance(run, str) or not run:
            raise ConfigError(f"{w}.run: expected a run name of the same suite, got {run!r}")
        seeds = entry.get("seeds")
        if seeds is not None:
            if isinstance(seeds, int) and not isinstance(seeds, bool):
                seeds = [seeds]
            if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
                raise ConfigError(f"{w}.seeds: expected a non-empty list of integer seeds, got {seeds!r}")
            if len(set(seeds)) != len(seeds):
                raise ConfigError(f"{w}.seeds: a seed is listed twice in {seeds}")
        out.append({"run": run, "seeds": seeds})
    return out


def teacher_components(settings: dict, seed: int) -> list[tuple[str, str, int | None]]:
    """Every teacher component in the order the student averages them: ("run", run name, seed) for a run of the
    suite at each of its seeds, ("model", model, None) for a model teacher; each once."""
    out: list[tuple[str, str, int | None]] = []
    for entry in parse_teachers(settings.get("teachers"), "objectives.distillation"):
        if "model" in entry:
            comps = [("model", entry["model"], None)]
        else:
            comps = [("run", entry["run"], int(s)) for s in (entry["seeds"] if entry["seeds"] is not None else [int(seed)])]
        out.extend(c for c in comps if c not in out)
    return out


TEACHER_REPRESENTATIONS = ("eval", "training")


def teacher_representation(objectives: dict | None) -> str:
    """What the run's teacher term reads of its teachers (its ``teacher_representation`` setting, DCLR's):
    ``eval``, each teacher's evaluation embedding (teacher/embeddings.npy), or ``training``, its pooler and the
    training head it saved (teacher/training.npy: a SimCSE run's MLP head, as a converted SimCSE checkpoint's
    pooler_output)."""
    found = teacher_term(objectives)
    return (found[1].get("teacher_representation") or "eval") if found else "eval"


def teacher_runs(settings: dict, seed: int) -> list[tuple[str, int]]:
    """(run name, seed) of every teacher component that is a run of the suite, in the order the student averages
    them (the workflow's teacher jobs; model teachers are no job of the suite)."""
    return [(name, s) for kind, name, s in teacher_components(settings, seed) if kind == "run"]


def teacher_model_folder(model: str) -> str:
    """A model teacher as loaded: a run folder of `csebench train` (holding model/) is its model/ folder."""
    p = Path(model).expanduser()
    if p.is_dir() and not (p / "config.json").is_file() and (p / "model" / "config.json").is_file():
        return str(p / "model")
    return model


def teacher_model_identity(model: str) -> str:
    """How a student's key names a model teacher: ``run KEY/seedN`` for a model trained by csebench (its
    training_config.json), the absolute path of any other model folder, else the model as given (a hub id,
    packaged:minilm). A teacher cache records the same (csebench.training.teachers.build_teacher_cache)."""
    folder = Path(teacher_model_folder(model)).expanduser()
    if not folder.is_dir():
        return model
    try:
        run = json.loads((folder / "training_config.json").read_text(encoding="utf-8"))
        if run.get("key") and run.get("seed") is not None:
            return f"run {run['key']}/seed{run['seed']}"
    except (OSError, ValueError, AttributeError):
        pass
    return str(folder.resolve())


def teacher_term(objectives: dict | None) -> tuple[str, dict] | None:
    """(key, settings) of the run's one objective term that reads frozen teachers' cached corpus embeddings,
    i.e. has a ``teachers`` setting (DistillCSE's distillation, DCLR's complementary model, RankCSE's
    ranking teachers; a new term needs no list entry), or None. Two such terms would need two teacher
    lists for one run (the workflow plans one), which is refused."""
    found = [(k, v) for k, v in (objectives or {}).items() if isinstance(v, dict) and "teachers" in v]
    if len(found) > 1:
        raise ConfigError(f"objectives: {', '.join(k for k, _ in found)} all read teachers; a run may hold one of them")
    return found[0] if found else None
