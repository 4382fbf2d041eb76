"""What a maintainer does to the patch set, as libraries that several
commands share (`vpatch port`, `lint` and `docs` each call one, and
`vpatch carry` calls them all):

  port        carry a release's series to another, 3-way
  lint        the patch set is consistent and up to date
  docs        the docs' generated parts
  servingdocs the parts generated from serving.toml: the families and what
              each release's serving file does
  pin         a new release's pin (for a carry)
  reading     what a new release says of itself against the one before:
              doctor's facts (through releasefacts/) and every patch's
              probe (for a carry)
  workfolder  a carry's work folder: its own, locked, its last proposal
              and its stop kept
"""
