"""serving.toml's facts (vpatch/serving.py) re-read from a release's own
source: which file and class serve each family architecture on each
platform (the registry, then the package's platform dispatch), what each
serving file does with aux ids, and what the release does for every family.

`read(files, table)` gives a facts.Reading whose keys are Table.expected()'s
("route ARCH PLATFORM", "file PATH FACT", "release FACT", "drafters
FAMILY"), each with its anchors, so that facts.unreadable() and
facts.differences()'s callers treat them as they treat rules.toml's. The
probes of a serving file read its capture class (the decoder whose forward
captures the aux states) by the AST: each `X in self.aux_hidden_state_layers`
(and each EagleModelMixin._maybe_add_hidden_state call) is a capture site,
told apart by X: `idx + 1` (after layer idx: ids 1..n), `self.end_layer`
(id n), `self.start_layer` (id 0, before the layers), `idx` (before layer
idx: ids 0..n-1; as a `capture_previous_aux=` argument, the layer hands
back the state before the one it runs, and layer 0 has none)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from ..serving import GENERIC, PLATFORMS, Table
from .anchors import Anchor, Source, parse
from .facts import Reading

FILES = {
    "registry": "vllm/model_executor/models/registry.py",
    "interfaces": "vllm/model_executor/models/interfaces.py",
    "speculative": "vllm/config/speculative.py",
    "v2": "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
    "envs": "vllm/envs.py",
    "generic": GENERIC,
}
DRAFTERS = "_SPECULATIVE_DECODING_MODELS"


def globs(table: Table) -> set[str]:
    """The files (paths and globs) the probes read: FILES, and each family
    module's package (vllm/models/M/, two folders deep) or file."""
    out = set(FILES.values())
    for fam in table.families.values():
        for m in fam.modules:
            out |= {
                f"vllm/models/{m}/__init__.py",
                f"vllm/models/{m}/*.py",
                f"vllm/models/{m}/*/*.py",
                f"vllm/model_executor/models/{m}.py",
            }
    return out


def _source(files: Mapping[str, str], table: Table) -> Source:
    paths = dict(FILES)
    for entry in table.files.values():
        paths[entry.path] = entry.path
        paths[entry.capture_file] = entry.capture_file
    return Source(files, paths, {})


def _key(s: Source, path: str) -> str:
    """The Source key of a file path (added on first use)."""
    if path not in s.paths:
        s.paths = {**s.paths, path: path}
    return path


# -- the registry and the platform dispatch ------------------------------------------


def registry(s: Source) -> dict[str, tuple[str, str]]:
    """{architecture: (module, class)} of every model table of registry.py
    (the first table that names it)."""
    tree = parse(s.text("registry"))
    out: dict[str, tuple[str, str]] = {}
    found = False
    for n in getattr(tree, "body", []):
        target = n.targets[0] if isinstance(n, ast.Assign) else getattr(n, "target", None)
        name = getattr(target, "id", "")
        value = getattr(n, "value", None)
        if not (name.startswith("_") and name.endswith("_MODELS") and isinstance(value, ast.Dict)):
            continue
        found = True
        for k, v in zip(value.keys, value.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) == 2):
                continue
            mod, cls = v.elts
            if isinstance(mod, ast.Constant) and isinstance(cls, ast.Constant):
                out.setdefault(str(k.value), (str(mod.value), str(cls.value)))
    s._mark(Anchor(FILES["registry"], "the *_MODELS tables"), found)
    return out


def drafters(s: Source) -> dict[str, str]:
    """{registry name: module} of _SPECULATIVE_DECODING_MODELS."""
    tree = parse(s.text("registry"))
    for n in getattr(tree, "body", []):
        target = n.targets[0] if isinstance(n, ast.Assign) else getattr(n, "target", None)
        d = getattr(n, "value", None)
        if getattr(target, "id", "") == DRAFTERS and isinstance(d, ast.Dict):
            s._mark(Anchor(FILES["registry"], DRAFTERS), True)
            return {
                str(k.value): str(v.elts[0].value)
                for k, v in zip(d.keys, d.values, strict=True)
                if isinstance(k, ast.Constant)
                and isinstance(v, ast.Tuple)
                and v.elts
                and isinstance(v.elts[0], ast.Constant)
            }
    s._mark(Anchor(FILES["registry"], DRAFTERS), False)
    return {}


