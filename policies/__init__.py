"""Render, schema-validate and topology-check Kubernetes manifests for distributed PyTorch training."""
