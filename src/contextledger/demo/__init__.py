"""The ``contextledger demo`` scenario: scripted tool-using agents, a stop, a restart, a report.

Runs on any ledger URL with the core loop only (no optional extras): see
:func:`~contextledger.demo.runner.run_demo`.
"""

from contextledger.demo.runner import DEFAULT_DEMO_URL, DemoOptions, DemoReport, SessionReport, run_demo

__all__ = ["DEFAULT_DEMO_URL", "DemoOptions", "DemoReport", "SessionReport", "run_demo"]
