"""strands-cli's PII masking of the trace artifact (its telemetry/redaction.py
RedactionEngine), applied when strands-cli applies it, when the spec writes
`telemetry.redact` with tool inputs or outputs redacted: to the string attributes of the
spans kept for `{{ TRACE }}`, and of their events (strands-cli leaves events, the
recorded messages, as they are). Emails, card numbers, SSNs and phone numbers are
masked everywhere; a long token-like word (the API-key heuristic) only under an
attribute whose name says key, token, secret, password or credential. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["PLACEHOLDER", "mask_attributes", "mask_text"]

PLACEHOLDER = "***REDACTED***"

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Z|a-z]{2,}\b", re.IGNORECASE)
_CARD = re.compile(r"\b\d{4}[- ]?\d{4}[- ]?\d{4}[- ]?\d{4}\b")
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_PHONE = re.compile(r"\b\d{3}[-.]?\d{3}[-.]?\d{4}\b")
_API_KEY = re.compile(r"\b[A-Za-z0-9_-]{20,}\b")
_ALWAYS = (_EMAIL, _CARD, _SSN, _PHONE)
_SENSITIVE_NAMES = ("key", "token", "secret", "password", "credential")


def mask_text(text: str, sensitive: bool) -> str:
    for pattern in (*_ALWAYS, _API_KEY) if sensitive else _ALWAYS:
        text = pattern.sub(PLACEHOLDER, text)
    return text


def mask_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes with PII masked in every string (nested lists and mappings too)."""
    return {key: _mask(value, _sensitive(key)) for key, value in attributes.items()}


def _sensitive(name: str) -> bool:
    lowered = name.lower()
    return any(term in lowered for term in _SENSITIVE_NAMES)


def _mask(value: Any, sensitive: bool) -> Any:
    if isinstance(value, str):
        return mask_text(value, sensitive)
    if isinstance(value, Mapping):
        return {key: _mask(item, sensitive or _sensitive(str(key)))
                for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_mask(item, sensitive) for item in value]
    return value
