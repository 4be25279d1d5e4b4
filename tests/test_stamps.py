"""csebench.workflow.stamps: a tree written anew by a DVC checkout or a copy gets its build's modification
times back, so Snakemake plans nothing for it; a tree as built, or edited by hand, is left alone."""

import json
import os
import shutil
from pathlib import Path

from csebench.core.paths import times_record
from csebench.workflow.stamps import record_times, restore_times

SEC = 1_000_000_000


def _build(results: Path) -> dict[str, int]:
    """A suite folder, a run store and a paper item, written one after the other as a build would."""
    t = 1_700_000_000 * SEC
    files = ["runs/k1/seed1/train.json", "runs/k1/seed1/model/model.safetensors", "runs/k1/seed1/eval/sts.json",
             "ci/runs/simcse/seed1/sts.json", "ci/tables/sts.md", "papers/is-cse/table-1.md",
             "papers/is-cse/table-1.csv", "README.md"]
    times = {}
    for i, rel in enumerate(files):
        p = results / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"content of {rel}\n")
        times[rel] = t + i * SEC
        os.utime(p, ns=(times[rel], times[rel]))
    link = results / "ci/runs/simcse/seed1/train.json"  # a view's links into the run store
    link.symlink_to("../../../../runs/k1/seed1/train.json")
    (results / "ci/runs/simcse/seed1/model").symlink_to("../../../../runs/k1/seed1/model")
    times["ci/runs/simcse/seed1/train.json"] = t + 3 * SEC + SEC // 2
    times["ci/runs/simcse/seed1/model"] = t + 4 * SEC
    for rel in ("ci/runs/simcse/seed1/train.json", "ci/runs/simcse/seed1/model"):
        os.utime(results / rel, ns=(times[rel],) * 2, follow_symlinks=False)
    return times


def _view_model(results: Path):
    """What csebench.study.jobs.Runs.view_model computes from params.yaml, for the one view of _build."""
    return lambda suite, run, seed: str(results / "runs/k1/seed1/model") if (suite, run, seed) == ("ci", "simcse", 1) else None


def _mtime(p: Path) -> int:
    return p.lstat().st_mtime_ns


def _checkout(src: Path, dst: Path, order: list[str]) -> None:
    """What DVC does: every file written anew, now, in its own order; a link to a file becomes a copy
    of it, a link to a folder is not stored."""
    for rel in order:
        s = src / rel
        if s.is_symlink() and s.resolve().is_dir():
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(s, dst / rel)


def _all_files(results: Path) -> list[str]:
    return sorted(str(p.relative_to(results)) for p in results.rglob("*") if p.is_file() or p.is_symlink())


def test_a_checkout_in_any_order_gets_the_build_order_back(tmp_path):
    built = tmp_path / "built" / "results"
    times = _build(built)
    assert len(record_times(built)) == 4  # ci, the run store, the item's files, the front page
    records = {str(p.relative_to(built)): p.read_bytes() for p in built.rglob("*.csebench-times.json")}
    assert sorted(records) == [".README.csebench-times.json", "ci/.csebench-times.json",
                               "papers/is-cse/.table-1.csebench-times.json", "runs/.csebench-times.json"]
    clone = tmp_path / "clone" / "results"
    _checkout(built, clone, list(reversed(_all_files(built))))  # newest first: every input newer than its output
    restored = dict(restore_times(clone, view_model=_view_model(clone)))
    assert set(restored) == {str(clone / "ci"), str(clone / "runs"), f"{clone}/papers/is-cse/table-1.*", f"{clone}/README.*"}
    offsets = {_mtime(clone / rel) - t for rel, t in times.items()}
    assert len(offsets) == 1  # one shift for every file and link of every tree (the view's model link too): the build's order
    model = clone / "ci/runs/simcse/seed1/model"  # the view's link to the model, made again where params.yaml says
    assert model.is_symlink() and os.readlink(model) == "../../../../runs/k1/seed1/model"
    assert not (clone / "ci/runs/simcse/seed1/train.json").is_symlink()  # DVC's copy stays a copy, with the link's time
    for rel, data in records.items():  # nothing DVC hashes changed: the records are the pulled ones
        assert (clone / rel).read_bytes() == data, rel
    assert record_times(clone) == [] and restore_times(clone) == []  # done once; unchanged trees keep their record


