"""The compactor: builds the tree's nodes with model calls (SPEC §4).

`tasks` holds the texts a compaction sends; `line` holds the size loop that turns replies into a
stored line.
"""
