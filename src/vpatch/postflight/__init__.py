"""The post-flight of a running deployment (`vpatch doctor --server URL`):
a running vLLM server read over HTTP, and its speculative decoding judged.

  server   the server read: /version, /v1/models and /metrics, under one
           deadline for a run (Watch: one read, or two `--interval` apart)
  metrics  vLLM's /metrics page read into typed counters (Counters)
  judge    the figures of those counters, what they say (the findings and
           their thresholds), and the result the CLI prints (Postflight)

The preflight (doctor/) reads a deployment before it loads; this reads it
while it serves. It uses the preflight's parts, and never the other way:
the report's findings and severities, the serve command, what a release
does (behaviour). Its reads run on network/'s client and under its
deadline, as the hub's do. Tied to a deployment, commands/doctor.py runs
both and prints the preflight's findings with these.
"""
