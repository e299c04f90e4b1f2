"""Every command that writes the repository, through one pipeline (pipeline.apply)."""
