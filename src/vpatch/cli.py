"""The `vpatch` command: argparse, one small function per subcommand that
parses, calls one command and prints. Errors are caught once, in main():
one line `vpatch: error: ...` and the error's exit code (errors.py).

Each cmd_* imports its command module when it runs (as pip loads its
commands): `vpatch install` in an image should not pay for the wheel code,
the matrix or GitPython."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import gitutil, lock
from .errors import ConfigError, PatchError, VpatchError, WheelError, disk_error

if TYPE_CHECKING:
    from .commands.docs import Block

INTERNAL = 70  # EX_SOFTWARE: a bug in vpatch
INTERRUPTED = 130  # 128 + SIGINT, as shells report it
BROKEN_PIPE = 141  # 128 + SIGPIPE: stdout closed early, as `yes | head -1` ends yes


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source",
        default="auto",
        metavar="SOURCE",
        help=f"where the release's source comes from: {'|'.join(lock.SOURCES)} or a folder "
        "(default: auto = sdist, else the wheel)",
    )
    p.add_argument(
        "--remote", metavar="URL", help=f"git remote for --source git (default {lock.VLLM_REMOTE})"
    )
    p.add_argument("--offline", action="store_true", help="use the cache only")


# -- fetch / apply / status / unapply ----------------------------------------


def cmd_fetch(args: argparse.Namespace) -> int:
    from .commands import apply

    release, where, what = apply.fetch(
        args.version, args.source, _path(args.dest), args.offline, args.remote, say
    )
    print(f"vLLM {release.version} from {what} -> {where}" if args.dest else where)
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from .commands import apply

    result = apply.apply(
        args.version,
        dest=_path(args.dest),
        source=args.source,
        series_dir=_path(args.series),
        offline=args.offline,
        remote=args.remote,
        say=say,
    )
    if not result.applied and result.already:
        print(f"{result.dest}: already patched ({len(result.already)} patches); nothing to do")
    else:
        print(f"{result.dest}: vLLM {result.version}, applied {len(result.applied)} patches")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .commands import apply

    st = apply.status(_path(args.dest), _path(args.series))
    print(f"{st.dest}: vLLM {st.version}")
    for p in st.patches:
        print(f"  {'applied' if p.applied else 'not applied':11}  {p.name}")
    for e in st.extra:
        print(f"  {'unknown':11}  {e}")
    if st.dirty:
        print(f"  uncommitted changes in {len(st.dirty)} paths")
    return 0


def cmd_unapply(args: argparse.Namespace) -> int:
    from .commands import apply

    version, n = apply.unapply(Path(args.dest), _path(args.series), args.discard_commits)
    print(f"{args.dest}: back to the vLLM {version} baseline ({n} commit{'s' * (n != 1)} removed)")
    return 0


# -- lock --------------------------------------------------------------------


def cmd_lock(args: argparse.Namespace) -> int:
    from .sources.refresh import refresh

    pins = lock.load()
    if args.refresh:
        pins = refresh(pins, say)
        lock.save(pins)
        print(f"{pins.path.name}: {len(pins.releases)} releases refreshed")
        return 0
    default = pins.default().version
    for v in pins.versions():
        r = pins.releases[v]
        mark = "  (default)" if v == default else ""
        print(f"{v:8} {r.status:12} {r.tag:9} {r.commit:10} {', '.join(r.artifacts)}{mark}")
    return 0


# -- matrix / port / export / lint / pr ----------------------------------------


def cmd_matrix(args: argparse.Namespace) -> int:
    from .commands import matrix

    m = matrix.build(args.versions, offline=args.offline, jobs=args.jobs, say=say)
    if args.format == "json":
        print(json.dumps(m.to_json(), indent=2))
    else:
        print(m.to_markdown(), end="")
    return 0


def cmd_port(args: argparse.Namespace) -> int:
    from .commands import port

    work, into = _path(args.work), _path(args.into)
    if args.resume:
        r = port.resume(args.from_version, args.to_version, work=work, into=into, keep=args.keep)
    else:
        r = port.port(
            args.from_version,
            args.to_version,
            work=work,
            into=into,
            keep=args.keep,
            from_source=args.source,
            to_source=args.source,
            offline=args.offline,
            say=say,
        )
    for name, status in r.status.items():
        print(f"  {status:8}  {name}")
    for slug, what in r.variants.items():
        print(f"  {what:9}  {slug}")
    if r.conflict:
        again = "".join(f" --{k} {v}" for k in ("work", "into") if (v := getattr(args, k)))
        raise PatchError(
            f"{r.conflict} conflicts with vLLM {r.to_version} in {', '.join(r.unresolved)}; "
            f"resolve it in {r.work}, `git add` it, `git am --continue`, then run "
            f"`vpatch port {r.from_version} {r.to_version}{again} --continue`"
        )
    print(f"{r.into}: {len(r.names)} patches for vLLM {r.to_version}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .commands import export

    done = export.export(Path(args.dir), _path(args.into))
    for slug, what in done.variants.items():
        print(f"  {what:9}  {slug}")
    print(
        f"{done.dir}: {len(done.names)} patches for vLLM {done.version} "
        f"({len(done.written)} files written, {len(done.removed)} removed)"
    )
    return 0


def cmd_series(args: argparse.Namespace) -> int:
    from .commands import export

    done = export.render(args.version, Path(args.out))
    print(f"{done.dir}: {len(done.names)} patches for vLLM {done.version} (series)")
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    from .commands import lint

    result = lint.lint(offline=args.offline, say=say)
    for note in result.skipped:
        say(f"skipped: {note}")
    for problem in result.problems:
        print(problem)
    if result.problems:
        raise PatchError(f"lint found {len(result.problems)} problems (listed above)")
    print("lint: every series is consistent and up to date")
    return 0


def generated_here() -> tuple[Block, ...]:
    """The generated parts of the docs only the CLI can make: the README's
    command list, from the parser (`vpatch docs` writes them with the rest)."""
    from .commands.docs import Block

    return (Block("README.md", "commands", f"```\n{synopsis()}```"),)


def cmd_docs(args: argparse.Namespace) -> int:
    from .commands import docs

    extra = generated_here()
    if args.check:
        stale = docs.stale(extra=extra)
        for part in stale:
            print(f"stale: {part}")
        if stale:
            raise PatchError(f"{len(stale)} generated parts of the docs are stale: run `make docs`")
        print("docs: every generated part is up to date")
        return 0
    written = docs.write(extra=extra)
    print("\n".join(f"wrote {p}" for p in written) or "docs: every generated part is up to date")
    return 0


def cmd_pr(args: argparse.Namespace) -> int:
    from .commands import pr

    out, signoff, results = _path(args.out), args.signoff, _path(args.results)
    if args.resume:
        d = pr.resume(
            args.onto, out=out, signoff=signoff, offline=args.offline, results=results, say=say
        )
    else:
        d = pr.draft(
            args.onto,
            out=out,
            signoff=signoff,
            source=args.source,
            offline=args.offline,
            only=tuple(args.patch or ()),
            results=results,
            say=say,
        )
    print("\n".join(d.report()))
    if d.conflict:
        again = "".join(
            f" --{k} {v!r}" for k in ("out", "signoff", "results") if (v := getattr(args, k))
        )
        raise PatchError(
            f"{d.conflict.patch.name} conflicts with {d.target} in {', '.join(d.unresolved)}; "
            f"resolve it in {d.tree} (branch {d.branch}), `git add` it, `git am --continue`, "
            f"then run `vpatch pr --onto {args.onto}{again} --continue`"
        )
    if not d.sent:
        print(f"nothing to send: {d.target} has every patch already; no branch was made")
        return 0
    n = len(d.sent)
    where = d.out or Path("pr")
    print(f"{d.tree}: branch {d.branch}, {n} commit{'s' * (n != 1)} on {d.target}")
    print(f"{where / 'PR_BODY.md'}, {where / 'series'}/: {d.title}")
    print("nothing was pushed; to open the pull request:")
    print("\n".join(f"  {c}" for c in d.commands))
    return 0


# -- wheels ------------------------------------------------------------------


def cmd_wheel(args: argparse.Namespace) -> int:
    from .commands import wheel

    built = wheel.build(
        args.version,
        variant=args.variant,
        mode=args.mode,
        out=Path(args.out),
        series_dir=_path(args.series),
        dry_run=args.dry_run,
        offline=args.offline,
        say=say,
    )
    from .wheel.build import BuildPlan, format_plan

    print(format_plan(built) if isinstance(built, BuildPlan) else built)
    return 0


def cmd_verify_wheel(args: argparse.Namespace) -> int:
    from .commands import verify

    res = verify.verify_wheel(
        Path(args.wheel), arch=args.arch, tree=_path(args.tree), offline=args.offline
    )
    from .wheel.verify import format_verify

    print(format_verify(res))
    if not res.ok:
        n = len(res.problems)
        raise WheelError(f"verify-wheel found {n} problem{'s' * (n != 1)} (listed above)")
    return 0


# -- install / uninstall / check (one Python environment) ---------------------


def cmd_install(args: argparse.Namespace) -> int:
    from .commands import install

    res = install.install(args.python, _path(args.series), dry_run=args.dry_run, say=say)
    _print_env_result(res, "replace", "")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    from .commands import install

    res = install.uninstall(args.python, dry_run=args.dry_run, say=say)
    _print_env_result(res, "restore", "uninstalled ")
    return 0


def _print_env_result(res: Any, verb: str, done: str) -> None:
    """install's and uninstall's report: what changed (or, dry, would)."""
    where = f"{res.dist.name} {res.dist.version} at {res.dist.root}"
    if res.action == "nothing":
        print(f"{where}: {res.message}; nothing to do")
    elif res.action == "dry-run":
        print(f"{where}: {res.message} (dry run: nothing changed)")
        for f in res.files:
            print(f"  {verb}  {f}")
        for f, what in res.bytecode.items():
            print(f"  {what:24} {f}")
    else:
        print(f"{where}: {done or res.action + ' '}{res.message}")


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 0 when EAGLE-3 is ready, 1 when not (the report says why)."""
    from .commands import check

    report = check.check(args.python, say)
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(check.format_text(report))
    return 0 if report.eagle3_ready else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    """Exit 0 when the pair is ok, 1 when doctor found an error, 2 for bad input."""
    from .commands import doctor
    from .commands.doctor import Request

    req = Request(
        command=tuple(args.command),
        target=args.target,
        drafter=args.drafter,
        python=args.python,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        num_speculative_tokens=args.num_speculative_tokens,
        offline=args.offline,
    )
    report = doctor.doctor(req, say=say)
    print(json.dumps(report.to_json(), indent=2) if args.format == "json" else report.to_text())
    return 0 if report.ok else 1


