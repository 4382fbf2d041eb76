"""What each vLLM release does, read again from its own source, for `vpatch
carry`: doctor's facts (rules.py's Rules), one probe a fact, so that a new
release's facts are read before anyone writes them (maintain/reading.py)
and rules.toml is checked against every pinned release
(tests/integration/doctor/test_releases_real.py).

  facts    one probe a Rules field (PROBES), what doctor takes as the same
           in every release (SAME), what no probe can read (NOT_PROBED)
  anchors  what a probe reads of a release (a file, a class or function in
           it) and whether the release has it; where a scope went
  modelcode  serving.toml's facts (serving.py): the file and class serving
           each family architecture per platform (the registry, the
           package's dispatch), what each serving file does with aux ids
  speculative  the probes of the serve command's speculative config and of
           who reads a draft's use_mla, which facts adds to PROBES

Why a package of its own: the readers serve the carry, not the preflight
(doctor reads the facts from rules.toml and never runs a probe), and they
are not the patch set's maintenance (maintain/), whose reading.py calls
them. The table's type and loader (rules.py, with rules.toml in data/) stay
in the core, not here as auditwheel keeps its policy's data and reader
together in policy/: the lock loads the table (`Lock.rules`) for doctor,
docs and carry alike, and a package of the libraries' layer cannot sit
below the lock. What the probes share with doctor (the MLA drafter classes)
is rules.py's too, so nothing here imports doctor."""
