"""Where the trainers' adapters (TRL, verl, Prime Intellect verifiers) find the gateway when
their config names no URL: one port setting moves it for them too."""

from __future__ import annotations

import pytest

from tribunal.integrations._gateway import gateway_access


def test_the_adapters_default_gateway_follows_its_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL's, verl's and verifiers' adapters call the local gateway where its port setting
    put it when no URL is given."""
    monkeypatch.delenv("TRIBUNAL_GATEWAY_URL", raising=False)
    monkeypatch.setenv("TRIBUNAL_GATEWAY_PORT", "9100")
    assert gateway_access(None, None)[0] == "http://127.0.0.1:9100"
    monkeypatch.setenv("TRIBUNAL_GATEWAY_URL", "http://gw.example:7")
    assert gateway_access(None, None)[0] == "http://gw.example:7"
