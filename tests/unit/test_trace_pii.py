"""strands-cli's PII masking of the trace artifact (worker/telemetry/pii.py), and when a
spec turns it on (`telemetry.redact` written, with tool inputs or outputs redacted)."""

from __future__ import annotations

import pytest

from strands_durable.spec.sections import Redaction, Telemetry
from strands_durable.spec.telemetry import OtelEnv, resolve_trace_config
from strands_durable.worker.telemetry.pii import PLACEHOLDER, mask_attributes, mask_text

R = PLACEHOLDER


@pytest.mark.parametrize(("text", "masked"), [
    ("mail jane.doe@example.com now", f"mail {R} now"),
    ("card 4111 1111 1111 1111.", f"card {R}."),
    ("ssn 123-45-6789", f"ssn {R}"),
    ("call 555-123-4567 or 555.123.4567", f"call {R} or {R}"),
    ("no pii here, 42 items", "no pii here, 42 items"),
])
def test_the_patterns_strands_cli_masks(text: str, masked: str) -> None:
    assert mask_text(text, sensitive=False) == masked


def test_the_api_key_heuristic_only_under_a_sensitive_name() -> None:
    token = "sk_live_ABCDEFGHIJKLMNOPQRSTUV"
    masked = mask_attributes({"api_key": token, "gen_ai.agent.name": token,
                              "nested": {"password": [token], "plain": token},
                              "count": 3})
    assert masked == {"api_key": R, "gen_ai.agent.name": token,
                      "nested": {"password": [R], "plain": token}, "count": 3}


@pytest.mark.parametrize(("redact", "masks"), [
    (None, False),                                              # no redact written
    (Redaction(), True),                                        # written: inputs default on
    (Redaction(tool_inputs=False, tool_outputs=True), True),
    (Redaction(tool_inputs=False, tool_outputs=False), False),
])
def test_masking_is_on_as_strands_cli_turns_it_on(redact: Redaction | None,
                                                  masks: bool) -> None:
    telemetry = Telemetry.model_validate({"otel": {}, **({"redact": redact.model_dump()}
                                                         if redact else {})})
    config = resolve_trace_config(telemetry, OtelEnv(), (), local=True)
    assert config is not None and config.mask_pii is masks
