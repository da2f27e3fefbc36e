"""`evertalk serve`: the one long-lived owner of a home's chat, serving clients on a Unix socket.

- `paths.py`: where it listens and logs (shared with the clients);
- `server.py`: the socket, the sessions of its clients and the fan-out of the agent's events.
"""
