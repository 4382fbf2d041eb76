"""A tiny fake vLLM, pip-installed into a fresh venv so that RECORD,
INSTALLER and the .pyc are real, and a series that patches it (made with
git by support.make_series). Shared by test_install, test_check and the
env/ module tests.

`make_env(where)` gives a ready environment (copied from one made per
session: pip runs once); `Fake.run(...)` runs the CLI in a child process
(support.cli.vpatch) against a fake VERSIONS.lock and patches.toml
(`root_env`: their folder as VPATCH_ROOT), so a child can be killed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from vpatch import lock, quilt

from support import copy_rules, make_series, make_wheel, minor_after, named_series, publish
from support.cli import vpatch
from support.releases import first_where, last_where, newest_patched, v1_gone, v2_by_default

RELEASE = "9.9.0"
UPSTREAM = "10.0.0"  # has everything upstream: no series

FILLER = "".join(f"# line {i}\n" for i in range(1, 31))
OLD_MODEL = "def behaviour():\n    return 'old'\n" + FILLER
NEW_MODEL = "NEW = 'new'\n\n\ndef behaviour():\n    return NEW\n" + FILLER
OLD_CONFIG = "allow = ['llama']\n"
NEW_CONFIG = "allow = ['llama', 'deepseek']\n"

BASE = {
    "vllm/__init__.py": "",
    "vllm/model.py": OLD_MODEL,
    "vllm/config.py": OLD_CONFIG,
    "vllm/sub/__init__.py": "",
    "vllm/sub/layer.py": "X = 1\n",
    "README.md": "tiny\n",
}
PATCHED = {"vllm/model.py": NEW_MODEL, "vllm/config.py": NEW_CONFIG}
# what show() prints of the fake vLLM, unpatched and patched
OLD = "old ['llama']"
NEW = "new ['llama', 'deepseek']"

PROBES = """
["step-1"]
probe = [{ file = "vllm/model.py", function = "behaviour", uses = "NEW" }]

["step-2"]
probe = [{ file = "vllm/config.py", list = "allow", includes = ["deepseek"] }]
"""

SHOW = "import vllm.model, vllm.config; print(vllm.model.behaviour(), vllm.config.allow)"


def make_fake_series(tmp: Path) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return make_series(
        tmp,
        BASE,
        [
            ("model: new behaviour", {"vllm/model.py": NEW_MODEL}),
            ("config: allow deepseek", {"vllm/config.py": NEW_CONFIG, "README.md": "tiny!\n"}),
        ],
    )


def write_lock(where: Path, series_dir: Path) -> Path:
    path = where / "VERSIONS.lock"
    path.write_text(
        f'[releases."9.8.0"]\ntag = "v9.8.0"\ncommit = "aaa"\nstatus = "patched"\n\n'
        f'[releases."{RELEASE}"]\ntag = "v{RELEASE}"\ncommit = "bbb"\nstatus = "patched"\n\n'
        f'[releases."{UPSTREAM}"]\ntag = "v{UPSTREAM}"\ncommit = "ccc"\nstatus = "upstream"\n'
    )
    copy_rules(where)  # what Lock.standing reads beside the lock
    return path


def write_probes(where: Path, series_dir: Path) -> Path:
    """patches/ beside the fake VERSIONS.lock, the fake release's series in it
    and the probes: VPATCH_ROOT=where makes them vpatch's data."""
    path = where / "patches" / "patches.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PROBES)
    return publish(where, RELEASE, series_dir)


def pip(*args: str, python: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    if python is not None:
        cmd += ["--python", str(python)]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, env={**os.environ, "PIP_NO_INDEX": "1"}
    )


def build_env(
    where: Path,
    version: str = RELEASE,
    project: str = "vllm",
    files: dict[str, str] | None = None,
    compile: bool = True,
) -> Path:
    """A fresh venv (no pip in it) with the fake vLLM pip-installed; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    wheels = where.parent / f"{where.name}-wheel"
    wheels.mkdir()
    src = {k: v.encode() for k, v in (files or BASE).items() if k.startswith("vllm/")}
    whl = make_wheel(wheels, project=project, version=version, files=src, tag="py3-none-any")
    py = where / "bin" / "python"
    r = pip("install", "--no-deps", *([] if compile else ["--no-compile"]), str(whl), python=py)
    assert r.returncode == 0, r.stderr
    shutil.rmtree(wheels)
    return py


def site_packages(py: Path) -> Path:
    return next((py.parent.parent / "lib").glob("python3*/site-packages"))


def dist_info(py: Path) -> Path:
    return next(site_packages(py).glob("*.dist-info"))


def snapshot(py: Path) -> dict[str, bytes]:
    """Every file of the environment's site-packages: {relative path: bytes}."""
    root = site_packages(py)
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def exact(py: Path) -> dict[str, tuple]:
    """Every file of site-packages with its bytes, mode and mtime, and every
    folder with its mode: what "exactly as it was" compares (a timestamp
    .pyc checks its source's mtime)."""
    root = site_packages(py)
    out: dict[str, tuple] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        rel = p.relative_to(root).as_posix()
        if p.is_dir() and not p.is_symlink():
            out[rel + "/"] = (st.st_mode & 0o7777,)
        elif p.is_file() and not p.is_symlink():
            out[rel] = (p.read_bytes(), st.st_mode & 0o7777, st.st_mtime_ns)
    return out


