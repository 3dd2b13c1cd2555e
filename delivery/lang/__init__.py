"""The workflow language: DOT text → tokens → syntax tree (no meaning attached yet)."""
