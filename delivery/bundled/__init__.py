"""Data folders mapped in from the top of the repository: workflows/ and templates/."""