def _module_file(files: Mapping[str, str], module: str) -> str:
    """The file of a registry module: `name` is model_executor/models/name.py;
    `vllm.x.y` is vllm/x/y.py or the package vllm/x/y/__init__.py."""
    if not module.startswith("vllm."):
        return f"vllm/model_executor/models/{module}.py"
    base = module.replace(".", "/")
    return f"{base}.py" if f"{base}.py" in files else f"{base}/__init__.py"


def _relative(package: str, level: int, module: str | None) -> str:
    """`from .nvidia.model import X` in package P (vllm/models/P/__init__.py)."""
    parts = package.split("/")
    base = parts[: len(parts) - level + 1] if level else []
    return ".".join([*base, *(module.split(".") if module else [])])


def _truth(node: ast.expr, platform: str) -> bool | None:
    """A dispatch condition on `platform` (None: not one read here)."""
    if isinstance(node, ast.Name) and node.id == "TYPE_CHECKING":
        return False
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _truth(node.operand, platform)
        return None if v is None else not v
    if isinstance(node, ast.BoolOp):
        vals = [_truth(v, platform) for v in node.values]
        if any(v is None for v in vals):
            return None
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
        owner = ast.unparse(node.func.value)
        if owner == "current_platform":
            asks = {
                "is_cuda": {"cuda"},
                "is_rocm": {"rocm"},
                "is_cpu": {"cpu"},
                "is_xpu": {"xpu"},
                "is_tpu": set(),
                "is_cuda_alike": {"cuda", "rocm"},
            }.get(node.func.attr)
            return None if asks is None else platform in asks
    if (
        isinstance(node, ast.Compare)
        and ast.unparse(node.left) == "current_platform.device_type"
        and len(node.comparators) == 1
        and isinstance(node.comparators[0], ast.Constant)
    ):
        same = node.comparators[0].value == platform
        return same if isinstance(node.ops[0], ast.Eq) else not same
    return None


def _bindings(
    body: list[ast.stmt], package: str, platform: str, out: dict[str, tuple[str, str]]
) -> bool:
    """The names a module's top level binds by import on `platform`
    ({name: (module, original name)}); False where a condition is not read."""
    for node in body:
        if isinstance(node, ast.ImportFrom):
            mod = _relative(package, node.level, node.module) if node.level else node.module
            for a in node.names:
                out[a.asname or a.name] = (mod or "", a.name)
        elif isinstance(node, ast.If):
            truth = _truth(node.test, platform)
            if truth is None:
                return False
            if not _bindings(node.body if truth else node.orelse, package, platform, out):
                return False
    return True


def _defines(files: Mapping[str, str], path: str, cls: str) -> bool:
    body = getattr(parse(files.get(path, "")), "body", [])
    return any(isinstance(n, ast.ClassDef) and n.name == cls for n in body)


def serves(s: Source, arch: str, platform: str) -> str:
    """ "path:Class" that serve `arch` on `platform`, "" where the release
    does not register it."""
    found = registry(s).get(arch)
    if found is None:
        return ""
    module, cls = found
    path = _module_file(s.files, module)
    if path.endswith("/__init__.py"):
        key = _key(s, path)
        text = s.text(key)
        names: dict[str, tuple[str, str]] = {}
        package = path.removesuffix("/__init__.py").replace("/", ".")
        if not _bindings(getattr(parse(text), "body", []), package, platform, names):
            s._mark(Anchor(path, f"the platform dispatch for {platform}"), False)
            return ""
        if cls not in names:
            s._mark(Anchor(path, f"{cls} on {platform}"), False)
            return ""
        module, cls = names[cls]
        path = _module_file(s.files, module)
    # a module that imports the class from another defines it there
    for _ in range(3):
        if _defines(s.files, path, cls) or path not in s.files:
            break
        names = {}
        package = path.rsplit("/", 1)[0].replace("/", ".") + ".x"
        _bindings(getattr(parse(s.files[path]), "body", []), package, platform, names)
        if cls not in names:
            break
        module, cls = names[cls]
        path = _module_file(s.files, module)
    s._mark(Anchor(path, cls), _defines(s.files, path, cls))
    return f"{path}:{cls}"


# -- a serving file's code ------------------------------------------------------------


def _class(s: Source, path: str, name: str) -> ast.ClassDef | None:
    tree = parse(s.text(_key(s, path)))
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name), None)
    s._mark(Anchor(path, name), node is not None)
    return node


