"""What the client tests (HTTP and Redis) share: an id no session has, and a spec whose
one step fails at once."""

NOPE = "00000000-0000-4000-8000-000000000000"
FAILING = """
version: 0
name: failing
runtime:
  provider: scripted
  failure_policy: {retries: 0}
  script:
    rules:
      - {contains: "boom", error: "the model is down"}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "boom"}
"""
