"""The ledger's records: messages and content blocks, entries, summaries, reductions, state, errors.

Frozen, host-neutral and free of I/O; every other layer builds on these.
"""
