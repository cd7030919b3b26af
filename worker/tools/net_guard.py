"""What the HTTP tools may reach: public addresses, and private ones the operator allowed.

Specs and models are strangers; the worker sits next to cloud metadata (169.254.169.254),
Redis and other private services. Every host is resolved and every address it resolves
to is checked: loopback, private (RFC 1918, IPv6 ULA), link-local, shared, reserved,
multicast and unspecified addresses are refused unless DURABLE_TOOL_HTTP_ALLOW names the
host, the address or a CIDR holding it. The check runs where the socket is opened (a
network backend under httpx), and the socket goes to the very address that was checked,
so a DNS answer that changes between check and connect (rebinding) gains nothing, and
every redirect hop and re-used connection is covered too.
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import socket
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from strands_durable.addresses import IPAddress, IPNetwork, literal_address, refused_address
from strands_durable.settings import ToolPolicy

__all__ = [
    "MAX_REDIRECTS",
    "MAX_RESPONSE_BYTES",
    "FetchFailed",
    "HttpReply",
    "Reach",
    "ToolRefused",
    "check_url",
    "guarded_async_transport",
    "guarded_client",
    "guarded_request",
    "refused_address",
    "resolve_allowed",
]

MAX_RESPONSE_BYTES = 1024 * 1024
MAX_REDIRECTS = 5
ALLOW_SETTING = "DURABLE_TOOL_HTTP_ALLOW"


class ToolRefused(ValueError):
    """A request the tool policy forbids; the message says why and what would allow it."""


class FetchFailed(Exception):
    """A request that was allowed but failed (timeout, connection, protocol); one line."""


@dataclass(frozen=True)
class HttpReply:
    status: int
    url: str
    headers: dict[str, str]
    body: str  # decoded text, with a note at the end when it was cut at the byte cap
    truncated: bool


@dataclass(frozen=True)
class Reach:
    """The private hosts (name, IP or CIDR) one guard lets through, and the setting that
    lists them (named in refusals): the tools' DURABLE_TOOL_HTTP_ALLOW, or a keyless
    model provider's DURABLE_<PROVIDER>_HOSTS."""

    allow: tuple[str, ...]
    setting: str


Policy = ToolPolicy | Reach


def _reach(policy: Policy) -> Reach:
    return policy if isinstance(policy, Reach) else Reach(policy.http_allow, ALLOW_SETTING)


def _allow_entries(reach: Reach) -> tuple[set[str], list[IPNetwork]]:
    names: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in reach.allow:
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.rstrip(".").lower())
    return names, networks


def resolve_allowed(host: str, port: int, policy: Policy) -> list[IPAddress]:
    """Every address `host` resolves to, all of them allowed, or ToolRefused."""
    name = host.strip("[]").rstrip(".").lower()
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ToolRefused(f"cannot resolve host {host!r}: {exc}") from None
    addresses: list[IPAddress] = []
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if addr not in addresses:
            addresses.append(addr)
    if not addresses:
        raise ToolRefused(f"host {host!r} resolves to no address")
    reach = _reach(policy)
    names, networks = _allow_entries(reach)
    if name in names:
        return addresses
    for addr in addresses:
        if refused_address(addr) and not any(addr in net for net in networks
                                             if net.version == addr.version):
            shown = "" if literal_address(name) == addr else f"{host} resolves to "
            raise ToolRefused(
                f"refused: {shown}{addr}, a private, loopback, link-local or reserved "
                f"address; the operator may allow it in {reach.setting} (host, IP or CIDR)")
    return addresses


