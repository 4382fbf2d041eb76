"""What `vpatch wheel` and `vpatch verify-wheel` do with a vLLM wheel, one
module a job: the format read and checked (file), the series applied to the
files a wheel ships (patch), the overlay wheel written (overlay, zipcopy), a
wheel built from a patched tree (build), and a wheel verified against the
series and a CUDA architecture (verify, fatbin)."""
