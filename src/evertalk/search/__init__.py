"""Search over the chat: the pure parts (a query from what the user typed, the id of a hit, the
view lines that cover it). The index itself lives with the store."""
