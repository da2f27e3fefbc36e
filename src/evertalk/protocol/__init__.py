"""The protocol between the service and its clients: events, requests, frames (no I/O), and
where a home's service listens and logs (`paths.py`, the one module here that touches files)."""
