"""Everything that speaks HTTP, as each reader is handed it: the deadline
of a run's reads, huggingface_hub's hooks and the range read.

  deadline   one deadline for a run's reads on daemon threads, whatever the
             server does, and Ctrl-C (Budget, Reads, Kind)
  hubclient  huggingface_hub's session with doctor's hooks: the deadline on
             every request and chunk, requests of its own refused
  httprange  one HTTP range read with one rule for an answer, over the
             caller's client

The readers live with what they read: the hub (doctor/hub.py) and a
running vLLM server (postflight/server.py) under one deadline of a Kind of
their own.
"""
