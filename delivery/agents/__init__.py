"""Agent backends: where agent and prompt stages send their prompts (SPEC §5)."""
