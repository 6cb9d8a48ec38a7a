"""A storage URL's password: kept off the command line, out of Hydra's printouts and out of every record.

`python -m ladder.search storage=postgresql://user:pw@host/db` moves the password to `$LADDER_STORAGE_PASSWORD`
before Hydra sees the command line (`without_password`); the storage is opened with it put back (`with_password`);
every message shows `redact`'s form. Pure: an environment mapping is passed in.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping

PASSWORD_VAR = "LADDER_STORAGE_PASSWORD"  # a storage URL's password, kept off the command line and Hydra's printouts
SECRET_KEYS = ("password", "passwd", "pwd", "secret", "token")  # query keys whose values are never shown


def redact(url: str | None) -> str:
    """The URL with its password (and any secret-looking query value) replaced by ***; "" for none."""
    if not url:
        return ""
    parts = urllib.parse.urlsplit(url)
    head, query = url.split("?", 1) if "?" in url else (url, "")
    if parts.password is not None:
        user, _, host = parts.netloc.rpartition("@")
        head = head.replace(parts.netloc, f"{user.split(':', 1)[0]}:***@{host}", 1)
    pairs = [(k, "***" if k.lower() in SECRET_KEYS else v) for k, v in urllib.parse.parse_qsl(query, True)]
    return head + ("?" + urllib.parse.urlencode(pairs, safe="*/:") if query else "")


def without_password(url: str) -> tuple[str, str | None]:
    """The URL less its password (user@host), and the password (None if it had none)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url, None
    user, _, host = parts.netloc.rpartition("@")
    return url.replace(parts.netloc, f"{user.split(':', 1)[0]}@{host}", 1), urllib.parse.unquote(parts.password)


def with_password(url: str, environ: Mapping[str, str] = os.environ) -> str:
    """The URL with `$LADDER_STORAGE_PASSWORD` as its password, where it names a user but no password."""
    parts, password = urllib.parse.urlsplit(url), environ.get(PASSWORD_VAR)
    if not password or "://" not in url or parts.username is None or parts.password is not None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    return url.replace(parts.netloc, f"{user}:{urllib.parse.quote(password, safe='')}@{host}", 1)


def scrub(text: str, url: str) -> str:
    """`text` (a driver's message, which may quote the URL) with the URL's password replaced by ***."""
    password = urllib.parse.urlsplit(url).password
    for form in {password, urllib.parse.unquote(password)} if password else ():
        text = text.replace(form, "***")
    return text
