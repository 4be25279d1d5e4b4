"""csebench.stamps: a tree written anew by a DVC checkout or a copy gets its build's modification
times back, so Snakemake plans nothing for it; a tree as built, or edited by hand, is left alone."""

import json
import os
import shutil
from pathlib import Path

from csebench.paths import times_record
from csebench.stamps import record_times, restore_times

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
    for rel in ("ci/runs/simcse/seed1/train.json", "ci/runs/simcse/seed1/model"):
        os.utime(results / rel, ns=(times.get(rel, t + 4 * SEC),) * 2, follow_symlinks=False)
    return times


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
    restored = dict(restore_times(clone))
    assert set(restored) == {str(clone / "ci"), str(clone / "runs"), f"{clone}/papers/is-cse/table-1.*", f"{clone}/README.*"}
    offsets = {_mtime(clone / rel) - t for rel, t in times.items()}
    assert len(offsets) == 1  # one shift for every file and link of every tree: the build's order
    assert (clone / "ci/runs/simcse/seed1/model").is_symlink()  # the view's link to the model, made again
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
