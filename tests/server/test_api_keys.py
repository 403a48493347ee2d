"""API keys are kept and compared as sha256 digests; a key file in clear is migrated to digests."""

from __future__ import annotations

import hashlib
import logging
import stat

import pytest

from veriloop.server.settings import Settings
from veriloop.server.tenants import (
    ApiKeys,
    TenantConfigError,
    load_api_keys,
    parse_api_keys,
    tenant_for,
)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def test_keys_are_held_as_digests_and_still_authenticate() -> None:
    settings = Settings(api_keys={"key-alpha-123": "a", "key-beta-456": "b"})
    assert isinstance(settings.api_keys, ApiKeys)
    assert set(settings.api_keys) == {digest("key-alpha-123"), digest("key-beta-456")}
    assert "key-alpha" not in repr(settings)
    assert tenant_for(settings.api_keys, "key-alpha-123") == "a"
    assert tenant_for(settings.api_keys, "key-beta-456") == "b"
    with pytest.raises(Exception) as unknown:
        tenant_for(settings.api_keys, digest("key-alpha-123"))  # the digest is not the key
    assert unknown.value.status_code == 401


def test_a_key_may_be_configured_by_its_digest() -> None:
    keys = parse_api_keys(f"sha256:{digest('secret-1').upper()}:a, plain-2:b")
    assert ApiKeys.of(keys) is keys
    assert keys.tenant("secret-1") == "a"
    assert keys.tenant("plain-2") == "b"
    assert keys.tenant("sha256:" + digest("secret-1")) is None


def test_a_key_file_in_clear_is_rewritten_with_digests(tmp_path, caplog) -> None:
    file = tmp_path / "keys"
    file.write_text(
        "# operator's keys\nclear-key-one:alpha  # first\n"
        f"sha256:{digest('already')}:beta\nk2:gamma,k3:gamma\n"
    )
    file.chmod(0o644)
    with caplog.at_level(logging.INFO, logger="veriloop.server"):
        keys = load_api_keys("env-key:delta", file)
    assert {keys.tenant(k) for k in ("clear-key-one", "already", "k2", "k3", "env-key")} == {
        "alpha",
        "beta",
        "gamma",
        "delta",
    }
    text = file.read_text()
    assert "clear-key-one" not in text and "k2:" not in text and "k3:" not in text
    assert text.startswith("# operator's keys\n")
    assert f"sha256:{digest('clear-key-one')}:alpha  # first\n" in text
    assert f"sha256:{digest('k2')}:gamma,sha256:{digest('k3')}:gamma" in text
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert "clear-key-one" not in caplog.text and "env-key" not in caplog.text
    assert "3 API key(s) in clear replaced" in caplog.text
    # The rewritten file reads back to the same tenants and is left alone the second time.
    again = load_api_keys(None, file)
    assert dict(again) == {d: t for d, t in keys.items() if t != "delta"}
    assert file.read_text() == text


def test_a_key_file_the_service_cannot_write_still_loads(tmp_path, caplog) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    file = folder / "keys"
    file.write_text("clear:alpha\n")
    folder.chmod(0o500)
    try:
        with caplog.at_level(logging.WARNING, logger="veriloop.server"):
            keys = load_api_keys(None, file)
    finally:
        folder.chmod(0o700)
    assert keys.tenant("clear") == "alpha"
    if file.read_text() == "clear:alpha\n":  # root writes through a read-only folder's mode
        assert "cannot be rewritten" in caplog.text


def test_a_bad_entry_names_no_more_than_a_key_prefix() -> None:
    with pytest.raises(TenantConfigError) as bad:
        parse_api_keys("averysecretkeywithnotenant")
    assert "averysecretkey" not in str(bad.value)
    assert "'aver...'" in str(bad.value)
