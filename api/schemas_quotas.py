"""The models of /v1/quotas: a namespace's quota as `durable quotas set` takes it, and as
`durable quotas list --json` shows it (with the model tokens its steps used today)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from strands_durable.access import (
    MAX_QUOTA_SESSIONS,
    MAX_QUOTA_STEPS,
    MAX_QUOTA_TOKENS,
    MAX_WEIGHT,
    NamespaceQuota,
)

NAMESPACE_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"


class QuotaSetRequest(BaseModel):
    """A namespace's quota (it replaces the one the namespace had): sessions not yet ended
    at once, model tokens per UTC day, or both; over one, refuse or queue a submit."""

    # Unknown fields are refused (a typo must not silently set no limit), and numbers
    # must be JSON integers ("5", 5.5 and true are not).
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "examples": [{"running_sessions": 50, "tokens_per_day": 2_000_000, "over": "queue"}]})

    running_sessions: int | None = Field(
        default=None, ge=1, le=MAX_QUOTA_SESSIONS,
        description="Sessions not yet ended (running or paused) at once; none: no limit")
    tokens_per_day: int | None = Field(
        default=None, ge=1, le=MAX_QUOTA_TOKENS,
        description="Model tokens (input + output) of the namespace's steps per UTC day, "
        "checked at submit; none: no limit")
    over: Literal["refuse", "queue"] = Field(
        default="refuse", description="Over the quota: refuse the submit (429), or queue "
        "its session (created paused, resumed as places free up)")
    weight: int | None = Field(
        default=None, ge=1, le=MAX_WEIGHT,
        description="The namespace's share of the workers' takes against other namespaces "
        "with steps waiting (fair dispatch); none: 1")
    steps_in_flight: int | None = Field(
        default=None, ge=1, le=MAX_QUOTA_STEPS,
        description="The namespace's steps running at once; over it, its steps wait their "
        "turn at dispatch (never failed); none: no limit")

    @model_validator(mode="after")
    def _some_limit(self) -> QuotaSetRequest:
        if self.running_sessions is None and self.tokens_per_day is None \
                and self.weight is None and self.steps_in_flight is None:
            raise ValueError("running_sessions, tokens_per_day, weight, steps_in_flight: "
                             "give one or more")
        return self

    def quota(self, namespace: str) -> NamespaceQuota:
        return NamespaceQuota(namespace=namespace, running_sessions=self.running_sessions,
                              tokens_per_day=self.tokens_per_day, over=self.over,
                              weight=self.weight, steps_in_flight=self.steps_in_flight)


class QuotaOut(BaseModel):
    """A namespace's quota and the model tokens its steps used today (UTC)."""

    namespace: str
    running_sessions: int | None
    tokens_per_day: int | None
    over: str = Field(description="refuse or queue")
    weight: int | None = Field(default=None, description="Its share of the workers' takes "
                               "(fair dispatch); none: 1")
    steps_in_flight: int | None = Field(default=None, description="Its steps running at "
                                        "once; none: no limit")
    tokens_today: int = Field(description="Model tokens the namespace's steps used today "
                              "(UTC), whether or not it has a quota of tokens")

    @classmethod
    def of(cls, quota: NamespaceQuota, tokens_today: int) -> QuotaOut:
        return cls(**quota.model_dump(), tokens_today=tokens_today)


class QuotaList(BaseModel):
    items: list[QuotaOut]
