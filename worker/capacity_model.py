"""`CapacityModel`: a provider model whose every request takes its turn on the fleet's
capacity for its key (worker/capacity.py), below the journal: a replayed turn costs none."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from strands_durable.store.capacity import ProviderKey, SpecScope
from strands_durable.worker.capacity import CapacityGate, Lease, OnGranted, OnWait
from strands_durable.worker.model_wrapper import ModelWrapper
from strands_durable.worker.providers.told import listening
from strands_durable.worker.providers.transient import throttle_of

__all__ = ["CapacityModel", "estimate_tokens"]

log = logging.getLogger("durable.worker")

OUTPUT_ESTIMATE = 512  # tokens a reply is assumed to take before its usage is known


def estimate_tokens(messages: Messages, system_prompt: str | None, max_tokens: int | None
                    ) -> int:
    """A request's tokens before the provider counts them: about four characters a token
    of what is sent, and the reply's ceiling (or a typical reply)."""
    sent = len(json.dumps(messages, default=str)) + len(system_prompt or "")
    return sent // 4 + (max_tokens or OUTPUT_ESTIMATE)


class CapacityModel(ModelWrapper):
    """A provider model whose every request takes its turn on the fleet's capacity."""

    def __init__(self, inner: Model, gate: CapacityGate, key: ProviderKey,
                 max_tokens: int | None = None, on_wait: OnWait | None = None, *,
                 on_granted: OnGranted | None = None, session: str = "",
                 scope: SpecScope | None = None) -> None:
        super().__init__(inner)
        self.gate = gate
        self.key = key
        self.max_tokens = max_tokens
        self.on_wait = on_wait
        self.on_granted = on_granted
        self.session = session
        self.scope = scope

    async def _acquire(self, estimate: int, waited: float
                       ) -> tuple[Lease, float, asyncio.Task[None] | None]:
        """The lease, the time waited in all, and the `on_granted` note being written
        (None: nothing to write): the request goes out beside it, not after it, since the
        rate's turn is spent at the grant and the lease runs from it."""
        told: list[bool] = []

        async def on_wait(label: str, reason: str, wait_ms: int) -> None:
            told.append(True)
            if self.on_wait is not None:
                await self.on_wait(label, reason, wait_ms)

        lease, total = await self.gate.acquire(self.key, estimate, waited, on_wait,
                                               self.session, self.scope)
        noting = None
        if told and self.on_granted is not None:
            noting = asyncio.create_task(_granted(self.on_granted, self.key.label, total))
        return lease, total, noting

    async def stream(self, messages: Messages, tool_specs: list[ToolSpec] | None = None,
                     system_prompt: str | None = None,
                     **kwargs: Any) -> AsyncGenerator[StreamEvent, None]:
        estimate = estimate_tokens(messages, system_prompt, self.max_tokens)
        waited = 0.0
        while True:
            lease, waited, noting = await self._acquire(estimate, waited)
            started = time.monotonic()
            renewing = asyncio.create_task(self._keep(lease))
            answered = False
            used: int | None = None
            try:
                with listening() as told:
                    async for event in self.inner.stream(messages, tool_specs,
                                                         system_prompt, **kwargs):
                        if noting is not None:  # written before anything of the reply
                            await asyncio.shield(noting)
                            noting = None
                        # Gemini's SDK yields its messageStart before it sends the
                        # request: a throttle after it is still no answer.
                        answered = answered or "messageStart" not in event
                        used = _usage(event) if used is None else used
                        yield event
            except Exception as exc:
                renewing.cancel()
                if noting is not None:  # the grant's note before the next wait's
                    await asyncio.shield(noting)
                throttle = None if answered else throttle_of(exc)
                if throttle is None:
                    await self.gate.release(lease, used, succeeded=False)
                    raise
                await self.gate.throttled(lease, throttle)
                # The time the refused request took counts as waiting too.
                waited += time.monotonic() - started
                continue
            except BaseException:  # cancelled, or the consumer stopped reading
                renewing.cancel()
                if noting is not None:  # a courtesy: not worth the cancelled step's time
                    noting.cancel()
                await asyncio.shield(self.gate.release(lease, used, succeeded=False))
                raise
            renewing.cancel()
            if noting is not None:  # a stream of no events: the note all the same
                await asyncio.shield(noting)
            await self.gate.release(lease, used, succeeded=True, told_rpm=told.limit_rpm)
            return

    async def _keep(self, lease: Lease) -> None:
        """Renew the lease while the request runs: a dead worker's lapses on its own."""
        period = self.gate.policy.capacity_lease_s / 3
        while True:
            await asyncio.sleep(period)
            try:
                await self.gate.renew(lease)
            except Exception as exc:  # a Redis blip: the next renewal may work
                log.debug("capacity lease renewal failed: %r", exc)


async def _granted(on_granted: OnGranted, label: str, waited_s: float) -> None:
    try:
        await on_granted(label, waited_s)
    except Exception as exc:  # the event is a courtesy, the request goes on
        log.debug("capacity granted event not written: %r", exc)


def _usage(event: StreamEvent) -> int | None:
    usage = event.get("metadata", {}).get("usage") if isinstance(event, dict) else None
    if not isinstance(usage, dict):
        return None
    total = usage.get("totalTokens")
    if isinstance(total, int):
        return total
    parts = [usage.get("inputTokens"), usage.get("outputTokens")]
    return sum(p for p in parts if isinstance(p, int)) if any(
        isinstance(p, int) for p in parts) else None
