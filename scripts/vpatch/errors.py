"""The one error hierarchy. The CLI catches `VpatchError` once and prints
`vpatch: error: <message>` with the class's exit code; nothing else prints
errors. Messages are one line and say what to do next."""


class VpatchError(Exception):
    exit_code = 1


class ConfigError(VpatchError):
    """Bad input: unknown release, bad lock file, bad option."""

    exit_code = 2


class NetworkError(VpatchError):
    """The index or a remote could not be reached and nothing is cached."""

    exit_code = 3


class IntegrityError(VpatchError):
    """A download or checkout is not what the lock pins."""

    exit_code = 4


class PatchError(VpatchError):
    """A malformed patch, a series naming a missing file, a hunk that fails."""

    exit_code = 5


class TreeError(VpatchError):
    """The destination tree is dirty, has unknown commits, or is busy."""

    exit_code = 6


class UnsafePathError(VpatchError):
    """An archive member, wheel member or patch would write outside the tree."""

    exit_code = 7


class WheelError(VpatchError):
    """A wheel that cannot be read, rebuilt or verified."""

    exit_code = 8


class PreflightError(VpatchError):
    """The machine lacks what a build needs (nvcc, torch, ...)."""

    exit_code = 9


class GitError(VpatchError):
    """A git operation failed in a way none of the above explains."""

    exit_code = 10