def _has_base(s: Source, path: str, cls: str, base: str, depth: int = 4) -> bool:
    """Does class `cls` of `path` list `base`, itself or through a base class
    defined in vLLM's tree (followed through the file's imports)?"""
    node = _class(s, path, cls)
    if node is None or depth == 0:
        return False
    names = [ast.unparse(b).split(".")[-1] for b in node.bases]
    if base in names:
        return True
    imports: dict[str, tuple[str, str]] = {}
    package = path.rsplit("/", 1)[0].replace("/", ".") + ".x"
    for n in ast.walk(parse(s.files.get(path, ""))):
        if isinstance(n, ast.ImportFrom):
            mod = _relative(package, n.level, n.module) if n.level else (n.module or "")
            for a in n.names:
                imports[a.asname or a.name] = (mod, a.name)
    for b in names:
        if _defines(s.files, path, b):
            if _has_base(s, path, b, base, depth - 1):
                return True
        elif b in imports and imports[b][0].startswith("vllm."):
            mod, orig = imports[b]
            if _has_base(s, _module_file(s.files, mod), orig, base, depth - 1):
                return True
    return False


def sites(node: ast.ClassDef) -> list[tuple[str, ast.AST]]:
    """The capture sites of a decoder class: (kind, the node that captures)."""
    out: list[tuple[str, ast.AST]] = []
    parents: dict[ast.AST, ast.AST] = {}
    for p in ast.walk(node):
        for c in ast.iter_child_nodes(p):
            parents[c] = p
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("_maybe_add_hidden_state"):
            if len(n.args) >= 2:
                out.append((_kind(n.args[1], parents.get(n)), n))
            continue
        if not (
            isinstance(n, ast.Compare)
            and len(n.ops) == 1
            and isinstance(n.ops[0], ast.In)
            and ast.unparse(n.comparators[0]) == "self.aux_hidden_state_layers"
        ):
            continue
        parent = parents.get(n)
        if isinstance(parent, ast.keyword) and parent.arg == "capture_previous_aux":
            out.append(("previous", n))
            continue
        while parent is not None and not isinstance(parent, (ast.If, ast.FunctionDef)):
            parent = parents.get(parent)
        out.append((_kind(n.left, None), parent if isinstance(parent, ast.If) else n))
    return out


def _kind(x: ast.expr, _: ast.AST | None) -> str:
    text = ast.unparse(x).replace("(", "").replace(")", "")
    if re.fullmatch(r"\w+ \+ 1", text):
        return "after"
    if text == "self.end_layer":
        return "end"
    if text == "self.start_layer":
        return "start"
    if isinstance(x, ast.Name):
        return "before"
    return "other"


def _guarded(node: ast.AST) -> bool:
    """A before-the-layer capture that keeps the embedding when the residual
    is None (`hidden_states if residual is None else hidden_states + residual`)."""
    text = ast.unparse(node)
    return "residual is None" in text or "residual is not None" in text


def code(s: Source, path: str, cls: str, capture: str) -> dict[str, Any]:
    """A serving file's facts (serving.Code's fields) as its source says."""
    cfile, _, cclass = capture.rpartition(":")
    cfile = cfile or path
    out: dict[str, Any] = {"eagle3": _has_base(s, path, cls, "SupportsEagle3")}
    node = _class(s, cfile, cclass)
    found = sites(node) if node is not None else []
    kinds = {k for k, _ in found}
    before = [n for k, n in found if k == "before"]
    if "start" in kinds or (before and all(_guarded(n) for n in before)):
        out["id0"] = "embedding"
    elif before:
        out["id0"] = "typeerror"
    else:
        out["id0"] = "dropped"
    out["id_n"] = bool(kinds & {"after", "end"})
    text = s.text(_key(s, cfile))
    out["partial_sum"] = bool(before) and "fused_allreduce_rms_norm(" in text
    src = ast.unparse(node) if node is not None else ""
    out["pp_relay"] = "supports_aux_hidden_states_over_pp = True" in src
    out["mixin"] = node is not None and any(
        ast.unparse(b).split(".")[-1] == "EagleModelMixin" for b in node.bases
    )
    names = sorted(set(re.findall(r"\benvs\.(VLLM_\w*AUX\w*)", text)))
    envs = s.text("envs") if names else ""
    said = []
    for name in names:
        m = re.search(rf'os\.getenv\(\s*"{name}",\s*"([^"]*)"', envs)
        s._mark(Anchor(FILES["envs"], name), m is not None)
        said.append(f"{name}={m.group(1) if m else '?'}")
    out["aux_env"] = ",".join(said)
    return out


