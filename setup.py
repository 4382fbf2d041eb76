"""vpatch's package data: VERSIONS.lock and patches/ travel inside the
installed package (vpatch/_data), so that `pip install .` (non-editable)
gives a vpatch that finds them from any working directory, in an image too.
A checkout, and an editable install of it, read them where they are (see
scripts/vpatch/resources.py). Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # the checkout itself is the data
        data = Path(self.build_lib) / "vpatch" / "_data"
        shutil.rmtree(data, ignore_errors=True)
        shutil.copytree(HERE / "patches", data / "patches")
        shutil.copy2(HERE / "VERSIONS.lock", data / "VERSIONS.lock")


setup(cmdclass={"build_py": BuildPy})
