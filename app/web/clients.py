"""Who the client is: its address behind trusted proxies, and the budget it spends.

The limits, the connection guard and the access log all name the client this way.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence

from aiohttp import web
from multidict import istr

from ..config import Network
from ..keys import CONFIG

_PREFIX_64 = ((1 << 64) - 1) << 64  # the network half of an IPv6 address
X_FORWARDED_FOR = istr("X-Forwarded-For")  # as istr: the headers take it without folding


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address, with IPv4-mapped IPv6 unwrapped, or None when `text` is not one."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _parse_hop(entry: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An ``X-Forwarded-For`` entry's address: some proxies (Azure's gateways, for one)
    write the port too, as ``203.0.113.9:51234`` or ``[2001:db8::7]:443``; the port is
    not part of who the client is."""
    text = entry.strip()
    if text.startswith("["):
        text, closed, port = text[1:].partition("]")
        if not closed or (port and not (port[0] == ":" and _is_port(port[1:]))):
            return None
    elif text.count(":") == 1:
        text, _, port = text.partition(":")
        if not _is_port(port):
            return None
    return _parse_ip(text)


def _is_port(text: str) -> bool:
    """ASCII digits only: ``isdigit`` alone takes ``²`` or ``٣`` too."""
    return text.isascii() and text.isdigit()


def is_trusted(address: str, trusted: Sequence[Network]) -> bool:
    """Whether ``address`` is one of our proxies; an IPv4 proxy reaching a dual-stack
    socket shows as IPv4-mapped IPv6 (``::ffff:10.0.0.1``) and is trusted all the same."""
    parsed = _parse_ip(address)
    return parsed is not None and any(parsed in net for net in trusted)


@functools.lru_cache(maxsize=4096)  # parsing IPv6 costs about 10 µs; clients come back
def address_key(address: str) -> str:
    """The budget an address spends: itself, or its /64 for IPv6 (one subscriber's block).

    A single IPv6 host usually holds a whole /64, so counting each /128 apart would give
    it 2^64 budgets.
    """
    if ":" not in address:
        return address  # IPv4 (or unknown): the common case, without parsing
    parsed = _parse_ip(address)
    if isinstance(parsed, ipaddress.IPv6Address):
        prefix = ipaddress.IPv6Address(int(parsed) & _PREFIX_64)  # IPv6Network is slower
        return f"{prefix}/64"
    return address if parsed is None else str(parsed)


def forwarded_for(request: web.BaseRequest) -> str | None:
    """Every X-Forwarded-For line, in order, as if joined by commas (RFC 9110 5.3).

    A proxy that appends its own line (HAProxy's ``option forwardfor``) leaves the
    client's forged line first; reading only that one would let the client pick its address.
    """
    lines = request.headers.getall(X_FORWARDED_FOR, ())
    return ",".join(lines) if lines else None


def client_of(request: web.Request) -> str | None:
    """The client's address as the limits and the access log name it: the socket peer,
    or, behind a trusted proxy, the address the proxy forwarded (None: no peer known)."""
    peer = request.remote
    if peer is None:
        return None
    return client_address(peer, forwarded_for(request), request.app[CONFIG].networks())


def client_address(peer: str | None, forwarded_for: str | None, trusted: Sequence[Network]) -> str:
    """Who to rate-limit: the peer, or X-Forwarded-For's first untrusted hop behind our proxies."""
    if peer is None:
        return "unknown"
    if not forwarded_for or not trusted:
        return peer  # the common case, without parsing anything
    if not is_trusted(peer, trusted):
        return peer
    last = peer
    for entry in reversed(forwarded_for.split(",")):
        hop = _parse_hop(entry)
        if hop is None:
            return last
        if not any(hop in net for net in trusted):
            return str(hop)
        last = str(hop)
    return last
