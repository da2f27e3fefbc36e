"""The parts `Chat` (chat.py) is made of, one job each: what it holds and whether it takes
changes (`state`), writing (`writing`), opening and closing (`opening`), reading the log and the
lines (`reading`), the memory's view and queues (`view`), and what the service awaits, which a
chat kept in a database does otherwise (`hooks`). Each part is a class of a few methods that
the next one up builds on; `Chat` is all of them, and `SharedChat` overrides some."""
