"""The Python client: the HTTP API's operations (or the same operations on a Redis or
the local store directly) as typed, documented methods, sync and async."""
