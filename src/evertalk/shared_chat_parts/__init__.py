"""The parts `SharedChat` (shared_chat.py) is made of, one job each, over `Chat`'s: what it holds
(`state`), folding the chat's feed (`feed`), logging messages (`messages`, with the turn's
`fence`), building nodes (`building`), reading ahead off the event loop (`read_ahead`), and the
leases on nodes (`leases`). Each overrides the `Chat` methods of its job."""
