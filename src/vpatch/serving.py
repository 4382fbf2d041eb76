"""Which code of a vLLM release serves a target, and what that code does with
EAGLE-3 aux states (data/serving.toml): doctor judges the file that will
serve the pair, not a model name.

Three parts, each validated once when the table is read (as rules.toml is):

- routes: per target architecture, per release and platform, the file and
  class that serve it (model_executor/models/registry.py names a module; a
  package of vllm/models/ picks a platform's module in its `__init__.py`);
- files: per serving file, its facts per release (SupportsEagle3, what aux
  id 0 and id num_hidden_layers give, the states taken before the TP
  all-reduce, PP relay, the variables that change a state); the generic
  `deepseek_v2.py` has no facts here, rules.toml's are its own;
- families: the targets' families (their architectures, the drafter classes
  the registry has for them per release, the defect keys of vpatch's fixes),
  and, per release, what the release does for every family (`releases`).

Every table lists only what changes at its release (the first sets every
fact), as rules.toml does. Doctor covers the releases rules.toml covers;
each value is re-read from every pinned release's source by
releasefacts/modelcode.py (tests/integration/doctor/test_releases_real.py),
and `vpatch carry` reads a new release's before anyone writes them.

Why a file of its own, and not more Rules fields: its facts are per file
and per platform, not per release, and a new release that adds a platform
module or moves an architecture changes a route, not a field. rules.py's
loader is not reused: its tables are one flat record per release, these are
records per file, family and architecture (the same discipline, checked
the same way)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import tomllib
from packaging.version import InvalidVersion, Version

from .errors import ConfigError, disk_error
from .rules import typed

FILE = "serving.toml"  # beside VERSIONS.lock
# vllm/platforms: the platforms a package's __init__.py dispatches on (TPU
# registers its own classes through plugins: not read here)
PLATFORMS = ("cuda", "rocm", "cpu", "xpu")
ANY = "*"  # a route for every platform a table does not name
# the generic file: its facts are rules.toml's (doctor's DeepSeek-V2/V3 rules)
GENERIC = "vllm/model_executor/models/deepseek_v2.py"
# Rules.id0 values: what the target gives for aux id 0
ID0 = ("embedding", "typeerror", "dropped")


@dataclass(frozen=True)
class Code:
    """What a serving file does at one release (the fields a file's tables
    set). Each is read by its probe in releasefacts/modelcode.py."""

    # the served class lists SupportsEagle3 (directly or through a vLLM base
    # class): otherwise the model runner refuses the pair after both models
    # load ("Model does not support EAGLE3 interface": gpu_model_runner.py
    # GPUModelRunner.load_model, eagle3_utils.py set_eagle3_aux_hidden_state_layers)
    eagle3: bool
    # aux id 0 (the embedding): "embedding" (captured before the first
    # layer, or with the residual still None), "typeerror" (hidden_states +
    # residual with the residual None: the first forward pass fails),
    # "dropped" (only captured after a layer: no state, the drafter's fc
    # gets one state fewer than it was built for)
    id0: str
    # aux id num_hidden_layers (the final norm's input) is captured: after
    # each layer (idx + 1) or with end_layer
    id_n: bool
    # the decoder layer leaves its MLP/MoE output un-reduced and fuses the
    # TP all-reduce into the next layer's norm (fused_allreduce_rms_norm),
    # and the aux state is taken before it: at TP > 1 without sequence
    # parallelism every id >= 1 is this rank's partial sum
    partial_sum: bool
    # the decoder declares supports_aux_hidden_states_over_pp: aux states
    # cross pipeline ranks (eagle3_utils.py
    # verify_supports_aux_hidden_states_over_pp)
    pp_relay: bool
    # the decoder is an EagleModelMixin (interfaces.py): its aux layers are
    # set by _set_aux_hidden_state_layers (Release.mixin_sorts)
    mixin: bool
    # the environment variables the capture reads, as NAME=default
    # (vllm/envs.py), comma-separated; "" none
    aux_env: str


@dataclass(frozen=True)
class Release:
    """What a release does for every family (the `releases` tables)."""

    # config/speculative.py SpeculativeConfig._verify_args: the target model
    # types EAGLE-3 (and DFlash) accept, by substring of
    # hf_text_config.model_type, before anything loads ([]: no such list)
    allowlist: frozenset[str]
    # interfaces.py EagleModelMixin._set_aux_hidden_state_layers sorts and
    # dedups the ids
    mixin_sorts: bool
    # v1/worker/gpu/spec_decode/eagle/eagle3_utils.py
    # get_eagle3_aux_layers_from_config (the V2 runner): a DFlash drafter's
    # dflash_config.target_layer_ids read, +1 each
    dflash_ids: bool
    # the same for DSpark's dspark_target_layer_ids, +1 each, except for a
    # drafter whose model_type is in dspark_as_written (taken as written)
    dspark_ids: bool
    dspark_as_written: frozenset[str]


@dataclass(frozen=True)
class Family:
    key: str
    name: str
    architectures: tuple[str, ...]
    # the registry modules whose drafter classes are this family's
    # (vllm.models.<m> or model_executor/models/<m>.py)
    modules: tuple[str, ...]
    # {Code field: the doctor defect key (doctor/defects.py) of vpatch's fix}
    fixes: Mapping[str, str]
    # what the aux state is, where a person has to say it (shown as read)
    note: str
    drafters: tuple[tuple[str, frozenset[str]], ...]  # (release, registry names), oldest first

    def drafters_at(self, release: str) -> frozenset[str]:
        return _fold_value(self.drafters, release, frozenset())


@dataclass(frozen=True)
class ServingFile:
    path: str
    family: str
    cls: str  # the served class
    capture: str  # the decoder class whose forward captures: "Class" or "path:Class"
    changes: tuple[tuple[str, Mapping[str, Any]], ...]  # oldest first
    gone: str | None = None  # the first release without the file

    @property
    def first(self) -> str:
        return self.changes[0][0]

    @property
    def capture_file(self) -> str:
        return self.capture.split(":")[0] if ":" in self.capture else self.path

    @property
    def capture_class(self) -> str:
        return self.capture.split(":")[-1]

    def at(self, release: str) -> Code | None:
        """The file's facts at `release`, None before its first table and
        from the release that removed it."""
        if self.gone is not None and Version(release) >= Version(self.gone):
            return None
        acc: dict[str, Any] = {}
        for first, changes in self.changes:
            if Version(first) <= Version(release):
                acc.update(changes)
        return Code(**acc) if acc else None


@dataclass(frozen=True)
class Served:
    """What serves a target at a release on a platform."""

    release: str
    platform: str
    architecture: str
    path: str  # "" where the release does not register the architecture
    cls: str
    family: Family
    code: Code | None  # None: the generic file (rules.toml's facts) or none
    facts: Release
    since: str | None  # the first release that registers the architecture
    capture_file: str = ""  # where the decoder that captures the aux states is
    capture_cls: str = ""

    @property
    def generic(self) -> bool:
        return self.path == GENERIC

    @property
    def registered(self) -> bool:
        return bool(self.path)


@dataclass(frozen=True)
class Table:
    path: Path
    releases: tuple[tuple[str, Mapping[str, Any]], ...]
    families: Mapping[str, Family]
    # {architecture: ((release, {platform: "path:Class"}), ...)}, oldest first
    routes: Mapping[str, tuple[tuple[str, Mapping[str, str]], ...]]
    files: Mapping[str, ServingFile]

    @property
    def first(self) -> str:
        return self.releases[0][0]

    def release(self, release: str) -> Release:
        acc: dict[str, Any] = {}
        for first, changes in self.releases:
            if Version(first) <= Version(release):
                acc.update(changes)
        if not acc:
            raise ConfigError(f"{self.path.name}: no release facts at or below {release}")
        return Release(**acc)

    def family_of(self, architecture: str) -> Family | None:
        return next((f for f in self.families.values() if architecture in f.architectures), None)

    def route(self, architecture: str, release: str, platform: str) -> tuple[str, str]:
        """(path, class) that serve `architecture` at `release` on `platform`;
        ("", "") where the release does not register it."""
        acc: dict[str, str] = {}
        for first, changes in self.routes.get(architecture, ()):
            if Version(first) <= Version(release):
                acc.update(changes)
        where = acc.get(platform, acc.get(ANY, ""))
        if not where:
            return "", ""
        path, _, cls = where.partition(":")
        return path, cls

    def since(self, architecture: str) -> str | None:
        """The first release that registers `architecture`, on any platform."""
        return next(
            (v for v, changes in self.routes.get(architecture, ()) if any(changes.values())), None
        )

    def served(self, architecture: str, release: str, platform: str) -> Served | None:
        """What serves a target of `architecture`, None outside the families."""
        fam = self.family_of(architecture)
        if fam is None:
            return None
        path, cls = self.route(architecture, release, platform)
        entry = self.files.get(path)
        code = entry.at(release) if entry else None
        return Served(
            release,
            platform,
            architecture,
            path,
            cls,
            fam,
            code,
            self.release(release),
            self.since(architecture),
            entry.capture_file if entry else "",
            entry.capture_class if entry else "",
        )

    def first_where(self, path: str, holds: Any) -> str | None:
        """The first release whose facts of serving file `path` `holds` is
        true of (a fact changes only at a table's release)."""
        entry = self.files[path]
        return next((v for v, _ in entry.changes if holds(entry.at(v))), None)

    def expected(self, release: str) -> dict[str, Any]:
        """Every fact the table says of `release`, flat ({key: value}), as
        releasefacts/modelcode.py reads them from its source: the release's
        facts, each family's drafters, each architecture's route per
        platform, and the facts of each file the release has."""
        out: dict[str, Any] = {}
        r = self.release(release)
        for f in fields(Release):
            out[f"release {f.name}"] = getattr(r, f.name)
        for fam in self.families.values():
            out[f"drafters {fam.key}"] = fam.drafters_at(release)
            for arch in fam.architectures:
                for platform in PLATFORMS:
                    path, cls = self.route(arch, release, platform)
                    out[f"route {arch} {platform}"] = f"{path}:{cls}" if path else ""
        for path, entry in self.files.items():
            code = entry.at(release)
            if code is not None:
                for f in fields(Code):
                    out[f"file {path} {f.name}"] = getattr(code, f.name)
        return out


# -- reading the TOML ---------------------------------------------------------------


def _version(where: str, release: str) -> Version:
    try:
        return Version(release)
    except InvalidVersion:
        raise ConfigError(f"{where}: {release!r} is not a release") from None


def _changes(
    where: str, tables: Any, kinds: Mapping[str, str], check: Any = None
) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """{release: {fact: value}} as (release, facts) oldest first: every key a
    fact of `kinds`, every value of its kind, the first table complete, a
    later one only what changes; `check(where, facts)` for more."""
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"{where}: no release tables")
    out: list[tuple[str, Mapping[str, Any]]] = []
    acc: dict[str, Any] = {}
    for release, table in tables.items():
        at = f"{where} [{release!r}]"
        v = _version(at, release)
        if out and v <= Version(out[-1][0]):
            raise ConfigError(f"{at}: releases go oldest first")
        if not isinstance(table, dict):
            raise ConfigError(f"{at}: not a table")
        extra = sorted(set(table) - set(kinds))
        if extra:
            raise ConfigError(f"{at}: unknown facts {', '.join(extra)}")
        if not out:
            missing = [k for k in kinds if k not in table]
            if missing:
                said = ", ".join(missing)
                raise ConfigError(f"{at}: the first release sets every fact; missing {said}")
        values = {k: typed(at, k, kinds[k], x) for k, x in table.items()}
        same = sorted(k for k, x in values.items() if out and acc.get(k) == x)
        if same:
            raise ConfigError(f"{at}: {', '.join(same)} as before (list only what changes)")
        if check:
            check(at, values)
        acc.update(values)
        out.append((release, values))
    return tuple(out)