# -- what the release does for every family ------------------------------------------


def release(s: Source) -> dict[str, Any]:
    """serving.Release's fields as the release's source says."""
    out: dict[str, Any] = {}
    spec = s.text("speculative")
    m = re.search(r"\b\w*supported\w*\s*=\s*\[([^\]]*\"llama\"[^\]]*)\]", spec)
    out["allowlist"] = frozenset(re.findall(r'"([\w.-]+)"', m.group(1))) if m else frozenset()
    mixin = s.segment("interfaces", "EagleModelMixin")
    sets = s.segment("interfaces", "EagleModelMixin._set_aux_hidden_state_layers") if mixin else ""
    out["mixin_sorts"] = "sorted(set(" in sets
    v2 = s.segment("v2", "get_eagle3_aux_layers_from_config")
    out["dflash_ids"] = bool(
        re.search(r'i \+ 1 for i in \(dflash_config\.get\("target_layer_ids"\)', v2)
    )
    out["dspark_ids"] = "[i + 1 for i in dspark_layer_ids]" in v2
    written = re.findall(r'"model_type", None\) == "(\w+)"', v2) if out["dspark_ids"] else []
    out["dspark_as_written"] = frozenset(written)
    return out


def read(files: Mapping[str, str], table: Table) -> Reading:
    """Every fact of serving.toml as the release's files ({path: text}) say,
    with its anchors (the keys of Table.expected)."""
    s = _source(files, table)
    out = Reading()

    def put(key: str, value: Any) -> None:
        out.values[key] = value
        out.anchors[key] = dict(s.asked)
        s.asked = {}

    s.asked = {}
    for name, value in release(s).items():
        out.values[f"release {name}"] = value
    shared = dict(s.asked)
    for name in list(out.values):
        out.anchors[name] = shared
    s.asked = {}
    for fam in table.families.values():
        mods = drafters(s)
        put(
            f"drafters {fam.key}",
            frozenset(k for k, m in mods.items() if _package(m) in fam.modules),
        )
        for arch in fam.architectures:
            for platform in PLATFORMS:
                put(f"route {arch} {platform}", serves(s, arch, platform))
    for path, entry in table.files.items():
        if path not in files:
            continue
        for name, value in code(s, path, entry.cls, entry.capture).items():
            out.values[f"file {path} {name}"] = value
        anchors = dict(s.asked)
        for key in [k for k in out.values if k.startswith(f"file {path} ")]:
            out.anchors[key] = anchors
        s.asked = {}
    return out


def _package(module: str) -> str:
    """The family module a registry module belongs to: `vllm.models.P.x` is
    P, `name` (model_executor/models/name.py) is name."""
    return module.removeprefix("vllm.models.").split(".")[0]


def differences(
    found: Mapping[str, Any], expected: Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """{key: (serving.toml's value, the probe's)} where they differ, a key
    either lacks given as None."""
    keys = sorted(set(found) | set(expected))
    return {k: (expected.get(k), found.get(k)) for k in keys if expected.get(k) != found.get(k)}


# What doctor takes as the same for every serving file (SAME in facts.py's
# sense): (what, FILES key, scope, the code it needs there); checked on
# every pinned release by tests/integration/doctor/test_releases_real.py.
SAME: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "default aux ids (2, n // 2, n - 3) for every SupportsEagle3 class that does not "
        "override them: behaviour.default_ids",
        "interfaces",
        "SupportsEagle3.get_eagle3_default_aux_hidden_state_layers",
        ("(2, num_layers // 2, num_layers - 3)",),
    ),
)


def broken(files: Mapping[str, str], table: Table) -> list[str]:
    """The facts of SAME that do not hold on the release's files, and the
    serving files that override the default ids (none may)."""
    s = _source(files, table)
    out: list[str] = []
    if not any(path in files for path in table.files):
        return out  # before vllm/models/: deepseek_v2.py alone (facts.SAME)
    for what, key, scope, needles in SAME:
        got = s.segment(key, scope)
        if not all(n in got for n in needles):
            out.append(what)
    for path in table.files:
        text = files.get(path, "")
        if "def get_eagle3_default_aux_hidden_state_layers" in text or (
            "def get_eagle3_aux_hidden_state_layers" in text
        ):
            out.append(f"{path} overrides the default aux ids")
    return out