# ----------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error said like any other: one line, exit 2
    (ConfigError's code, and argparse's), pointing to the command's --help."""

    def error(self, message: str) -> NoReturn:
        print(f"vpatch: error: {_cut(message)} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(ConfigError.exit_code)


def _codes(codes: tuple[int, ...], own: dict[int, str]) -> str:
    """A command's exit codes, each with what it means: errors.py's kinds,
    or the command's own meaning of one (`own`)."""
    from . import errors

    kinds = {
        c.exit_code: c.kind
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, VpatchError) and "kind" in vars(c)
    }
    said = {0: "done", **kinds, INTERRUPTED: "interrupted (rolled back)", **own}
    shown = sorted({0, ConfigError.exit_code, *codes, *own, INTERRUPTED})
    return "\n".join(f"  {c:<4} {said[c]}" for c in shown)


ERRORS_DOC = "docs/install.md, Errors and exit codes"


class _Version(argparse.Action):
    """`vpatch --version`: the tool, and the patch set it carries."""

    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        kw.update(nargs=0, default=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        parser.exit(_guarded(_print_version))


def _print_version() -> int:
    from collections import Counter
    from importlib import metadata

    try:
        version = metadata.version("vpatch")
    except metadata.PackageNotFoundError:
        version = "(not installed: run from its source)"
    pins = lock.load()
    ps = pins.patchset
    files = [v for vs in ps.variants.values() for v in vs]
    statuses = Counter(r.status for r in pins.releases.values())
    versions = pins.versions()
    default = pins.default()
    carried = len(ps.carried(default.version))
    print(f"vpatch {version}")
    print(f"patch set {pins.identity()[:12]} (sha256 of VERSIONS.lock, patches.toml, the patches)")
    print(
        f"  releases  {len(versions)} pinned, {versions[0]}-{versions[-1]}: "
        + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    )
    print(
        f"  patches   {len(ps.slugs)}, in {len(files)} files; the default release, "
        f"{default.version}, gets {carried}"
    )
    print(f"  data      {pins.root}")
    return 0


def parser() -> Parser:
    ap = Parser(
        prog="vpatch",
        description="EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets on vLLM: the patches and tools.",
        epilog="`vpatch COMMAND --help` gives a command's options, exit codes and an example.",
    )
    ap.add_argument(
        "-V", "--version", action=_Version, help="the version, and the patch set it carries"
    )
    sub = ap.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    ap.commands = {}  # type: ignore[attr-defined]  # name -> its parser (see main)

    def add(
        name: str,
        func: Callable[[argparse.Namespace], int],
        help: str,
        example: str,
        codes: tuple[int, ...],
        extra: dict[int, str] | None = None,
    ) -> Parser:
        text = _codes(codes, extra or {})
        p = sub.add_parser(
            name,
            help=help,
            description=help[0].upper() + help[1:] + ".",
            epilog=f"exit codes ({ERRORS_DOC}):\n{text}\n\nexample:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(func=func)
        ap.commands[name] = p  # type: ignore[attr-defined]
        return p

    version_help = "release (default: the newest patched one)"
    p = add(
        "fetch",
        cmd_fetch,
        "download a pinned release's source into the cache",
        "vpatch fetch 0.17.1 --dest vllm-0.17.1",
        (3, 4, 6, 7, 9, 10, 11),
    )
    p.add_argument("version", nargs="?", metavar="VERSION", help=version_help)
    p.add_argument(
        "--dest",
        metavar="DIR",
        help="also write the unpatched tree into this empty folder "
        "(`vpatch apply` with the same --dest and --source patches it there)",
    )
    _source_args(p)

    p = add(
        "apply",
        cmd_apply,
        "make a patched vLLM tree (git, one commit per patch)",
        "vpatch apply 0.25.0 --dest build/vllm-0.25.0",
        (3, 4, 5, 6, 7, 9, 10, 11),
    )
    p.add_argument("version", nargs="?", metavar="VERSION", help=version_help)
    p.add_argument("--dest", metavar="DIR", help="tree folder (default: build/vllm-<release>)")
    p.add_argument("--series", metavar="DIR", help="apply the series in this folder instead")
    _source_args(p)

    tree_help = "the tree (default: build/vllm-<newest patched>, the one `make apply` makes)"
    p = add(
        "status",
        cmd_status,
        "list each patch of a tree as applied or not",
        "vpatch status build/vllm-0.17.1",
        (5, 6, 9, 10),
    )
    p.add_argument("dest", nargs="?", metavar="DIR", help=tree_help)
    p.add_argument("--series", metavar="DIR", help="compare with the series in this folder")

    p = add(
        "unapply",
        cmd_unapply,
        "return a patched tree to its baseline (refuses commits not the series')",
        "vpatch unapply build/vllm-0.17.1",
        (5, 6, 9, 10, 11),
    )
    p.add_argument("dest", metavar="DIR", help="the tree")
    p.add_argument("--series", metavar="DIR", help="the tree has the series in this folder")
    p.add_argument(
        "--discard-commits",
        action="store_true",
        help="drop commits that are not the series' own too (yours: export them first)",
    )

    p = add(
        "lock",
        cmd_lock,
        "list the pinned releases, or --refresh their hashes",
        "vpatch lock",
        (3, 11),
    )
    p.add_argument("--refresh", action="store_true", help="rewrite hashes from the index")

    p = add(
        "matrix",
        cmd_matrix,
        "how each patch of the newest series fares on each release",
        "vpatch matrix --versions 0.32.0 0.33.0 --offline",
        (3, 4, 5, 9, 11),
    )
    p.add_argument(
        "--versions", nargs="+", metavar="V", help="these releases (default: the lock's)"
    )
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: one per core)")
    p.add_argument("--offline", action="store_true", help="use the cache only")

    p = add(
        "port",
        cmd_port,
        "carry a release's series to another release (3-way)",
        "vpatch port 0.32.0 0.33.0",
        (3, 4, 5, 6, 9, 10, 11),
    )
    p.add_argument("from_version", metavar="FROM")
    p.add_argument("to_version", metavar="TO")
    p.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="export a port whose conflicts you resolved",
    )
    p.add_argument("--work", metavar="DIR", help="work tree (default: build/port-TO)")
    p.add_argument(
        "--into", metavar="DIR", help="write a plain series folder here (default: the patch set)"
    )
    p.add_argument("--keep", action="store_true", help="keep the work tree after a clean port")
    p.add_argument(
        "--source",
        default="auto",
        metavar="SOURCE",
        help="where the releases' source comes from: auto|sdist|wheel|cpu-wheel|git",
    )
    p.add_argument("--offline", action="store_true", help="use the cache only")

    p = add(
        "export",
        cmd_export,
        "write a patched tree's commits into the patch set",
        "vpatch export build/vllm-0.27.0",
        (5, 6, 9, 10, 11),
    )
    p.add_argument("dir", metavar="DIR", help="a vpatch tree (vpatch apply, then your commits)")
    p.add_argument(
        "--into",
        metavar="DIR",
        help="write a plain series folder here instead (new, empty, or one vpatch wrote)",
    )

    p = add(
        "series",
        cmd_series,
        "write a release's series as plain files (git am, patch -p1)",
        "vpatch series 0.17.1 --out series-0.17.1",
        (5, 6, 11),
    )
    p.add_argument("version", nargs="?", metavar="VERSION", help=version_help)
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="folder for NNNN-<slug>.patch and `series` (new, empty, or one vpatch wrote)",
    )

    p = add(
        "lint",
        cmd_lint,
        "check the patch set: files, DEP-3, every release up to date",
        "vpatch lint --offline",
        (3, 4, 5, 9, 11),
        {5: "lint found problems (listed)"},
    )
    p.add_argument("--offline", action="store_true", help="skip releases not in the cache")

    p = add(
        "docs",
        cmd_docs,
        "write the docs' generated tables (README, docs/patches.md, docs/doctor.md)",
        "vpatch docs --check",
        (5, 11),
        {5: "--check: a generated part is stale (listed)"},
    )
    p.add_argument("--check", action="store_true", help="name the stale ones; write nothing")

    p = add(
        "pr",
        cmd_pr,
        "draft the vLLM pull request of what upstream still lacks",
        "vpatch pr --onto 0.33.0 --patch mla-detect-kimi-k2-eagle-drafters",
        (3, 4, 5, 6, 9, 10, 11),
    )
    p.add_argument("--onto", required=True, metavar="VERSION|PATH", help="a release or a checkout")
    p.add_argument(
        "--out", metavar="DIR", help="PR_BODY.md and series/ go here (default: pr); a release too"
    )
    p.add_argument("--signoff", metavar="'NAME <EMAIL>'", help="default: git's user.name/email")
    p.add_argument("--continue", dest="resume", action="store_true", help="after a conflict")
    p.add_argument(
        "--results",
        metavar="FILE",
        help="the tier's results to quote (tests/vllm/tier.py run: build/tier/results.json)",
    )
    p.add_argument(
        "--patch",
        action="append",
        metavar="SLUG",
        help="send this patch alone (again for more); default: every one upstream lacks",
    )
    p.add_argument(
        "--source",
        default="auto",
        metavar="SOURCE",
        help="where the releases' source comes from: auto|sdist|wheel|cpu-wheel|git",
    )
    p.add_argument("--offline", action="store_true", help="use the cache only")

    p = add(
        "wheel",
        cmd_wheel,
        "an installable wheel of a patched release",
        "vpatch wheel 0.17.1 --variant cuda --out dist",
        (3, 4, 5, 6, 8, 9, 11),
    )
    p.add_argument("version", nargs="?", metavar="VERSION", help=version_help)
    p.add_argument("--variant", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--mode",
        choices=("overlay", "source"),
        default="overlay",
        help="overlay: patch the official wheel's Python files (seconds); "
        "source: build from the patched tree with TORCH_CUDA_ARCH_LIST=10.0 (hours)",
    )
    p.add_argument("--out", default="dist", metavar="DIR", help="output folder (default: dist)")
    p.add_argument("--series", metavar="DIR", help="use the series in this folder instead")
    p.add_argument("--dry-run", action="store_true", help="source mode: print, don't build")
    p.add_argument("--offline", action="store_true", help="use the cache only")

    p = add(
        "verify-wheel",
        cmd_verify_wheel,
        "CUDA archs in a wheel's extensions; patched files",
        "vpatch verify-wheel dist/vllm-0.17.1+eagle3.1a2b3c4d-cp38-abi3-*.whl --arch sm_100",
        (3, 4, 5, 6, 8, 9, 10, 11),
        {8: "a bad wheel, or verify-wheel found problems (listed)"},
    )
    p.add_argument("wheel", metavar="WHEEL")
    p.add_argument("--arch", help="required arch, e.g. sm_100 (default for CUDA wheels)")
    p.add_argument(
        "--tree", metavar="DIR", help="patched tree to compare the wheel's Python files with"
    )
    p.add_argument("--offline", action="store_true", help="use the cache only")

    py_help = (
        "the environment's interpreter (default: python3 on PATH, the active venv); "
        "it must answer within VPATCH_PYTHON_TIMEOUT seconds (default 120)"
    )
    p = add(
        "install",
        cmd_install,
        "patch the vLLM installed in a Python environment",
        "vpatch install --python /opt/vllm/bin/python --dry-run",
        (5, 6, 9, 11),
    )
    p.add_argument("--python", metavar="PY", help=py_help)
    p.add_argument("--series", metavar="DIR", help="install the series in this folder instead")
    p.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")

    p = add(
        "uninstall",
        cmd_uninstall,
        "restore the vLLM files vpatch install replaced",
        "vpatch uninstall --python /opt/vllm/bin/python",
        (6, 11),
    )
    p.add_argument("--python", metavar="PY", help=py_help)
    p.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")

    p = add(
        "check",
        cmd_check,
        "each patch in an environment's vLLM; EAGLE-3 ready or not",
        "vpatch check --python /opt/vllm/bin/python --format json",
        (6,),
        {0: "ready", 1: "not ready (the report says why)"},
    )
    p.add_argument("--python", metavar="PY", help=py_help)
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = add(
        "doctor",
        cmd_doctor,
        "check an EAGLE-3 drafter, its target and vLLM before serving",
        "vpatch doctor --python /opt/vllm/bin/python -- vllm serve moonshotai/Kimi-K2.5 "
        "--tensor-parallel-size 8 --speculative-config '{...}'",
        (),
        {0: "the pair is ok", 1: "doctor found an error"},
    )
    p.add_argument(
        "command",
        nargs="*",
        metavar="-- vllm serve MODEL ...",
        help="the serve command you will run, after `--` (--speculative-config included)",
    )
    p.add_argument(
        "--target", metavar="T", help="target model folder or hub id (owner/name[@revision])"
    )
    p.add_argument(
        "--drafter", metavar="D", help="EAGLE-3 drafter folder or hub id (owner/name[@revision])"
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="read hub ids from the local Hugging Face cache only (as HF_HUB_OFFLINE=1)",
    )
    p.add_argument("--python", default="python3", metavar="PY", help=py_help)
    p.add_argument("--tensor-parallel-size", type=int, default=1, metavar="N")
    p.add_argument("--pipeline-parallel-size", type=int, default=1, metavar="N")
    p.add_argument("--num-speculative-tokens", type=int, default=3, metavar="K")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return ap


