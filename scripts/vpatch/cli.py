"""The `vpatch` command: argparse, one small function per subcommand that
parses, calls the core and prints. Errors are caught once, in main()."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import apply as engine
from . import doctor, export, lint, lock, matrix, port, pr, sources, verify, wheel
from .errors import PatchError, VpatchError
from .paths import empty


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source",
        default="auto",
        metavar="auto|sdist|wheel|cpu-wheel|git|PATH",
        help="where the release's source comes from (default: auto = sdist, else the wheel)",
    )
    p.add_argument("--remote", help=f"git remote for --source git (default {sources.VLLM_REMOTE})")
    p.add_argument("--offline", action="store_true", help="use the cache only")


# -- fetch -------------------------------------------------------------------


def cmd_fetch(args) -> int:
    release = lock.load().get(args.version)
    if args.dest:
        dest = Path(args.dest)
        if dest.exists() and any(dest.iterdir()):
            raise VpatchError(f"{dest} is not empty; pick an empty or new folder")
        dest.mkdir(parents=True, exist_ok=True)
        try:
            what = sources.materialize(release, args.source, dest, args.offline, args.remote)
        except BaseException:
            empty(dest)
            raise
        print(f"vLLM {release.version} from {what} -> {dest}")
        return 0
    kind = sources.resolve(release, args.source)
    if kind not in ("sdist", "wheel", "cpu-wheel"):
        raise VpatchError(f"--source {args.source} has nothing to cache; give --dest DIR")
    path = sources.download(release.artifact(kind), args.offline)
    print(path)
    return 0


# -- apply / status / unapply ------------------------------------------------


def cmd_apply(args) -> int:
    result = engine.apply(
        args.version,
        dest=Path(args.dest) if args.dest else None,
        source=args.source,
        series_dir=Path(args.series) if args.series else None,
        offline=args.offline,
        remote=args.remote,
        say=say,
    )
    if not result.applied and result.already:
        print(f"{result.dest}: already patched ({len(result.already)} patches); nothing to do")
    else:
        print(f"{result.dest}: vLLM {result.version}, applied {len(result.applied)} patches")
    return 0


def cmd_status(args) -> int:
    st = engine.status(Path(args.dest), Path(args.series) if args.series else None)
    print(f"{st.dest}: vLLM {st.version}")
    for p in st.patches:
        print(f"  {'applied' if p.applied else 'not applied':11}  {p.name}")
    for e in st.extra:
        print(f"  {'unknown':11}  {e}")
    if st.dirty:
        print(f"  uncommitted changes in {len(st.dirty)} paths")
    return 0


def cmd_unapply(args) -> int:
    version, n = engine.unapply(Path(args.dest))
    print(f"{args.dest}: back to the vLLM {version} baseline ({n} commits removed)")
    return 0


# -- lock --------------------------------------------------------------------


def cmd_lock(args) -> int:
    pins = lock.load()
    if args.refresh:
        from .refresh import refresh

        pins = refresh(pins, say)
        lock.save(pins)
        print(f"{pins.path.name}: {len(pins.releases)} releases refreshed")
        return 0
    default = pins.default().version
    for v in pins.versions():
        r = pins.releases[v]
        mark = "  (default)" if v == default else ""
        print(f"{v:8} {r.status:8} {r.tag:9} {r.commit:10} {', '.join(r.artifacts)}{mark}")
    return 0


# -- matrix / port / export / lint -------------------------------------------


def cmd_matrix(args) -> int:
    m = matrix.build(args.versions, offline=args.offline, jobs=args.jobs, say=say)
    print(m.to_json() if args.format == "json" else m.to_markdown(), end="")
    return 0


def cmd_port(args) -> int:
    where = dict(
        work=Path(args.work) if args.work else None,
        into=Path(args.into) if args.into else None,
        keep=args.keep,
    )
    if args.resume:
        r = port.resume(args.from_version, args.to_version, **where)
    else:
        r = port.port(
            args.from_version,
            args.to_version,
            from_source=args.source,
            to_source=args.source,
            offline=args.offline,
            say=say,
            **where,
        )
    for name, status in r.status.items():
        print(f"  {status:8}  {name}")
    if r.conflict:
        again = "".join(f" --{k} {v}" for k in ("work", "into") if (v := getattr(args, k)))
        raise PatchError(
            f"{r.conflict} conflicts with vLLM {r.to_version} in {', '.join(r.unresolved)}; "
            f"resolve it in {r.work}, `git add` it, `git am --continue`, then run "
            f"`vpatch port {r.from_version} {r.to_version}{again} --continue`"
        )
    print(f"{r.exported.dir}: {len(r.exported.names)} patches for vLLM {r.to_version}")
    return 0


def cmd_export(args) -> int:
    done = export.export(Path(args.dir), Path(args.into) if args.into else None)
    print(
        f"{done.dir}: {len(done.names)} patches for vLLM {done.version} "
        f"({len(done.written)} files written, {len(done.removed)} removed)"
    )
    return 0


def cmd_lint(args) -> int:
    result = lint.lint(offline=args.offline, say=say)
    for note in result.skipped:
        say(f"skipped: {note}")
    for problem in result.problems:
        print(problem)
    if result.problems:
        raise PatchError(f"lint found {len(result.problems)} problems (listed above)")
    print("lint: every series is consistent and up to date")
    return 0


def cmd_pr(args) -> int:
    kw = dict(out=args.out and Path(args.out), signoff=args.signoff, offline=args.offline, say=say)
    d = pr.resume(args.onto, **kw) if args.resume else pr.draft(args.onto, source=args.source, **kw)
    print("\n".join(d.report()))
    if d.conflict:
        again = "".join(f" --{k} {v!r}" for k in ("out", "signoff") if (v := getattr(args, k)))
        raise PatchError(
            f"{d.conflict.patch.name} conflicts with {d.target} in {', '.join(d.unresolved)}; "
            f"resolve it in {d.tree} (branch {d.branch}), `git add` it, `git am --continue`, "
            f"then run `vpatch pr --onto {args.onto}{again} --continue`"
        )
    if not d.sent:
        print(f"nothing to send: {d.target} has every patch already; no branch was made")
        return 0
    n = len(d.sent)
    print(f"{d.tree}: branch {d.branch}, {n} commit{'s' * (n != 1)} on {d.target}")
    print(f"{d.out / 'PR_BODY.md'}, {d.out / 'series'}/: {d.title}")
    print("nothing was pushed; to open the pull request:")
    print("\n".join(f"  {c}" for c in d.commands))
    return 0


# -- wheels ------------------------------------------------------------------


def cmd_wheel(args) -> int:
    built = wheel.build(
        args.version,
        variant=args.variant,
        mode=args.mode,
        out=Path(args.out),
        series_dir=Path(args.series) if args.series else None,
        dry_run=args.dry_run,
        offline=args.offline,
    )
    print(wheel.format_plan(built) if isinstance(built, wheel.BuildPlan) else built)
    return 0


def cmd_verify_wheel(args) -> int:
    res = verify.verify(
        Path(args.wheel),
        arch=args.arch,
        tree=Path(args.tree) if args.tree else None,
        offline=args.offline,
    )
    print(verify.format_verify(res))
    return res.exit_code


# -- doctor ------------------------------------------------------------------


def cmd_doctor(args) -> int:
    opts = doctor.Options(
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        num_speculative_tokens=args.num_speculative_tokens,
    )
    report = doctor.run(args.target, args.drafter, python=args.python, opts=opts)
    print(report.to_json() if args.format == "json" else report.to_text())
    return 0 if report.ok else 1


def add_doctor(sub) -> None:
    p = sub.add_parser(
        "doctor", help="check an EAGLE-3 drafter, its target and vLLM before serving"
    )
    p.add_argument("--target", required=True, help="target model folder or hub id (local cache)")
    p.add_argument("--drafter", required=True, help="EAGLE-3 drafter folder or hub id")
    p.add_argument("--python", default="python3", help="the serving environment's python")
    p.add_argument("--tensor-parallel-size", type=int, default=1, metavar="N")
    p.add_argument("--pipeline-parallel-size", type=int, default=1, metavar="N")
    p.add_argument("--num-speculative-tokens", type=int, default=3, metavar="K")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_doctor)


# ----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vpatch", description="The EAGLE-3 patch set for vLLM 0.15-0.17, and its tools."
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("fetch", help="download a pinned release's source into the cache")
    p.add_argument("version", nargs="?", help="release (default: newest patched)")
    p.add_argument("--dest", help="also write the unpatched tree into this empty folder")
    _source_args(p)
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("apply", help="make a patched vLLM tree (git, one commit per patch)")
    p.add_argument("version", nargs="?", help="release (default: newest patched)")
    p.add_argument("--dest", help="tree folder (default: build/vllm-<release>)")
    p.add_argument("--series", help="apply the series in this folder instead")
    _source_args(p)
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("status", help="list each patch as applied or not")
    p.add_argument("dest")
    p.add_argument("--series", help="compare with the series in this folder")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("unapply", help="return a patched tree to its baseline")
    p.add_argument("dest")
    p.set_defaults(func=cmd_unapply)

    p = sub.add_parser("lock", help="list the pinned releases, or --refresh their hashes")
    p.add_argument("--refresh", action="store_true", help="rewrite hashes from the index")
    p.set_defaults(func=cmd_lock)

    p = sub.add_parser("matrix", help="how each patch of the newest series fares on each release")
    p.add_argument(
        "--versions", nargs="+", metavar="V", help="these releases (default: the lock's)"
    )
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("--jobs", type=int, help="worker processes (default: one per core)")
    p.add_argument("--offline", action="store_true", help="use the cache only")
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser("port", help="carry a release's series to another release (3-way)")
    p.add_argument("from_version", metavar="FROM")
    p.add_argument("to_version", metavar="TO")
    p.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="export a port whose conflicts you resolved",
    )
    p.add_argument("--work", help="work tree (default: build/port-TO)")
    p.add_argument("--into", help="series folder to write (default: patches/TO)")
    p.add_argument("--keep", action="store_true", help="keep the work tree after a clean port")
    p.add_argument("--source", default="auto", metavar="auto|sdist|wheel|cpu-wheel|git")
    p.add_argument("--offline", action="store_true", help="use the cache only")
    p.set_defaults(func=cmd_port)

    p = sub.add_parser("export", help="write a patched tree's commits as its series")
    p.add_argument("dir", help="a vpatch tree (vpatch apply, then your commits)")
    p.add_argument("--into", help="series folder (default: the release's, patches/VERSION)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("lint", help="check every series: files, DEP-3, up to date, same change")
    p.add_argument("--offline", action="store_true", help="skip releases not in the cache")
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("pr", help="draft the vLLM pull request of what upstream still lacks")
    p.add_argument("--onto", required=True, metavar="VERSION|PATH", help="a release or a checkout")
    p.add_argument("--out", help="PR_BODY.md and series/ go here (default: pr); a release too")
    p.add_argument("--signoff", metavar="'NAME <EMAIL>'", help="default: git's user.name/email")
    p.add_argument("--continue", dest="resume", action="store_true", help="after a conflict")
    p.add_argument("--source", default="auto", metavar="auto|sdist|wheel|cpu-wheel|git")
    p.add_argument("--offline", action="store_true", help="use the cache only")
    p.set_defaults(func=cmd_pr)

    p = sub.add_parser("wheel", help="an installable wheel of a patched release")
    p.add_argument("version", nargs="?", help="release (default: newest patched)")
    p.add_argument("--variant", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--mode",
        choices=("overlay", "source"),
        default="overlay",
        help="overlay: patch the official wheel's Python files (seconds); "
        "source: build from the patched tree with TORCH_CUDA_ARCH_LIST=10.0 (hours)",
    )
    p.add_argument("--out", default="dist", help="output folder (default: dist)")
    p.add_argument("--series", help="use the series in this folder instead")
    p.add_argument("--dry-run", action="store_true", help="source mode: print, don't build")
    p.add_argument("--offline", action="store_true", help="use the cache only")
    p.set_defaults(func=cmd_wheel)

    p = sub.add_parser("verify-wheel", help="CUDA archs in a wheel's extensions; patched files")
    p.add_argument("wheel")
    p.add_argument("--arch", help="required arch, e.g. sm_100 (default for CUDA wheels)")
    p.add_argument("--tree", help="patched tree to compare the wheel's Python files with")
    p.add_argument("--offline", action="store_true", help="use the cache only")
    p.set_defaults(func=cmd_verify_wheel)

    add_doctor(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except VpatchError as e:
        print(f"vpatch: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("vpatch: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