def _kinds(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in fields(cls)}


def _id0(where: str, values: Mapping[str, Any]) -> None:
    if "id0" in values and values["id0"] not in ID0:
        raise ConfigError(f"{where}: id0 must be one of {', '.join(ID0)}")


def _strings(where: str, v: Any, name: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise ConfigError(f"{where}: {name} must be a list of names")
    return tuple(v)


def _text(where: str, t: Mapping[str, Any], name: str, default: str | None = None) -> str:
    v = t.get(name, default)
    if not isinstance(v, str) or (default is None and not v):
        raise ConfigError(f"{where}: {name} must be a string")
    return v


def _family(key: str, t: Any) -> Family:
    where = f"{FILE} [families.{key}]"
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: not a table")
    extra = sorted(set(t) - {"name", "architectures", "modules", "fixes", "note", "drafters"})
    if extra:
        raise ConfigError(f"{where}: unknown keys {', '.join(extra)}")
    fixes = t.get("fixes", {})
    if not isinstance(fixes, dict) or not all(
        k in {f.name for f in fields(Code)} and isinstance(x, str) and x for k, x in fixes.items()
    ):
        raise ConfigError(f"{where}: fixes maps a serving file's fact to a defect key")
    drafters = _changes(f"{where} drafters", t.get("drafters"), {"drafters": "frozenset[str]"})
    return Family(
        key,
        _text(where, t, "name"),
        _strings(where, t.get("architectures"), "architectures"),
        _strings(where, t.get("modules"), "modules"),
        dict(fixes),
        _text(where, t, "note", ""),
        tuple((v, c["drafters"]) for v, c in drafters),
    )


def _route(where: str, values: Mapping[str, Any]) -> None:
    for platform, target in values.items():
        if platform != ANY and platform not in PLATFORMS:
            known = ", ".join((*PLATFORMS, ANY))
            raise ConfigError(f"{where}: {platform!r} is no platform ({known})")
        if not isinstance(target, str) or (target and target.count(":") != 1):
            raise ConfigError(f'{where}: a route is "path:Class" (or "": not registered)')


def _routes(arch: str, t: Any) -> tuple[tuple[str, Mapping[str, str]], ...]:
    where = f"{FILE} [routes.{arch}]"
    if not isinstance(t, dict) or not t:
        raise ConfigError(f"{where}: no release tables")
    out: list[tuple[str, Mapping[str, str]]] = []
    acc: dict[str, str] = {}
    for release, table in t.items():
        at = f"{where} [{release!r}]"
        v = _version(at, release)
        if out and v <= Version(out[-1][0]):
            raise ConfigError(f"{at}: releases go oldest first")
        if not isinstance(table, dict) or not table:
            raise ConfigError(f"{at}: not a table of platforms")
        _route(at, table)
        if not out and ANY not in table:
            raise ConfigError(f"{at}: the first table routes every platform ({ANY!r})")
        same = sorted(p for p, x in table.items() if out and acc.get(p) == x)
        if same:
            raise ConfigError(f"{at}: {', '.join(same)} as before (list only what changes)")
        acc.update(table)
        out.append((release, dict(table)))
    return tuple(out)


def _file(path: str, t: Any) -> ServingFile:
    where = f"{FILE} [files.{path!r}]"
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: not a table")
    tables = {k: v for k, v in t.items() if k not in ("family", "class", "capture", "gone")}
    changes = _changes(where, tables, _kinds(Code), _id0)
    gone = t.get("gone")
    if gone is not None and (
        not isinstance(gone, str) or _version(where, gone) <= Version(changes[-1][0])
    ):
        raise ConfigError(f"{where}: gone must be a release after its last table")
    return ServingFile(
        path,
        _text(where, t, "family"),
        _text(where, t, "class"),
        _text(where, t, "capture"),
        changes,
        gone,
    )


def load(path: Path) -> Table:
    """serving.toml at `path`, validated; ConfigError (exit 2) names what is
    wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} not found: vpatch's data is incomplete") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path.name} is not valid TOML: {e}") from None
    except OSError as e:
        raise disk_error(e, f"cannot read {path.name}") from None
    unknown = sorted(set(data) - {"releases", "families", "routes", "files"})
    if unknown:
        raise ConfigError(f"{path.name}: unknown keys {', '.join(unknown)}")
    releases = _changes(f"{path.name} [releases]", data.get("releases"), _kinds(Release))
    fams = data.get("families")
    if not isinstance(fams, dict) or not fams:
        raise ConfigError(f"{path.name}: no [families.KEY] tables")
    families = {k: _family(k, v) for k, v in fams.items()}
    archs = [a for f in families.values() for a in f.architectures]
    if len(set(archs)) != len(archs):
        raise ConfigError(f"{path.name}: an architecture is in two families")
    raw_routes = data.get("routes", {})
    if not isinstance(raw_routes, dict) or set(raw_routes) != set(archs):
        raise ConfigError(f"{path.name}: [routes] has one table per family architecture")
    routes = {a: _routes(a, t) for a, t in raw_routes.items()}
    raw_files = data.get("files", {})
    if not isinstance(raw_files, dict):
        raise ConfigError(f"{path.name}: [files] is a table of serving files")
    files = {p: _file(p, t) for p, t in raw_files.items()}
    for f in files.values():
        if f.family not in families:
            raise ConfigError(f"{path.name} [files.{f.path!r}]: no family {f.family!r}")
    for arch, changes in routes.items():
        for release, table in changes:
            for target in table.values():
                p, _, cls = target.partition(":")
                if p and p != GENERIC and (p not in files or files[p].cls != cls):
                    raise ConfigError(
                        f"{path.name} [routes.{arch}] [{release!r}]: {target} is no [files] entry"
                    )
                if p in files and files[p].at(release) is None:
                    raise ConfigError(
                        f"{path.name} [routes.{arch}] [{release!r}]: {p} has no facts there"
                    )
    return Table(path, releases, families, routes, files)


def _fold_value(
    changes: tuple[tuple[str, frozenset[str]], ...], release: str, default: frozenset[str]
) -> frozenset[str]:
    out = default
    for first, v in changes:
        if Version(first) <= Version(release):
            out = v
    return out
