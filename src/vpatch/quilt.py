"""A series in quilt's format: the `series` file naming patch files in
order (one name a line, `#` comments), each patch a `git format-patch` mail
whose message carries DEP-3 fields. The module is named for the format, so
that a Series can be called `series` where it is used.

Names of a patch, one meaning each:
  name   the file name, `0001-deepseek-v2-fix-layer-0.patch`
  stem   the name without `.patch`, `0001-deepseek-v2-fix-layer-0`
         (what `vpatch matrix --format json` reports)
  slug   the stem without its number, `deepseek-v2-fix-layer-0`: the
         patch's identity across releases and renumbering (patches.toml's
         table names); `slug_of(subject)` makes it from a commit subject.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import date
from email.header import decode_header, make_header
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from .errors import ConfigError, PatchError, TreeError, UnsafePathError, disk_error
from .paths import safe_relpath, sweep, write_atomic

if TYPE_CHECKING:
    # unidiff is imported where a patch is parsed, not here: importing the
    # lock (which renders series) must work where vpatch's dependencies are
    # not installed (the tier's vLLM venvs import vpatch from src/)
    from unidiff.patch import PatchedFile, PatchSet

DEP3_FIELDS = ("Description", "Origin", "Forwarded", "Applied-Upstream", "Last-Update")
# Applied-Upstream is optional in DEP-3: a fix upstream still lacks has none.
REQUIRED_FIELDS = ("Description", "Origin", "Forwarded", "Last-Update")
_URL = r"https?://\S+"
_ORIGIN = re.compile(rf"^(upstream|backport|vendor|other)(,\s*({_URL}|commit:[0-9a-f]{{7,40}}))?$")
_FORWARDED = re.compile(rf"^(yes|no|not-needed|{_URL})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_FIELD = re.compile(r"^([A-Z][A-Za-z-]+): ?(.*)$")
_NUMBER = re.compile(r"^\d{4}-")


def slug(name: str) -> str:
    """A patch file name's slug: 0001-foo-bar.patch -> foo-bar."""
    return _NUMBER.sub("", name.removesuffix(".patch"))


def slug_of(subject: str, limit: int = 64) -> str:
    """The slug a commit subject gives its patch: lower case, runs of
    anything else than [a-z0-9] as one '-', at most `limit` characters."""
    k = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")
    return k[:limit].rstrip("-")


def file_name(number: int, subject: str) -> str:
    return f"{number:04d}-{slug_of(subject)}.patch"


@dataclass
class Patch:
    name: str
    path: Path
    author: str
    date: str
    subject: str
    body: str
    fields: dict[str, str]
    files: list[str]
    diff: PatchSet = field(repr=False)
    data: bytes = field(default=b"", repr=False)  # the file, as parse() read it

    @property
    def stem(self) -> str:
        return self.name.removesuffix(".patch")

    @property
    def slug(self) -> str:
        return slug(self.name)

    @property
    def message(self) -> str:
        return f"{self.subject}\n\n{self.body}".rstrip() + "\n"

    def changes(self) -> list[tuple[str, list[str], list[str]]]:
        """Per file: the removed and added lines, without context; what must stay
        the same when a patch is carried to another release."""
        out = []
        for f in self.diff:
            removed = [ln.value for h in f for ln in h if ln.is_removed]
            added = [ln.value for h in f for ln in h if ln.is_added]
            out.append((f.path, removed, added))
        return out


@dataclass
class Series:
    """Patches in order. `name` says whose: a release's (rendered from the
    patch set, patchset.py) or a folder's (`--series DIR`, load())."""

    patches: list[Patch]
    name: str = ""

    @property
    def files(self) -> list[str]:
        """Every file the series changes, in first-touched order."""
        seen: dict[str, None] = {}
        for p in self.patches:
            seen.update(dict.fromkeys(p.files))
        return list(seen)

    def files_out(self) -> dict[str, bytes]:
        """The series as plain files, {name: bytes}: each patch under its name
        and a `series` file listing them (what `git am`, `quilt` and
        `patch -p1` take; `vpatch series V --out DIR` writes it)."""
        out: dict[str, bytes] = {}
        try:
            for p in self.patches:
                out[p.name] = p.data or p.path.read_bytes()
        except OSError as e:
            raise disk_error(e, "cannot read a patch") from None
        out["series"] = "".join(f"{p.name}\n" for p in self.patches).encode()
        return out

    def content_hash(self) -> str:
        """sha256 of the series as plain files (files_out): what a wheel's local
        version and an install's receipt name."""
        files = self.files_out()
        h = hashlib.sha256(files.pop("series"))
        for data in files.values():
            h.update(data)
        return h.hexdigest()