def synopsis() -> str:
    """The command list README.md carries (between its `commands` markers),
    from the parser: one line per command, its arguments as --help names
    them, wrapped at 100 characters."""
    ap = parser()
    lines = []
    for name, p in ap.commands.items():  # type: ignore[attr-defined]
        words = [f"vpatch {name}"]
        # a trailing command (doctor's `-- vllm serve ...`) after the options
        last = [a for a in p._actions if not a.option_strings and a.nargs == "*"]
        for a in [a for a in p._actions if a not in last] + last:
            if isinstance(a, argparse._HelpAction):
                continue
            if not a.option_strings:
                metavar = a.metavar if isinstance(a.metavar, str) else a.dest.upper()
                words.append(f"[{metavar}]" if a.nargs in ("?", "*") else metavar)
                continue
            flag = max(a.option_strings, key=len)
            if a.nargs == 0:
                item = flag
            else:
                shown = a.metavar or ("|".join(a.choices) if a.choices else a.dest.upper())
                more = a.nargs == "+" or isinstance(a, argparse._AppendAction)
                item = f"{flag} {shown}" + (" ..." if more else "")
            words.append(item if a.required else f"[{item}]")
        line = ""
        for w in words:
            if line and len(line) + 1 + len(w) > 100:
                lines.append(line)
                line = " " * 7
            line = f"{line} {w}" if line.strip() else line + w
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The `vpatch` command: the exit code. stdout closed early (`vpatch
    lock | head -1`): silent, exit 128 + SIGPIPE, as a tool SIGPIPE ends."""
    try:
        try:
            return _guarded(lambda: _dispatch(argv))
        finally:
            sys.stdout.flush()  # here, not at exit: a closed pipe is said nowhere
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's own flush at exit
        return BROKEN_PIPE


def _dispatch(argv: list[str] | None) -> int:
    ap = parser()
    args, extra = ap.parse_known_args(argv)
    if extra:  # said by the command's own parser, pointing to its --help
        ap.commands[args.subcommand].error(f"unrecognized arguments: {' '.join(extra)}")  # type: ignore[attr-defined]
    gitutil.scrub_environ()
    code: int = args.func(args)
    return code


def _guarded(run: Callable[[], int]) -> int:
    """run(), every failure said in one line with its exit code."""
    try:
        return run()
    except VpatchError as e:
        return _fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        return _fail("interrupted; nothing was left half done", INTERRUPTED)
    except BrokenPipeError:
        raise  # main's: stdout went away
    except OSError as e:  # a file-system error no command converted itself
        err = disk_error(e)
        return _fail(str(err), err.exit_code)
    except Exception as e:  # a bug: still one line, the traceback on request
        if os.environ.get("VPATCH_DEBUG"):
            traceback.print_exc()
        return _fail(
            f"internal error: {type(e).__name__}: {e} (VPATCH_DEBUG=1 shows the traceback)",
            INTERNAL,
        )


def _cut(message: str, limit: int = 200) -> str:
    """The message's first line, with a word over `limit` characters (a
    pasted blob given as an argument) cut: the line stays readable."""
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    return re.sub(
        rf"\S{{{limit + 1},}}", lambda m: f"{m.group()[:80]}…({len(m.group())} characters)", first
    )


def _fail(message: str, code: int) -> int:
    print(f"vpatch: error: {_cut(message)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
