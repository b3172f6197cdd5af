"""The pure steps of a conversation: changesets, the view and its rules, hooks, reductions.

Nothing here does I/O or holds a store.
"""
