"""Fleet operations: hot reload, signed bundles, shared stores for counters and approvals.

Everything here does I/O (files, HTTP, SQLite, Redis) and sits at the edge: it imports the
engine and the model, never the other way round.
"""
