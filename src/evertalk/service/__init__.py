"""`evertalk serve`: the one long-lived owner of a home's chat, serving clients on a Unix socket
(where it listens and logs: `protocol/paths.py`, shared with the clients).

- `server.py`: the socket, the sessions of its clients and the fan-out of the agent's events.
- `requests.py` (and `memory_requests.py`, `forget_requests.py`, `undo_requests.py`): a handler
  per request type, which sees the service only as `context.Served`; the server imports them,
  never the other way.
"""
