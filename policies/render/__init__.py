"""Reading the repository: files, kustomizations, gitops.yaml, pending edit journals, and kustomize's output."""