def test_a_tree_as_built_or_edited_by_hand_is_left_alone(tmp_path):
    results = tmp_path / "results"
    times = _build(results)
    record_times(results)
    assert restore_times(results) == []
    edited = results / "runs/k1/seed1/eval/sts.json"
    edited.write_text("edited by hand\n")  # newer than what reads it: Snakemake must see that
    after = _mtime(edited)
    assert restore_times(results) == [] and _mtime(edited) == after
    assert _mtime(results / "ci/tables/sts.md") == times["ci/tables/sts.md"]
    assert record_times(results) == [str(times_record(results / "runs"))]  # the edit is recorded


def test_a_link_dvc_replaced_by_a_copy_gets_the_links_time(tmp_path):
    results = tmp_path / "results"
    times = _build(results)
    record_times(results)
    view = results / "ci/runs/simcse/seed1/train.json"
    view.unlink()
    shutil.copyfile(results / "runs/k1/seed1/train.json", view)  # what `dvc repro` does to a link to a file
    assert dict(restore_times(results)) == {str(results / "ci"): 1}
    assert _mtime(view) == times["ci/runs/simcse/seed1/train.json"]
    record = times_record(results / "ci").read_bytes()
    assert record_times(results) == [] and times_record(results / "ci").read_bytes() == record


def test_a_file_of_another_size_is_not_given_a_recorded_time(tmp_path):
    built = tmp_path / "built" / "results"
    _build(built)
    record_times(built)
    clone = tmp_path / "clone" / "results"
    _checkout(built, clone, _all_files(built))
    (clone / "ci/tables/sts.md").write_text("another table, longer than the one recorded\n")
    before = _mtime(clone / "ci/tables/sts.md")
    restore_times(clone)
    assert _mtime(clone / "ci/tables/sts.md") == before


def test_records_are_valid_json_naming_each_file(tmp_path):
    results = tmp_path / "results"
    _build(results)
    record_times(results)
    data = json.loads(times_record(results / "papers/is-cse", "table-1").read_text())
    assert sorted(data["files"]) == ["table-1.csv", "table-1.md"]
    assert os.stat(times_record(results / "papers/is-cse", "table-1")).st_mtime_ns == data["stamp"]


# ----------------------------------------------------------------------------- a pulled record is data, not places to write


ONLY_DATES = "a record of build times only dates files already in its folder, it never creates any"


