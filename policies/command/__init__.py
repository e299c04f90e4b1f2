"""What a container runs: shell words, shell scripts, and torchrun's command line."""
