"""Golden outputs of the current code over fixed corpora (see README.md here)."""