def read_names(series_file: Path) -> list[str]:
    """The patch names a series file lists, in order."""
    try:
        text = series_file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PatchError(f"{series_file} is not UTF-8 text") from None
    except OSError as e:
        raise disk_error(e, "cannot read the series") from None
    names = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line.split()[0])  # quilt allows options after the name
    return names


def load(directory: Path) -> Series:
    """The series in `directory` (a `series` file and its patches). A folder
    that is not there, or holds no `series` file, is bad input (ConfigError:
    `--series DIR` names the wrong folder); a series that names a missing or
    bad patch is a PatchError."""
    directory = Path(directory)
    series_file = directory / "series"
    if not directory.is_dir():
        raise ConfigError(f"{directory}: no such folder (a series folder holds a `series` file)")
    if not series_file.is_file():
        raise ConfigError(f"{directory} has no series file")
    patches = []
    for name in read_names(series_file):
        try:
            safe_relpath(name, f"{series_file}")
        except UnsafePathError as e:
            raise PatchError(str(e)) from None
        path = directory / name
        if not path.is_file():
            raise PatchError(f"{series_file} names {name}, but {path} does not exist")
        patches.append(parse(path))
    return Series(patches, directory.name)


def parse(path: Path, name: str | None = None) -> Patch:
    """The patch in `path`; `name` is what a series calls it (default: the
    file's name)."""
    called = name or path.name
    shown = path.name if name is None else f"{path.parent.name}/{path.name}"
    data, text = _read(path, shown)
    if "\0" in text:
        raise PatchError(f"malformed patch {shown}: binary content")
    headers, body, diff_text = _split_mail(text, shown)
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    try:
        diff = PatchSet(diff_text)
    except UnidiffParseError as e:
        raise PatchError(f"malformed patch {shown}: {e}") from None
    if not len(diff):
        raise PatchError(f"malformed patch {shown}: it changes no file")
    files = []
    for f in diff:
        for side in {f.source_file, f.target_file} - {"/dev/null"}:
            if side.startswith(("a/", "b/")):
                side = side[2:]
            else:
                raise PatchError(f"malformed patch {shown}: {side!r} lacks the a/ b/ prefix")
            safe_relpath(side, f"patch {shown}")
        if _is_symlink(f):
            raise UnsafePathError(f"patch {shown}: {f.path} is a symlink; refused")
        files.append(f.path)
    return Patch(
        name=called,
        path=path,
        author=headers.get("From", ""),
        date=headers.get("Date", ""),
        subject=headers.get("Subject", ""),
        body=body,
        fields=dep3(body),
        files=files,
        diff=diff,
        data=data,
    )


def fields_of(path: Path) -> dict[str, str]:
    """The DEP-3 fields of the patch in `path`, its diff left unread (no
    unidiff: the tier's venvs read them too)."""
    return dep3(_split_mail(_read(path, path.name)[1], path.name)[1])


def _read(path: Path, shown: str) -> tuple[bytes, str]:
    """The patch file's bytes and text; `shown` names it in the errors."""
    try:
        data = path.read_bytes()
        return data, data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PatchError(f"malformed patch {shown}: not UTF-8 (byte {e.start})") from None
    except OSError as e:
        raise disk_error(e, "cannot read a patch") from None


def _is_symlink(f: PatchedFile) -> bool:
    return any(
        re.match(r"^(new file mode|new mode|index \S+) 120000", line)
        for line in str(f).splitlines()[:6]
    )


def _split_mail(text: str, shown: str) -> tuple[dict[str, str], str, str]:
    lines = text.splitlines(keepends=True)
    if not lines or not lines[0].startswith("From "):
        raise PatchError(f"malformed patch {shown}: not a git format-patch mail")
    headers: dict[str, str] = {}
    i = 1
    name = None
    while i < len(lines) and lines[i].strip():
        line = lines[i]
        if line[0] in " \t" and name:
            headers[name] += " " + line.strip()
        elif ":" in line:
            name, value = line.split(":", 1)
            headers[name] = value.strip()
        i += 1
    for k, v in headers.items():
        headers[k] = str(make_header(decode_header(v)))
    start = next((j for j in range(i, len(lines)) if lines[j].startswith("diff --git ")), None)
    if start is None:
        raise PatchError(f"malformed patch {shown}: no 'diff --git' section")
    msg = "".join(lines[i:start])
    body = msg.split("\n---\n", 1)[0].strip("\n")
    return headers, body + "\n", "".join(lines[start:])


