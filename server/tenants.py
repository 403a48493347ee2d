"""API keys -> tenants: parsing the configuration and authenticating a request."""

from __future__ import annotations

import logging
from collections.abc import Mapping
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


def parse_api_keys(text: str, *, source: str = "VERILOOP_API_KEYS") -> dict[str, str]:
    """``"key1:tenantA,key2:tenantB"`` (commas or newlines; ``#`` starts a comment) -> {key: tenant}."""
    keys: dict[str, str] = {}
    for raw in text.replace(",", "\n").splitlines():
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        key, sep, tenant = entry.rpartition(":")
        key, tenant = key.strip(), tenant.strip()
        if not sep or not key or not tenant:
            raise TenantConfigError(f"{source}: expected 'key:tenant', got {entry[:40]!r}")
        if "." in tenant:
            raise TenantConfigError(f"{source}: tenant names cannot contain '.', got {tenant!r}")
        if keys.get(key, tenant) != tenant:
            raise TenantConfigError(
                f"{source}: one key is given to two tenants ({keys[key]!r}, {tenant!r})"
            )
        keys[key] = tenant
    return keys


def load_api_keys(env_value: str | None, file: Path | None) -> dict[str, str]:
    """Keys from the environment variable and from a file (same format), merged."""
    keys = parse_api_keys(env_value or "")
    if file is not None:
        try:
            text = file.read_text()
        except OSError as exc:
            raise TenantConfigError(f"VERILOOP_API_KEYS_FILE: cannot read {file}: {exc}") from exc
        for key, tenant in parse_api_keys(text, source=str(file)).items():
            if keys.get(key, tenant) != tenant:
                raise TenantConfigError(f"{file}: one key is given to two tenants")
            keys[key] = tenant
    return keys


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
    tenant = api_keys.get(key)
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
