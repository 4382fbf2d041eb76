"""What `vpatch doctor` reads about a deployment, without loading it: a
target's and a drafter's config.json, the drafter's safetensors headers, the
local Hugging Face cache, and what each vLLM release does with an EAGLE-3
pair (behaviour.py) and which of its defects vpatch's series fixes
(defects.py). Nothing here imports vLLM or torch or reads tensor data."""
