"""The commands that orchestrate: a module here resolves what the user named
(a release, a tree, an environment, a serve command), calls several
libraries in order and returns a result; it prints nothing, parses no argv
and imports no other command. The CLI calls one function of it with typed
arguments and shows what it returns (a result says itself: shown.py).
The modules, one a command:

  apply         `vpatch fetch`, `apply`, `status`, `unapply`: a release's
                source, and a patched tree of it
  carry         `vpatch carry TO`: a new release to a proposed patch set
  doctor        `vpatch doctor`: the preflight, or with `--server` the
                post-flight
  export        `vpatch export` (a tree's commits as patches) and `series`
                (a release's series as plain files)
  matrix        `vpatch matrix`: each patch on each release
  verify_wheel  `vpatch verify-wheel`: a wheel against the series
  wheel         `vpatch wheel`: a wheel of a patched release

A command whose whole job is one library function has no module here: its
cli module's execute calls the library, as auditwheel's main_<cmd>.py do:
`port` (maintain/port), `lint` (maintain/lint), `docs` (maintain/docs),
`install` and `uninstall` (env/install: under the environment's lock, roll
back an interrupted run, then one journaled transaction), `check`
(env/check), `pr` (pr/draft: a draft undone as a whole when it fails),
`lock --refresh` (sources/refresh) and `releases` (sources/releases).
tests/unit/test_layers.py holds both lists (ORCHESTRATING, CALLS).

What a command applies that is not its own sequence lives in a library: the
patch format's rules (quilt), the patch set's facts (patchset), a
checkout's operations (checkout), doctor's checks (doctor).
"""
