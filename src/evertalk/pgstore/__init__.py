"""The chat in PostgreSQL (SPEC §13): the shared store of a chat used from several machines.

`PgChat` (pgchat.py) is the way in; `connect` (connect.py) opens a connection with the schema
applied; `transfer` moves a chat between the file store and a database. This package's
__init__ imports nothing: psycopg is loaded only by the modules that talk to a server, so that
commands which never use a database (`evertalk memory status`, `evertalk -p` on files) do not
pay for it.
"""
