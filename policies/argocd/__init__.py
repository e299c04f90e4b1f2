"""Argo CD: Applications and ApplicationSets as it expands them, its health scripts, and the repository's identity."""