def _url_parts(url: str) -> tuple[str, int]:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ToolRefused(f"invalid URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise ToolRefused(f"only http and https URLs are allowed, not {url!r}")
    if not parsed.raw_host:
        raise ToolRefused(f"URL {url!r} has no host")
    # raw_host: the ASCII (IDNA) form, the one the connection uses.
    host = parsed.raw_host.decode("ascii")
    return host, parsed.port or (443 if parsed.scheme == "https" else 80)


def check_url(url: str, policy: Policy) -> None:
    """Refuse (ToolRefused) a URL that is not http(s) or whose host resolves to an
    address the policy does not allow."""
    host, port = _url_parts(url)
    resolve_allowed(host, port, policy)


class _GuardedBackend(httpcore.NetworkBackend):
    """Connects only to checked addresses: resolution, check and connect in one place."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        failure: Exception | None = None
        for addr in resolve_allowed(host, port, self._policy):
            try:
                return self._inner.connect_tcp(str(addr), port, timeout=timeout,
                                               local_address=local_address,
                                               socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # resolve_allowed never returns an empty list
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        raise ToolRefused("refused: unix sockets are not reachable by tools")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _GuardedTransport(httpx.HTTPTransport):
    def __init__(self, policy: Policy) -> None:
        # trust_env=False: no proxy from HTTP(S)_PROXY (it would bypass the address
        # check) and no credentials from ~/.netrc.
        super().__init__(trust_env=False)
        # httpx has no public hook for the network backend: swap its (still unused)
        # pool for one that connects through the guard.
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(),
                                             network_backend=_GuardedBackend(policy))


def guarded_client(policy: Policy, **options: Any) -> httpx.Client:
    """An httpx client whose every connection is checked against the policy where it is
    opened (ToolRefused), with no proxy or netrc from the environment."""
    return httpx.Client(transport=_GuardedTransport(policy), trust_env=False, **options)


class _GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    """The async twin of _GuardedBackend, for clients a provider SDK drives on the event
    loop (a keyless model server a spec names): resolution (in a thread: getaddrinfo
    blocks), check and connect in one place, the socket to the checked address."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None
                          ) -> httpcore.AsyncNetworkStream:
        addresses = await asyncio.to_thread(resolve_allowed, host, port, self._policy)
        failure: Exception | None = None
        for addr in addresses:
            try:
                return await self._inner.connect_tcp(str(addr), port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # resolve_allowed never returns an empty list
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None
                                  ) -> httpcore.AsyncNetworkStream:
        raise ToolRefused("refused: unix sockets are not reachable from a spec")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


# Headers that carry a credential: a keyless server a spec names gets none of them.
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "api-key",
                      "x-goog-api-key")


class BodyTooLarge(ValueError):
    """A response body past the bound its client set (or compressed, where it asked for
    none: a small body could inflate past any bound)."""


class CappedBody(httpx.AsyncByteStream):
    """A response's body that fails with `too_large()` past `max_bytes` instead of
    growing on."""

    def __init__(self, inner: httpx.AsyncByteStream, max_bytes: int,
                 too_large: Callable[[], Exception]) -> None:
        self.inner = inner
        self.max_bytes = max_bytes
        self.too_large = too_large

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > self.max_bytes:
                raise self.too_large()
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _GuardedAsyncTransport(httpx.AsyncHTTPTransport):
    def __init__(self, policy: Policy, strip_credentials: bool,
                 max_body_bytes: int | None) -> None:
        super().__init__(trust_env=False)  # no proxy that would bypass the check
        self._pool = httpcore.AsyncConnectionPool(ssl_context=httpx.create_ssl_context(),
                                                  network_backend=_GuardedAsyncBackend(policy))
        self._strip = strip_credentials
        self._max_body = max_body_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._strip:
            for name in CREDENTIAL_HEADERS:
                request.headers.pop(name, None)
        if self._max_body is None:
            return await super().handle_async_request(request)
        request.headers["accept-encoding"] = "identity"
        response = await super().handle_async_request(request)
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise BodyTooLarge(f"the response is compressed ({encoding[:20]!r}) though "
                               "none was asked for")
        limit = self._max_body
        body = response.stream
        assert isinstance(body, httpx.AsyncByteStream)  # an async transport's
        response.stream = CappedBody(body, limit, lambda: BodyTooLarge(
            f"the response is longer than {limit:,} bytes"))
        return response


