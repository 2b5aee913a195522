"""What files a run's message may carry into the app: how many, and image URLs on public hosts only.

Every door that takes attachments (ACP and A2A file parts, ``attachments=`` of the services) stores them
through :func:`robotlab_django.runs.records.check_attachments`, which applies this policy before anything is
written:

* at most ``ROBOTLAB["MAX_ATTACHMENTS"]`` files (20 by default), counted before any is decoded;
* an image URL's host must resolve to public addresses only. The model's provider fetches an image URL,
  and for some providers litellm fetches it on this server; a URL on ``169.254.169.254`` (cloud
  metadata), a loopback, private, link-local, shared, multicast or reserved address would make this
  server, or the provider, read a network the sender cannot. Literal addresses in every spelling the
  resolver takes (``2130706433``, ``0x7f.1``, ``[::ffff:127.0.0.1]``) are checked as what they resolve to.

A host name that does not resolve here passes: nothing fetched from this server reaches it. A name that
resolves to a public address when checked and a private one later (DNS rebinding) is not caught here;
send images as bytes, not URLs, where that matters.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping, Sized
from pathlib import Path
from urllib.parse import urlsplit

from robotlab.attachments import Attachment
from robotlab_django.conf import app_settings

__all__ = ["PrivateAttachmentURLError", "TooManyAttachmentsError", "check_count", "check_urls", "non_public_address",
           "resolved_addresses"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64's well-known prefix).
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class TooManyAttachmentsError(ValueError):
    """A run's message carries more files than ``ROBOTLAB["MAX_ATTACHMENTS"]``."""


class PrivateAttachmentURLError(ValueError):
    """An image URL's host is (or resolves to) an address that is not public."""


def check_count(items: object) -> None:
    """Refuse more than ``ROBOTLAB["MAX_ATTACHMENTS"]`` files; one item (a path, a URL, a dict) counts as one.

    Raises:
        TooManyAttachmentsError: there are more.
    """
    if items is None or isinstance(items, str | bytes | bytearray | Path | Mapping | Attachment):
        return
    limit = app_settings.MAX_ATTACHMENTS
    count = len(items) if isinstance(items, Sized) else None
    if limit is not None and count is not None and count > limit:
        raise TooManyAttachmentsError(f"The message carries {count} files; the limit is {limit} "
                                      "(ROBOTLAB['MAX_ATTACHMENTS']). Send fewer files in one message.")


def check_urls(files: Iterable[Attachment]) -> None:
    """Refuse an image URL whose host is, or resolves to, an address that is not public.

    Raises:
        PrivateAttachmentURLError: naming the attachment, the host and the address.
    """
    for file in files:
        if file.url is None:
            continue
        try:
            parts = urlsplit(file.url)
            host, port = parts.hostname, parts.port
        except ValueError:
            raise PrivateAttachmentURLError(f"Attachment {file.label}: its URL is malformed.") from None
        if not host:
            raise PrivateAttachmentURLError(f"Attachment {file.label}: its URL has no host.")
        for address in resolved_addresses(host, port):
            reason = non_public_address(address)
            if reason:
                raise PrivateAttachmentURLError(
                    f"Attachment {file.label}: its host {host} is not a public address ({address} is {reason}); "
                    "only images on public hosts can be sent as URLs. Attach the image's bytes instead.")


def resolved_addresses(host: str, port: int | None) -> list[IPAddress]:
    """Every address ``host`` resolves to here (``[]`` when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    found: list[IPAddress] = []
    for info in infos:
        try:
            found.append(ipaddress.ip_address(str(info[4][0]).split("%")[0]))
        except ValueError:
            continue
    return found


def non_public_address(address: IPAddress) -> str | None:
    """Why ``address`` is not public (``"loopback"``, ``"link-local"``, ``"private"``...), or ``None`` if it is."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in _NAT64 else None)
        if embedded is not None:
            return non_public_address(embedded)
    for reason, flag in (("loopback", address.is_loopback), ("link-local", address.is_link_local),
                         ("unspecified", address.is_unspecified), ("multicast", address.is_multicast),
                         ("private", address.is_private), ("reserved", address.is_reserved)):
        if flag:
            return reason
    return None if address.is_global else "not globally routable"
