"""Reading and reshaping the past: time travel, forks, erasure and pruning, moving a ledger."""
