"""DistillCSE's ``teachers`` setting: which runs (and seeds) of the suite a student distils from.

A leaf module (errors and schema only): csebench.study.resolve reads it to key a student by its teachers, the
workflow to plan teacher jobs, and the distillation term to check its cache, without importing torch.
"""

from __future__ import annotations

from typing import Any

from csebench.core.errors import ConfigError
from csebench.core.schema import check_keys


def parse_teachers(teachers: Any, where: str) -> list[dict]:
    """Normalize the ``teachers`` setting to a list of {run: str, seeds: list[int] | None}."""
    if teachers is None:
        raise ConfigError(f"{where}.teachers is required: name the teacher run(s) of the same suite, "
                          f"e.g. teachers: {{run: simcse, seeds: [1, 2]}}")
    entries = teachers if isinstance(teachers, list) else [teachers]
    if not entries:
        raise ConfigError(f"{where}.teachers: empty list; give at least one teacher run")
    out = []
    for k, entry in enumerate(entries):
        w = f"{where}.teachers" + (f"[{k}]" if isinstance(teachers, list) else "")
        if isinstance(entry, str):
            entry = {"run": entry}
        check_keys(w, entry, ["run", "seeds"])
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


def teacher_runs(settings: dict, seed: int) -> list[tuple[str, int]]:
    """(run name, seed) of every teacher component, in the order the student averages them."""
    out: list[tuple[str, int]] = []
    for entry in parse_teachers(settings.get("teachers"), "objectives.distillation"):
        for s in entry["seeds"] if entry["seeds"] is not None else [int(seed)]:
            if (entry["run"], int(s)) not in out:
                out.append((entry["run"], int(s)))
    return out


TEACHER_REPRESENTATIONS = ("eval", "training")


def teacher_representation(objectives: dict | None) -> str:
    """What the run's teacher term reads of its teachers (its ``teacher_representation`` setting, DCLR's):
    ``eval``, each teacher's evaluation embedding (teacher/embeddings.npy), or ``training``, its pooler and the
    training head it saved (teacher/training.npy: a SimCSE run's MLP head, as a converted SimCSE checkpoint's
    pooler_output)."""
    found = teacher_term(objectives)
    return (found[1].get("teacher_representation") or "eval") if found else "eval"


def teacher_term(objectives: dict | None) -> tuple[str, dict] | None:
    """(key, settings) of the run's one objective term that reads frozen teachers' cached corpus embeddings,
    i.e. has a ``teachers`` setting (DistillCSE's distillation, DCLR's complementary model, RankCSE's
    ranking teachers; a new term needs no list entry), or None. Two such terms would need two teacher
    lists for one run (the workflow plans one), which is refused."""
    found = [(k, v) for k, v in (objectives or {}).items() if isinstance(v, dict) and "teachers" in v]
    if len(found) > 1:
        raise ConfigError(f"objectives: {', '.join(k for k, _ in found)} all read teachers; a run may hold one of them")
    return found[0] if found else None
