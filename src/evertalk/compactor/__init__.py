"""The compactor: builds the tree's nodes with model calls (SPEC §4).

`tasks` holds the texts a compaction sends; `line` holds the size loop that turns replies into a
stored line; `policy` decides what starts when (slots, failures, the pause and its probes, trust)
and whose fault a failed call is (`errors` holds ours), and `service` does the I/O it asks for.
"""
