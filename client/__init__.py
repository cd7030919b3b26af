"""The Python client: the HTTP API's operations (or the same operations on a Redis or
the local store directly) as typed, documented methods, sync and async.

```python
from strands_durable.client import Client

with Client("http://127.0.0.1:8080") as client:
    sid = client.submit(Path("examples/chain-research.yaml")).session_id
    print(client.wait(sid, timeout=120).final_response)
```"""

from strands_durable.client.aio import AsyncClient
from strands_durable.client.errors import (
    ApiConflict,
    ApiInvalidInput,
    ApiNotFound,
    ApiUnavailable,
    ClientError,
    ConnectionFailed,
    Forbidden,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    Unauthorized,
    WaitTimeout,
)
from strands_durable.client.sync import Client

__all__ = [
    "ApiConflict", "ApiInvalidInput", "ApiNotFound", "ApiUnavailable", "AsyncClient",
    "Client", "ClientError", "ConnectionFailed", "Forbidden", "PayloadTooLarge", "RateLimited",
    "ServerError", "Unauthorized", "WaitTimeout",
]
