"""What a maintainer does to the patch set, as libraries that several
commands share (`vpatch port`, `lint` and `docs` each call one): port
(carry a release's series to another, 3-way), lint (the patch set is
consistent and up to date) and docs (the docs' generated parts); pin
(a new release's pin) and workfolder (a carry's work folder: its own,
locked, its last proposal and its stop kept) serve `vpatch carry`."""
