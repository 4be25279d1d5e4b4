"""The build's one step beyond pyproject.toml: a wheel carries params.yaml as csebench/resources/params.yaml, the
backbone names and paths the Python API reads where csebench is not installed from a checkout (docs/api.md).
params.yaml stays the one source: the copy is made from it when the wheel is built; an editable install reads the
checkout's own."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithParams(build_py):
    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False) and Path("params.yaml").is_file():
            self.copy_file("params.yaml", str(Path(self.build_lib) / "csebench" / "resources" / "params.yaml"))


setup(cmdclass={"build_py": BuildWithParams})
