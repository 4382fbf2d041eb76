"""One module per user command (or a pair: apply/unapply, install/uninstall).

A command module is the orchestration of one user command over the
libraries: the CLI calls one function of it with typed arguments and prints
what it returns (its result type, and the text of it, are the module's).
It resolves what the user named (a release, a tree, an environment, a
serve command), calls the libraries in order and returns; it prints nothing
and parses no argv. No command imports another.

What a command applies that is not its own sequence lives in a library: the
patch format's rules (quilt), the patch set's facts (patchset), a
checkout's operations (checkout), doctor's checks (doctor). Where a library
owns the whole job as one unit that must not be split or that two commands
share, the command is that one call: `install` (env/install: under the
environment's lock, roll back an interrupted run, then one journaled
transaction), `check` (env/report: the readiness doctor asks for too) and
`pr` (pr/draft: a draft undone as a whole when it fails).
"""
