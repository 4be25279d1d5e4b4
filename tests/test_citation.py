"""The repository's licence and citation file: LICENSE holds the licence pyproject.toml declares, CITATION.cff
(Citation File Format 1.2.0) parses and names the package's own title and version."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_citation_cff_parses_and_names_the_packages_title_and_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    # CFF 1.2.0's required keys; the version is a string (YAML would read 0.1 as a number)
    assert {"cff-version", "message", "title", "authors"} <= set(cff) and all(a.get("name") for a in cff["authors"])
    for entry in (cff, cff["preferred-citation"]):
        assert entry["title"].split(":")[0] == PROJECT["name"], entry["title"]
        assert str(entry["version"]) == PROJECT["version"] and isinstance(entry["version"], str)
    assert cff["license"] == PROJECT["license"]


def test_license_file_is_the_declared_licence():
    assert PROJECT["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n") and "csebench contributors" in text
    assert "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND" in text


def test_the_readme_s_bibtex_and_the_citation_file_name_the_same_authors_title_and_version():
    """The README's @software entry is CITATION.cff's preferred citation: its authors (as LICENSE and pyproject.toml
    name them, one corporate name in double braces), title, year and version."""
    import re

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))["preferred-citation"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    entry = dict(re.findall(r"^\s+(\w+)\s*=\s*\{(.*)\},?$", readme.split("@software{csebench,")[1].split("\n}")[0], re.M))
    authors = [a["name"] for a in cff["authors"]]
    assert entry["author"] == "{" + " and ".join(authors) + "}" and authors == [a["name"] for a in PROJECT["authors"]]
    assert (entry["title"], entry["year"], entry["version"]) == (cff["title"], str(cff["year"]), cff["version"])
    assert "csebench contributors" in (ROOT / "LICENSE").read_text(encoding="utf-8")
