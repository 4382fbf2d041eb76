"""What `vpatch doctor` says before a deployment loads (the preflight):
what the environment's vLLM release will do with an EAGLE-3 pair and its
serve command. Nothing here imports vLLM or torch or reads tensor data.

What it reads:
  configs      a target's and a drafter's config.json, as vLLM reads them
  weights      the drafter's tensors, from its safetensors headers alone
  serve        the serve command, as vLLM parses it
  environment  the serving environment's vLLM and what `vpatch check` says
  hub          where a model lives: a folder, or a hub id read through
               huggingface_hub (hub_errors: its errors as one line; cached:
               the local cache, and the headers kept there; tidy: what a
               failed read takes back from the cache), within one deadline
               for its reads (network/: deadline, hubclient)

What follows from it:
  behaviour    what a release does with a pair, from its facts (rules.py)
  served       the code that serves the target: the platform, the file and
               class, what it does with aux ids (serving.py), the ids a
               DFlash or DSpark drafter is fed
  defects      the defects vpatch's series fixes, each by its key
  conventions  the aux layer ids' two conventions
  pair         the pair and what follows from it
  checks/      one function a check, by family, and the report they make
  report       the findings, their severities, the corrected serve command

The post-flight of a running server is postflight/, which uses the report,
the serve command and behaviour from here; the probes that
read a release's facts from its source (for `vpatch carry`) are
releasefacts/."""
