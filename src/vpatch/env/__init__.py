"""One Python environment with vLLM installed: what `vpatch install`,
`vpatch uninstall` and `vpatch check` work on.

  dist      find the vLLM distribution of an interpreter (run as a child
            with a tiny importlib.metadata script: vLLM is never imported)
  bytecode  the .pyc files of changed modules: their invalidation mode,
            recompiled by that interpreter
  journal   all-or-nothing replacement of files, with a journal written
            before anything is replaced; an interrupted run is rolled back
  locking   one run at a time per environment (flock on the .dist-info)
  receipt   what vpatch did, kept inside the .dist-info (vpatch.json)
  check     `vpatch check`'s report on the environment (doctor asks it too)
  install   `vpatch install` and `uninstall`: the series in, and out again
  readiness each patch as applied / upstream / gone / missing / modified,
            and the one answer: ready or not

Nothing here parses arguments or prints; failures are `vpatch.errors`.
"""