def dep3(body: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    name = None
    for line in body.splitlines():
        m = _FIELD.match(line)
        if m and m.group(1) in DEP3_FIELDS:
            name = m.group(1)
            fields[name] = m.group(2).strip()
        elif name and line.startswith(" "):
            fields[name] += "\n" + line.strip()
        else:
            name = None
    return fields


def applied(value: str) -> tuple[list[str], list[str]]:
    """Applied-Upstream's parts: (releases, URLs); DEP-3 allows "version, URL"."""
    parts = [x.strip() for x in value.split(",") if x.strip()]
    urls = [x for x in parts if re.fullmatch(_URL, x)]
    return [x for x in parts if x not in urls], urls


def dep3_problems(fields: dict[str, str]) -> list[str]:
    """What is wrong with a patch's DEP-3 fields: a required one missing, or
    one that is not of its form (`vpatch lint` reports them)."""
    out = [f"DEP-3 field {n} is missing or empty" for n in REQUIRED_FIELDS if not fields.get(n)]
    if fields.get("Origin") and not _ORIGIN.match(fields["Origin"]):
        out.append(f"Origin {fields['Origin']!r}: use upstream|backport|vendor|other[, URL]")
    if fields.get("Forwarded") and not _FORWARDED.match(fields["Forwarded"]):
        out.append(f"Forwarded {fields['Forwarded']!r}: use yes|no|not-needed|URL")
    if "Applied-Upstream" in fields:
        releases, urls = applied(fields["Applied-Upstream"])
        if not (releases or urls) or not all(_is_version(r) for r in releases):
            out.append(f"Applied-Upstream {fields['Applied-Upstream']!r}: use a version or URL")
    updated = fields.get("Last-Update", "")
    if updated and not _is_date(updated):
        out.append(f"Last-Update {updated!r} is not a date (YYYY-MM-DD)")
    return out


def _is_version(value: str) -> bool:
    try:
        Version(value)
    except InvalidVersion:
        return False
    return True


def _is_date(value: str) -> bool:
    if not _DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


MANIFEST = ".vpatch-series"  # in a folder write() filled: "<sha256> <name>" per file


def write(into: Path, files: dict[str, bytes]) -> tuple[list[str], list[str]]:
    """Make folder `into` hold exactly `files` ({name: bytes}: patches and
    `series`): write what differs (temporary name, then rename), remove
    .patch files not named. Returns (written, removed).

    `into` must be new, empty, or a folder this wrote, its files as it
    wrote them (MANIFEST records their sha256s): a file of anyone else's,
    or one of ours edited since, is never overwritten or removed (TreeError,
    nothing changed). The manifest lists the new files before any is
    written, so a run killed half way leaves a folder that is still ours."""
    written, removed = [], []
    try:
        into.mkdir(parents=True, exist_ok=True)
        sweep(into)
        ours = _ours(into)
        new = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
        _manifest(into, [*((h, n) for n, hs in ours.items() for h in hs), *_pairs(new)])
        for name, data in files.items():
            path = into / name
            if not path.is_file() or path.read_bytes() != data:
                write_atomic(path, data)
                written.append(name)
        for stale in sorted(into.glob("*.patch")):
            if stale.name not in files:
                stale.unlink()
                removed.append(stale.name)
        _manifest(into, _pairs(new))
    except OSError as e:
        raise disk_error(e, f"cannot write the series in {into}") from None
    return written, removed


def _pairs(hashes: dict[str, str]) -> list[tuple[str, str]]:
    return [(h, n) for n, h in hashes.items()]


def _manifest(into: Path, pairs: list[tuple[str, str]]) -> None:
    write_atomic(into / MANIFEST, "".join(f"{h} {n}\n" for h, n in sorted(set(pairs))).encode())


def _ours(into: Path) -> dict[str, set[str]]:
    """{name: sha256s} of the files write() put in `into`, each still as
    written; TreeError naming the first entry that is not."""
    try:
        lines = (into / MANIFEST).read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        lines = []
    known: dict[str, set[str]] = {}
    for line in lines:
        h, _, name = line.partition(" ")
        known.setdefault(name, set()).add(h)
    for p in sorted(into.iterdir()):
        if p.name == MANIFEST:
            continue
        mine = p.is_file() and not p.is_symlink() and p.name in known
        if not mine or hashlib.sha256(p.read_bytes()).hexdigest() not in known[p.name]:
            raise TreeError(
                f"{into} holds other files than a series vpatch wrote ({p.name}); "
                "pick a new or empty folder"
            )
    return known
