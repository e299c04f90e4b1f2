"""The Kubernetes vocabulary every stage reads: the objects as loaded, and the API's own value rules."""
