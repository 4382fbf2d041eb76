"""`vpatch port FROM TO`: carry a release's series to another release (3-way),
or (`--continue`) finish a port whose conflicts a person resolved.

The command is maintain/port.py's `port` and `resume` as they are (the work
tree, the statuses, what goes into the patch set); `vpatch carry` shares
them. Named here so the CLI reaches every command through commands/."""

from __future__ import annotations

from ..maintain.port import Ported, port, resume

__all__ = ["Ported", "port", "resume"]
