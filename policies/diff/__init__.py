"""`make diff BASE=<ref>`: render every overlay (and argocd/) at a git ref and in the working tree (or a second ref)
with the same code, and say what changes: objects added, removed and changed, and the torchrun topology per overlay.
The pull-request workflow posts the markdown form as a comment.

Four modules, one step each: trees.py (a git ref or the working tree, rendered), objects.py (the comparison),
output.py (text, markdown, JSON) and __main__.py (the command line)."""