def _snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder``, links not followed: its kind, content or target, and modification time."""
    out = {}
    for here, dirs, names in os.walk(folder):
        for name in [*dirs, *names]:
            p = Path(here) / name
            kind = "link" if p.is_symlink() else "dir" if p.is_dir() else "file"
            what = os.readlink(p) if kind == "link" else p.read_bytes() if kind == "file" else None
            out[str(p.relative_to(folder))] = (kind, what, p.lstat().st_mtime_ns)
    return out


def _entries(folder: Path) -> dict[str, tuple]:
    """The snapshot without times: what exists, and what it holds or points to."""
    return {rel: (kind, what) for rel, (kind, what, _) in _snapshot(folder).items()}


def _write_record(path: Path, data, stamp_differs: bool = True) -> None:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    if isinstance(data, dict) and isinstance(data.get("stamp"), int) and not stamp_differs:
        os.utime(path, ns=(data["stamp"],) * 2)


def test_a_pulled_record_changes_nothing_outside_its_tree(tmp_path):
    """A record that names files outside its folder, absolute paths, paths through a link, links out of
    the repository, and a record that is itself a link: only the record's own files get times back."""
    outside = tmp_path / "outside" / "decoy"
    (outside / "sub").mkdir(parents=True)
    (outside / "decoy.txt").write_text("a file csebench must not touch\n")
    (outside / "sub" / "deep.txt").write_text("nor this one\n")
    (outside / "record.json").write_text(json.dumps({"stamp": 5 * SEC, "files": {}, "links": {}}))
    for p in (outside / "decoy.txt", outside / "sub" / "deep.txt", outside / "record.json"):
        os.utime(p, ns=(1_600_000_000 * SEC,) * 2)
    before_outside = _snapshot(tmp_path / "outside")
    results = tmp_path / "proj" / "results"
    times = _build(results)
    record_times(results)
    (results / "ci" / "escape").symlink_to(outside, target_is_directory=True)  # kept by a `cp -a` of a planted tree
    decoy_size = (outside / "decoy.txt").stat().st_size
    t = 1_800_000_000 * SEC
    hostile = {
        "stamp": t,
        "files": {"tables/sts.md": [t, (results / "ci/tables/sts.md").stat().st_size],  # its own: restored
                  "../../../outside/decoy/decoy.txt": [t, decoy_size],
                  str(outside / "decoy.txt"): [t, decoy_size],
                  "escape/decoy.txt": [t, decoy_size],
                  "runs/simcse/seed1/model/model.safetensors": [t, 1]},  # through the view's link, into another tree
        "links": {"newdir/deeper/abs_link": ["/etc/hostname", t, None],
                  "inside_link": ["/etc/passwd", t, 10],
                  "up": ["../../../outside/decoy", t, None],
                  "runs/other/seed1/model": ["../../../../runs/k1/seed1/model", t, None]},  # no view params.yaml lists
    }
    _write_record(results / "ci/.csebench-times.json", hostile)
    group = {"stamp": t, "files": {"../../../../outside/decoy/decoy.txt": [t, decoy_size],
                                   "table-9.md": [t, 1]}, "links": {"x": ["../../table-1.md", t, None]}}
    _write_record(results / "papers/is-cse/.table-1.csebench-times.json", group)
    (results / "runs/.csebench-times.json").unlink()
    (results / "runs/.csebench-times.json").symlink_to(outside / "record.json")
    inside_before = _entries(results)
    sts_before = _mtime(results / "ci/tables/sts.md")
    warnings = []

    restore_times(results, view_model=lambda suite, run, seed: None, warn=warnings.append)

    assert _snapshot(tmp_path / "outside") == before_outside  # no time, file, folder or link changed out there
    assert _entries(results) == inside_before  # nothing made or removed in the repository either
    assert not (results / "ci/newdir").exists() and not (results / "ci/inside_link").is_symlink()
    assert _mtime(results / "ci/tables/sts.md") != sts_before  # the record's own file got its time
    assert sorted(warnings) == sorted([
        f"{results / 'ci/.csebench-times.json'}: 7 entries ignored (a path out of {results / 'ci'}, a link out of "
        f"{results}, or malformed); a record of build times only dates files already in its folder, it never creates any",
        f"{results / 'papers/is-cse/.table-1.csebench-times.json'}: 3 entries ignored (a path out of "
        f"{results / 'papers/is-cse'}, a link out of {results}, or malformed); " + ONLY_DATES,
        f"{results / 'runs/.csebench-times.json'}: a symbolic link, not a record: ignored; " + ONLY_DATES])
    written = record_times(results)  # the next record is csebench's own, written from the files on disk
    assert str(results / "runs/.csebench-times.json") in written and str(results / "ci/.csebench-times.json") in written
    assert not (results / "runs/.csebench-times.json").is_symlink()
    assert _snapshot(tmp_path / "outside") == before_outside
    assert "escape" not in json.loads((results / "ci/.csebench-times.json").read_text())["links"]  # a link out: not recorded
    again = []
    restore_times(results, warn=again.append)
    assert again == []
    assert times  # (the build's own times are checked by the tests above)


