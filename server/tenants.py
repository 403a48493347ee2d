"""API keys -> tenants: parsing the configuration and authenticating a request."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

LOCAL_TENANT = "local"
"""The only tenant when no API keys are configured."""

API_KEY_HEADER = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="An API key from VERILOOP_API_KEYS."
)
BEARER = HTTPBearer(auto_error=False, description="The same API key as a bearer token.")

log = logging.getLogger("veriloop.server")


class TenantConfigError(ValueError):
    """The API key configuration cannot be read."""


HASH_PREFIX = "sha256:"
"""A key given as its hash: ``sha256:<64 hex digits>:tenant`` (what a migrated key file holds)."""
_HEX = frozenset("0123456789abcdef")


def key_digest(key: str) -> str:
    """The sha256 of an API key, hexadecimal: the only form the service keeps."""
    return hashlib.sha256(key.encode()).hexdigest()


def _given_digest(key: str) -> str | None:
    """The digest of a key written as ``sha256:<hex>``, else None (a clear key)."""
    digest = key.removeprefix(HASH_PREFIX).lower()
    if key.startswith(HASH_PREFIX) and len(digest) == 64 and set(digest) <= _HEX:
        return digest
    return None


def _stored_form(key: str) -> str:
    """A configured key's digest: as given when written as ``sha256:<hex>``, else its hash."""
    return _given_digest(key) or key_digest(key)


class ApiKeys(Mapping[str, str]):
    """API keys -> tenants, held as sha256 digests only (``{digest: tenant}``).

    A key is checked by hashing what the caller sent and comparing it with every digest in
    constant time (:func:`hmac.compare_digest`); no key is kept in clear, so nothing the service
    stores, logs or dumps holds one."""

    def __init__(self, digests: Mapping[str, str] | None = None) -> None:
        self._digests: dict[str, str] = dict(digests or {})

    @classmethod
    def of(cls, keys: Mapping[str, str]) -> ApiKeys:
        """``keys`` (clear keys or ``sha256:<hex>`` digests -> tenant) hashed; ApiKeys unchanged."""
        if isinstance(keys, ApiKeys):
            return keys
        return cls({_stored_form(key): tenant for key, tenant in keys.items()})

    def tenant(self, key: str) -> str | None:
        """The tenant of ``key``, or None; every digest is compared, in constant time."""
        digest = key_digest(key).encode()
        found = None
        for stored, tenant in self._digests.items():
            if hmac.compare_digest(stored.encode(), digest):
                found = tenant
        return found

    def __getitem__(self, digest: str) -> str:
        return self._digests[digest]

    def __iter__(self) -> Iterator[str]:
        return iter(self._digests)

    def __len__(self) -> int:
        return len(self._digests)

    def __repr__(self) -> str:
        return f"ApiKeys({len(self)} key(s) for {len(set(self.values()))} tenant(s))"


def parse_api_keys(text: str, *, source: str = "VERILOOP_API_KEYS") -> ApiKeys:
    """``"key1:tenantA,key2:tenantB"`` (commas or newlines; ``#`` starts a comment) -> their digests.

    A key may be given as its hash, ``sha256:<64 hex digits>``; either way only digests come back."""
    keys: dict[str, str] = {}
    for raw in text.replace(",", "\n").splitlines():
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        key, sep, tenant = entry.rpartition(":")
        key, tenant = key.strip(), tenant.strip()
        if not sep or not key or not tenant:
            raise TenantConfigError(f"{source}: expected 'key:tenant', got {_redacted(entry)}")
        if "." in tenant:
            raise TenantConfigError(f"{source}: tenant names cannot contain '.', got {tenant!r}")
        digest = _stored_form(key)
        if keys.get(digest, tenant) != tenant:
            raise TenantConfigError(
                f"{source}: one key is given to two tenants ({keys[digest]!r}, {tenant!r})"
            )
        keys[digest] = tenant
    return ApiKeys(keys)


