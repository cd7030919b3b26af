"""The model providers, by name: the one list the spec's validation accepts and the
worker builds (strands_durable/worker/providers/<name>.py, one module per name).

Names only, no SDK: the scheduler and the API import this to check a spec; only the
worker imports a provider's module, and that module imports its SDK only when a model
is built. Adding a provider: a name here and its module in worker/providers/.
"""

from __future__ import annotations

__all__ = ["PROVIDERS"]

# The schema leaves `provider` a free string; these are the ones a worker can build.
PROVIDERS: tuple[str, ...] = (
    "bedrock",
    "openai",
    "anthropic",
    "gemini",
    "ollama",
    "litellm",
    "llamacpp",
    "scripted",
)
