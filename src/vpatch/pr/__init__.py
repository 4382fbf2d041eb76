"""The vLLM pull request of what upstream still lacks (`vpatch pr`).

candidates  which patches to send, and their titles in vLLM
body        the commits' messages, the pull request's title, PR_BODY.md
draft       the target tree, the port onto a branch, series/ and
            PR_BODY.md written, the commands to open the pull request
"""
