"""Everything that speaks HTTP, as each reader is handed it: the client,
its credentials, the deadline of a run's reads, huggingface_hub's hooks and
the range read.

  session    vpatch's urllib client (proxies, TLS checks that cannot be
             turned off, the handlers a reader asks for: Unfollowed), and a
             body read under a cap and a clock that refuses one cut short
  auth       basic auth as pip sends it to a package index (the URL's,
             the index URL's on its host, netrc's), for the index's client
  deadline   one deadline for a run's reads on daemon threads, whatever the
             server does, and Ctrl-C (Budget, Reads, Kind)
  hubclient  huggingface_hub's session with doctor's hooks: the deadline on
             every request and chunk, requests of its own refused
  httprange  one HTTP range read with one rule for an answer, over the
             caller's client

The readers live with what they read, as pip's lazy_wheel is handed pip's
session: the package index (sources/index.py, with sources/lazy.py's
ranges and sources/cache.py's downloads on its client), the hub
(doctor/hub.py) and a running vLLM server (postflight/server.py, on a client
with no credentials that follows no redirect).
"""
