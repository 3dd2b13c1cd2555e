"""delivery: run DOT-graph workflows that carry a ticket through pull requests.

Library entry points: `delivery.loader.check_file` / `load_workflow` (read and validate a
workflow), `delivery.runner.start_run` / `resume_run` (run one).
"""

__version__ = "0.1.0"