def guarded_async_transport(policy: Policy, *, strip_credentials: bool = False,
                            max_body_bytes: int | None = None) -> httpx.AsyncHTTPTransport:
    """An httpx async transport whose every connection (redirect hops and re-used
    connections included) goes only to addresses the policy allows, checked where the
    socket is opened; ToolRefused otherwise. `strip_credentials`: requests lose every
    credential header first (a keyless server's SDK may still add one: ollama sends
    OLLAMA_API_KEY to any host it is given). `max_body_bytes`: each response's body is
    read uncompressed and fails (BodyTooLarge) past it."""
    return _GuardedAsyncTransport(policy, strip_credentials, max_body_bytes)


def _decoder(encoding: str) -> Callable[[bytes, int], bytes]:
    """Decompress at most `limit` bytes per chunk: a small gzip body cannot grow past
    the cap in memory."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return lambda data, limit: data[:limit]
    if encoding in ("gzip", "x-gzip", "deflate"):
        # 32 + MAX_WBITS: zlib or gzip header, detected.
        inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)
        return lambda data, limit: inflater.decompress(data, max(limit, 1))
    raise FetchFailed(f"the response uses content-encoding {encoding!r}, which is not decoded")


def _read_body(response: httpx.Response, max_bytes: int, deadline: float) -> tuple[bytes, bool]:
    decode = _decoder(response.headers.get("content-encoding", ""))
    body = bytearray()
    for chunk in response.iter_raw():
        body += decode(chunk, max_bytes + 1 - len(body))
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the response did not complete within the timeout")
    return bytes(body), False


def _reply(response: httpx.Response, max_bytes: int, deadline: float) -> HttpReply:
    raw, truncated = _read_body(response, max_bytes, deadline)
    charset = response.charset_encoding or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        charset = "utf-8"
    text = raw.decode(charset, errors="replace")
    if truncated:
        text += f"\n[truncated: the response is longer than {max_bytes} bytes]"
    return HttpReply(status=response.status_code, url=str(response.url),
                     headers=dict(response.headers), body=text, truncated=truncated)


def _exchange(client: httpx.Client, request: httpx.Request, policy: ToolPolicy,
              follow_redirects: bool, max_bytes: int, deadline: float) -> HttpReply:
    for _hop in range(MAX_REDIRECTS + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise httpx.ConnectTimeout("no time left for the next request")
        request.extensions["timeout"] = httpx.Timeout(left).as_dict()
        response = client.send(request, stream=True, follow_redirects=False)
        try:
            hop = response.next_request if follow_redirects else None
            if hop is None:
                return _reply(response, max_bytes, deadline)
        finally:
            response.close()
        check_url(str(hop.url), policy)  # each hop's target, before it is requested
        request = hop
    raise FetchFailed(f"more than {MAX_REDIRECTS} redirects")


def guarded_request(method: str, url: str, policy: ToolPolicy, *,
                    headers: Mapping[str, str] | None = None,
                    content: str | bytes | None = None, json: Any = None,
                    params: Mapping[str, Any] | None = None, timeout_s: float = 30.0,
                    follow_redirects: bool = False,
                    max_bytes: int = MAX_RESPONSE_BYTES) -> HttpReply:
    """One HTTP exchange within the policy: ToolRefused when a URL (or a redirect's
    target) is not allowed, FetchFailed when the exchange fails; `timeout_s` bounds the
    whole exchange, redirects included (give or take one read), the body is cut at
    `max_bytes`."""
    check_url(url, policy)
    deadline = time.monotonic() + timeout_s
    try:
        with guarded_client(policy) as client:
            request = client.build_request(method, url, headers=headers, content=content,
                                           json=json, params=params)
            # Compressed bodies could outgrow the cap before it is applied: ask for none.
            request.headers["Accept-Encoding"] = "identity"
            return _exchange(client, request, policy, follow_redirects, max_bytes, deadline)
    except (ToolRefused, FetchFailed):
        raise
    except httpx.TimeoutException:
        raise FetchFailed(f"the request timed out after {timeout_s:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, ValueError) as exc:
        # ValueError: a header or body httpx cannot encode.
        raise FetchFailed(f"the request failed: {type(exc).__name__}: {exc}") from None
