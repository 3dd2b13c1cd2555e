"""delivery: run DOT-graph workflows that carry a ticket through pull requests.

Library entry points: `delivery.validation.loader.check_file` / `load_workflow` (read and validate a
workflow), `delivery.engine.runner.start_run` / `resume_run` (run one).
"""

__version__ = "0.1.0"
