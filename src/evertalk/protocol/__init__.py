"""The protocol between the service and its clients: events, requests, frames (no I/O)."""
