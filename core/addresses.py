"""Which IP addresses count as plainly public (pure; no resolution, no sockets).

One rule for every guard that keeps a spec's text away from the fleet's own network:
the HTTP tools' network guard (worker/tools/net_guard.py) and the model provider hosts a
spec may name (spec/provider_hosts.py).
"""

from __future__ import annotations

import ipaddress

__all__ = ["IPAddress", "IPNetwork", "literal_address", "refused_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_v4(addr: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries (mapped, 6to4, Teredo, NAT64): each is
    reachable through it, so each must pass the check too."""
    found = [v4 for v4 in (addr.ipv4_mapped, addr.sixtofour) if v4 is not None]
    if addr.teredo is not None:
        found += list(addr.teredo)
    if addr in _NAT64:
        found.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    return found


def refused_address(addr: IPAddress) -> bool:
    """True for every address that is not plainly public."""
    candidates: list[IPAddress] = [addr]
    if isinstance(addr, ipaddress.IPv6Address):
        candidates += _embedded_v4(addr)
    return any(not a.is_global or a.is_multicast or a.is_reserved or a.is_private
               or a.is_loopback or a.is_link_local or a.is_unspecified for a in candidates)


def literal_address(name: str) -> IPAddress | None:
    """`name` as an IP address when it is one written plainly (brackets and a zone
    dropped), else None."""
    try:
        return ipaddress.ip_address(name.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