def test_a_malformed_record_is_one_warning_not_a_traceback(tmp_path):
    """`{"stamp": 1, "files": {"a": 5}}` stopped every Snakemake command with `TypeError: cannot unpack
    non-iterable int object`; a record that is not JSON, or lacks its parts, is ignored the same way."""
    results = tmp_path / "results"
    _build(results)
    record_times(results)
    bad = {"ci/.csebench-times.json": {"stamp": 1, "files": {"a": 5, "tables/sts.md": [2, 1]}},  # a time after its stamp
           "runs/.csebench-times.json": {"files": {"a": 5}},
           "papers/is-cse/.table-1.csebench-times.json": "not json {",
           ".README.csebench-times.json": {"stamp": 1, "files": {}, "links": [1]}}
    for rel, data in bad.items():
        _write_record(results / rel, data)
    warnings = []
    assert restore_times(results, warn=warnings.append) == []
    assert sorted(warnings) == sorted([
        f"{results / 'ci/.csebench-times.json'}: 2 entries ignored (a path out of {results / 'ci'}, a link out of "
        f"{results}, or malformed); " + ONLY_DATES,
        *(f"{results / rel}: not a record of build times (JSON: stamp, files, links): ignored; " + ONLY_DATES
          for rel in (".README.csebench-times.json", "papers/is-cse/.table-1.csebench-times.json", "runs/.csebench-times.json"))])
    assert sorted(record_times(results)) == sorted(str(results / rel) for rel in bad)  # rewritten: csebench's own again
    warnings.clear()
    restore_times(results, warn=warnings.append)
    assert warnings == []


def test_no_view_link_is_made_without_params_naming_it(tmp_path):
    """A view's model link that a checkout lost is made only from what params.yaml computes (view_model),
    never from the record's target, and only into a view folder the checkout brought."""
    built = tmp_path / "built" / "results"
    _build(built)
    record_times(built)
    clone = tmp_path / "clone" / "results"
    _checkout(built, clone, _all_files(built))
    restore_times(clone)  # no view_model: nothing to link to
    assert not (clone / "ci/runs/simcse/seed1/model").exists()
    restore_times(clone, view_model=lambda suite, run, seed: str(tmp_path / "built"))  # outside results: refused
    assert not (clone / "ci/runs/simcse/seed1/model").is_symlink()
    shutil.rmtree(clone / "ci/runs/simcse")
    restore_times(clone, view_model=_view_model(clone))  # the view's folder is gone: no folder is made for the link
    assert not (clone / "ci/runs/simcse").exists()


def test_a_views_model_link_target_comes_from_params_yaml():
    """Runs.view_model: the run store folder of the run the suite lists, from the run's identity; None
    for anything params.yaml does not list (a record names links, it never says where they go)."""
    from csebench.study.params import load_params
    from csebench.core.paths import key_dir
    from csebench.study.jobs import Runs
    from runhelpers import PARAMS

    runs = Runs(load_params(PARAMS))
    assert runs.view_model("ci", "simcse", 1) == f"{key_dir('results', runs.key('ci', 'simcse'), 1)}/model"
    for suite, run, seed in [("ci", "simcse", 99), ("ci", "nope", 1), ("nope", "simcse", 1), ("..", "..", 1),
                             ("ci", "../../../../etc", 1)]:
        assert runs.view_model(suite, run, seed) is None, (suite, run, seed)


def test_nothing_is_restored_while_another_snakemake_run_holds_its_lock(tmp_path, capsys):
    """The Snakefile's first step runs before Snakemake takes its own lock: a lock there is another
    build's, whose jobs read and write these trees, so the first step changes nothing then."""
    from csebench.workflow.steps import restore_times

    built = tmp_path / "built" / "results"
    _build(built)
    record_times(built)
    work = tmp_path / "clone"
    clone = work / "results"
    _checkout(built, clone, _all_files(built))
    locks = work / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text(f"{clone}/ci/tables/sts.md\n")
    before = _snapshot(clone)
    assert restore_times(str(clone), workdir=str(work)) is False
    assert _snapshot(clone) == before
    err = capsys.readouterr().err
    assert err == (f"csebench: another Snakemake run holds {locks}: the build times of 4 trees written anew (a DVC checkout "
                   "or a copy) are left for the next run after it\n")
    (locks / "0.output.lock").unlink()
    assert restore_times(str(clone), workdir=str(work)) is True
    assert _snapshot(clone) != before and "got their build times back" in capsys.readouterr().err