def load_api_keys(env_value: str | None, file: Path | None) -> ApiKeys:
    """Keys from the environment variable and from a file (same format), merged, as digests.

    A file that holds keys in clear is rewritten with their digests (``sha256:<hex>:tenant``,
    comments kept, mode 0600): the clear keys are the callers' to keep, not the service's."""
    keys = dict(parse_api_keys(env_value or ""))
    if file is not None:
        try:
            text = file.read_text()
        except OSError as exc:
            raise TenantConfigError(f"VERILOOP_API_KEYS_FILE: cannot read {file}: {exc}") from exc
        for digest, tenant in parse_api_keys(text, source=str(file)).items():
            if keys.get(digest, tenant) != tenant:
                raise TenantConfigError(f"{file}: one key is given to two tenants")
            keys[digest] = tenant
        migrate_key_file(file, text)
    return ApiKeys(keys)


def migrate_key_file(file: Path, text: str) -> int:
    """Rewrite ``file`` (whose content is ``text``) with every clear key replaced by its digest;
    how many were replaced (0: the file is left as it is). A file the service may not write is
    left too, with a warning."""
    lines, replaced = [], 0
    for line in text.splitlines(keepends=True):
        body, hash_mark, comment = line.partition("#")
        parts = []
        for entry in body.split(","):
            key, sep, tenant = entry.rpartition(":")
            stripped = key.strip()
            if sep and stripped and _given_digest(stripped) is None:
                lead = key[: len(key) - len(key.lstrip())]
                entry = f"{lead}{HASH_PREFIX}{key_digest(stripped)}:{tenant}"
                replaced += 1
            parts.append(entry)
        lines.append(",".join(parts) + hash_mark + comment)
    if not replaced:
        return 0
    temp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("".join(lines))
        os.replace(temp, file)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        log.warning(
            "%s holds %d API key(s) in clear and cannot be rewritten: %s", file, replaced, exc
        )
        return 0
    log.warning("%s: %d API key(s) in clear replaced by their sha256 digests", file, replaced)
    return replaced


def _redacted(entry: str) -> str:
    """A configuration entry for an error message, with no more than a key's first characters."""
    return repr(entry[:4] + "...") if len(entry) > 4 else repr(entry)


def warn_if_open(api_keys: Mapping[str, str]) -> None:
    """Say loudly at start-up that the service has no authentication."""
    if api_keys:
        log.info(
            "veriloop service: %d API key(s) for %d tenant(s)",
            len(api_keys),
            len(set(api_keys.values())),
        )
        return
    log.warning(
        "\n%s\nNO API KEYS CONFIGURED: every caller is the single tenant %r and nothing is authenticated.\n"
        "Set VERILOOP_API_KEYS='key1:tenantA,key2:tenantB' (or VERILOOP_API_KEYS_FILE) before exposing this port.\n%s",
        "!" * 78,
        LOCAL_TENANT,
        "!" * 78,
    )


def scoped_id(tenant: str, name: str) -> str:
    """A client-chosen id inside its tenant's namespace, for threads and locks: ``<tenant>:<name>``.

    A tenant name never holds ``:`` (it is what follows an API key's last ``:``), so two tenants'
    ids never meet, and none meets a task's thread (a bare hexadecimal uuid).
    """
    return f"{tenant}:{name}"


def tenant_for(api_keys: Mapping[str, str], key: str | None) -> str:
    """The tenant of an API key; 401 when it is missing or unknown (no keys configured: the local tenant)."""
    if not api_keys:
        return LOCAL_TENANT
    if not key:
        raise HTTPException(
            401,
            "missing API key: send X-API-Key or Authorization: Bearer",
            {"WWW-Authenticate": "Bearer"},
        )
    tenant = ApiKeys.of(api_keys).tenant(key)
    if tenant is None:
        raise HTTPException(401, "unknown API key", {"WWW-Authenticate": "Bearer"})
    return tenant


def request_api_key(request: Request) -> str | None:
    """The key a request carries: ``X-API-Key``, else ``Authorization: Bearer <key>``."""
    key = request.headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


async def current_tenant(
    request: Request,
    _api_key: Annotated[str | None, Depends(API_KEY_HEADER)],
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> str:
    """FastAPI dependency: the caller's tenant (keys in ``app.state.api_keys``; the two schemes document the headers)."""
    return tenant_for(request.app.state.api_keys, request_api_key(request))
