"""The service's clients: the connection, `-p`, and how `-p` prints."""