def digest(snap: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for k, v in sorted(snap.items()):
        h.update(k.encode() + b"\0" + hashlib.sha256(v).digest())
    return h.hexdigest()


def show(py: Path) -> str:
    """What the installed fake vLLM does, from a fresh interpreter."""
    r = subprocess.run([str(py), "-c", SHOW], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def root_env(lock_path: Path) -> dict[str, str]:
    """The environment in which vpatch reads ``lock_path`` (support.cli.vpatch's
    ``env``): its folder as VPATCH_ROOT."""
    return {"VPATCH_ROOT": str(lock_path.parent)}


# -- fixtures ----------------------------------------------------------------------


class Fake:
    """One fake environment and the lock and probes that know its release."""

    def __init__(self, py: Path, series_dir: Path, lock_path: Path, probes_path: Path):
        self.py = py
        self.series_dir = series_dir
        self.lock_path = lock_path
        self.probes_path = probes_path

    @property
    def root(self) -> Path:
        return site_packages(self.py)

    @property
    def dist_info(self) -> Path:
        return dist_info(self.py)

    def run(self, *args: str, env: dict | None = None, timeout=120) -> subprocess.CompletedProcess:
        """`vpatch ARGS --python PY` in a child process."""
        env = {**root_env(self.lock_path), **(env or {})}
        return vpatch(*args, "--python", str(self.py), env=env, timeout=timeout)

    def pins(self):
        return lock.load(self.lock_path)

    def checks(self):
        from vpatch import probes

        return probes.load(self.probes_path)


@pytest.fixture(scope="session")
def fake_release(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(series folder, VERSIONS.lock, patches.toml) of the fake release."""
    where = tmp_path_factory.mktemp("fake-release")
    series_dir = make_fake_series(where / "work")
    return series_dir, write_lock(where, series_dir), write_probes(where, series_dir)


@pytest.fixture(scope="session")
def fake_template(tmp_path_factory) -> Path:
    """The fake vLLM pip-installed (bytecode compiled by pip) into a venv."""
    return build_env(tmp_path_factory.mktemp("fake-template") / "venv")


def copy_env(template: Path, dest: Path) -> Path:
    """A copy of a fake venv (venvs find their prefix from where they are)."""
    shutil.copytree(template.parent.parent, dest, symlinks=True)
    return dest / "bin" / "python"


@pytest.fixture
def fake(fake_release, fake_template, tmp_path) -> Fake:
    return Fake(copy_env(fake_template, tmp_path / "venv"), *fake_release)


def make_fake(fake_release, where: Path, **kw) -> Fake:
    """A fake environment built afresh (another version, project, files or
    bytecode than the template's)."""
    return Fake(build_env(where, **kw), *fake_release)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    """The run failed the documented way: one line, no traceback."""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vpatch: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


# -- real release names over a patch set shaped like the real one -----------------

# Three patches, as the real set has them: the EAGLE-3 change (the patched
# release's series, upstream from the first release with EAGLE-3 upstream), a
# fix two series carry (the patched release's and the upstream-fix one's,
# upstream where the drafter's positions stop being short; doctor's
# draft_positions) and one upstream takes only after every release LIKE pins
# (the upstream-fix one's; doctor's layer0). Each release's fake vLLM has what
# upstream has by then. The releases are real ones of each kind, asked of the
# data (support.releases), so that doctor's rules apply to them.
LIKE = (
    newest_patched(),  # patched: the series carries EAGLE-3
    last_where(lambda r: r.upstream_eagle3 and r.draft_positions_short),  # upstream-fix
    last_where(v2_by_default),  # upstream, no series
)
LIKE_SINCE = (  # each change's Applied-Upstream
    first_where(lambda r: r.upstream_eagle3),
    first_where(lambda r: not r.draft_positions_short),
    minor_after(LIKE[-1]),
)
LIKE_BASE = {
    "vllm/__init__.py": "",
    "vllm/config.py": "allow = ['llama']\n" + FILLER,
    "vllm/spec.py": "def positions():\n    return 'short'\n" + FILLER,
    "vllm/layer.py": "def layer0():\n    return 'crash'\n" + FILLER,
}
LIKE_CHANGES = {
    "config: allow eagle3 for deepseek": {
        "vllm/config.py": "allow = ['llama', 'deepseek']\n" + FILLER
    },
    "spec: draft positions cover max model len": {
        "vllm/spec.py": "LONG = 'long'\n\n\ndef positions():\n    return LONG\n" + FILLER
    },
    "layer: fix aux state at layer 0": {
        "vllm/layer.py": "COPY = 'copy'\n\n\ndef layer0():\n    return COPY\n" + FILLER
    },
}
LIKE_TABLES = {  # each patch's keys in patches.toml besides its spans
    "config-allow-eagle3-for-deepseek": (
        'probe = [{ file = "vllm/config.py", list = "allow", includes = ["deepseek"] }]'
    ),
    "spec-draft-positions-cover-max-model-len": 'doctor = "draft_positions"\n'
    'probe = [{ file = "vllm/spec.py", function = "positions", uses = "LONG" }]',
    "layer-fix-aux-state-at-layer-0": 'doctor = "layer0"\n'
    'probe = [{ file = "vllm/layer.py", function = "layer0", uses = "COPY" }]',
}


def like_files(release: str) -> dict[str, str]:
    """The fake vLLM files of one of LIKE: what upstream has by then."""
    subjects = list(LIKE_CHANGES)
    upstream = dict(zip(LIKE, ([], subjects[:1], subjects[:2]), strict=True))[release]
    files = dict(LIKE_BASE)
    for s in upstream:
        files.update(LIKE_CHANGES[s])
    return files


def releases_like(where: Path) -> Path:
    """A vpatch data root (VERSIONS.lock, rules.toml, patches/) pinning LIKE,
    whose names are real releases' so doctor's rules (rules.toml, copied)
    apply: LIKE[0] `patched` with the EAGLE-3 change and the draft-positions
    fix, LIKE[1] `upstream-fix` with that fix and the layer-0 one, LIKE[2]
    `upstream` without a series. Each patch's DEP-3 Applied-Upstream as
    above (LIKE_SINCE). Returns its VERSIONS.lock."""
    subjects = list(LIKE_CHANGES)
    patched, fix, upstream = LIKE
    return _data_root(
        where,
        LIKE_CHANGES,
        {patched: subjects[:2], fix: subjects[1:]},
        like_files,
        dict(zip(subjects, LIKE_SINCE, strict=True)),
        LIKE_TABLES,
        {patched: "patched", fix: "upstream-fix", upstream: "upstream"},
    )


def _data_root(
    where: Path,
    changes: dict[str, dict[str, str]],
    series: dict[str, list[str]],
    files_of: Callable[[str], dict[str, str]],
    since: dict[str, str],
    tables: dict[str, str],
    status: dict[str, str],
) -> Path:
    """A vpatch data root: each release's series of `changes` made over
    files_of(release) and published, each patch's DEP-3 Applied-Upstream
    `since[subject]`, `tables` added to patches.toml under each slug, the
    real rules.toml copied, and a VERSIONS.lock of `status` (in its order).
    Returns the VERSIONS.lock."""
    for release, steps in series.items():
        names = [f"{i:04d}-{quilt.slug_of(s)}.patch" for i, s in enumerate(steps, 1)]
        made = named_series(
            where / f"work-{release}",
            where / f"series-{release}",
            files_of(release),
            [(s, changes[s]) for s in steps],
            names,
        )
        for name, s in zip(names, steps, strict=True):
            f = made / name
            f.write_text(
                re.sub(
                    r"(?m)^Applied-Upstream: .*$", f"Applied-Upstream: {since[s]}", f.read_text()
                )
            )
        publish(where, release, made)
    toml = where / "patches" / "patches.toml"
    text = toml.read_text()
    for slug, keys in tables.items():
        head = f'["{slug}"]\n'
        text = text.replace(head, head + keys + "\n")
    toml.write_text(text)
    path = where / "VERSIONS.lock"
    path.write_text(
        "".join(
            f'[releases."{v}"]\ntag = "v{v}"\ncommit = "c{i}"\nstatus = "{st}"\n\n'
            for i, (v, st) in enumerate(status.items())
        )
    )
    copy_rules(where)
    return path


@pytest.fixture(scope="session")
def like_envs(tmp_path_factory) -> tuple[Path, dict[tuple[str, bool], Path]]:
    """(VERSIONS.lock of releases_like, {(release, patched): python}): each
    of LIKE's fake vLLM in a venv of its own as released, and each release
    with a series once more with it installed by `vpatch install`."""
    where = tmp_path_factory.mktemp("like")
    (where / "root").mkdir()
    lock_path = releases_like(where / "root")
    envs = {}
    for release in LIKE:
        for patched in (False, True) if release != LIKE[-1] else (False,):
            name = f"{release}-{'patched' if patched else 'released'}"
            py = build_env(where / name, version=release, files=like_files(release))
            if patched:
                r = vpatch("install", "--python", str(py), env=root_env(lock_path), timeout=120)
                assert r.returncode == 0, r.stderr
            envs[release, patched] = py
    return lock_path, envs


# -- a release whose upstream removed the code a patch changes (no V1 runner) ------

# The release that removed the V1 model runner removed its proposers too
# (vllm/v1/spec_decode/ kept only __init__.py, metrics.py and dynamic/): the
# patches of the EAGLE-3 series that change the V1 proposer are in no series of
# it, and their probes cannot hold there. Here, in small: the patched release
# carries the EAGLE-3 change and a V1-proposer fix (upstream from where the V1
# runner stops crashing on a forced backend); the release without the V1
# runner, `upstream-fix`, carries the layer-0 fix, has the EAGLE-3 change
# upstream, and its vllm/v1/ holds other files but no proposer (the probe's
# anchor, class Proposer, is absent though its file glob still matches).
GONE = (newest_patched(), first_where(v1_gone))
PROPOSER = "class Proposer:\n    def load(self):\n        return 'target backend'\n" + FILLER
GONE_BASE = {
    "vllm/__init__.py": "",
    "vllm/config.py": "allow = ['llama']\n" + FILLER,
    "vllm/v1/__init__.py": "",
    "vllm/v1/proposer.py": PROPOSER,
    "vllm/layer.py": "def layer0():\n    return 'crash'\n" + FILLER,
}
GONE_CHANGES = {
    "config: allow eagle3 for deepseek": LIKE_CHANGES["config: allow eagle3 for deepseek"],
    "v1: the drafter selects its own backend": {
        "vllm/v1/proposer.py": PROPOSER.replace("'target backend'", "OWN").replace(
            "class Proposer:", "OWN = 'own'\n\n\nclass Proposer:"
        )
    },
    "layer: fix aux state at layer 0": LIKE_CHANGES["layer: fix aux state at layer 0"],
}
GONE_V1 = "v1-the-drafter-selects-its-own-backend"
GONE_TABLES = {
    "config-allow-eagle3-for-deepseek": LIKE_TABLES["config-allow-eagle3-for-deepseek"],
    GONE_V1: 'doctor = "forced_backend_v1"\n'
    'probe = [{ file = "vllm/v1/*.py", class = "Proposer", uses = "OWN" }]',
    "layer-fix-aux-state-at-layer-0": LIKE_TABLES["layer-fix-aux-state-at-layer-0"],
}


def gone_files(release: str) -> dict[str, str]:
    """The fake vLLM files of one of GONE: the later has the EAGLE-3 change
    upstream, the V1 proposer removed, another vllm/v1/ file kept."""
    files = dict(GONE_BASE)
    if release == GONE[-1]:
        files.update(GONE_CHANGES["config: allow eagle3 for deepseek"])
        del files["vllm/v1/proposer.py"]
        files["vllm/v1/metrics.py"] = "def count():\n    return 0\n"
    return files


def releases_gone(where: Path, decided: bool = True) -> Path:
    """A vpatch data root pinning GONE (see above); `decided`: patches.toml
    says the V1 fix is gone from GONE[-1] (`gone = "X.Y.Z"`, the decision a
    maintainer records from the release's source), else it says nothing.
    Returns its VERSIONS.lock."""
    subjects = list(GONE_CHANGES)
    patched, gone = GONE
    tables = {
        slug: (f'gone = "{gone}"\n' + keys if slug == GONE_V1 and decided else keys)
        for slug, keys in GONE_TABLES.items()
    }
    since = (
        LIKE_SINCE[0],
        first_where(lambda r: "v1" not in r.forced_backend_crash),
        # the layer-0 fix: upstream only after every release GONE pins
        minor_after(gone),
    )
    return _data_root(
        where,
        GONE_CHANGES,
        {patched: subjects[:2], gone: subjects[2:]},
        gone_files,
        dict(zip(subjects, since, strict=True)),
        tables,
        {patched: "patched", gone: "upstream-fix"},
    )
