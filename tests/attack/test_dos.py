"""Rows 2 and 5: a heavy spec stalls nothing.

`durable api` as a real process (uvicorn, real HTTP, a real redis-server): while
specs that took 8-20 s of CPU each are submitted side by side, /healthz keeps
answering within a generous bound. Then a fleet of real `arq worker` processes: a
session whose second step's template runs past DURABLE_RENDER_TIMEOUT_S fails once,
naming the step and the limit, while five ordinary sessions complete around it.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from helpers import RedisServer, wait_for_sync
from helpers.api import api_process
from helpers.attack import cli_env
from helpers.fleet import Fleet

# Heavy for the CPU, tiny on the wire: 9**(9**7) is 8-20 s of bignum arithmetic, and
# three nested loops over a 1,000-character input are 10^8 to 10^9 iterations.
LETTERS = "x" * 1000
POWER = "{{ 9**(9**7) }}"
LOOPS = ("{% for a in x %}{% for b in x %}{% for c in x %}{% endfor %}{% endfor %}"
         "{% endfor %}done")
SHORT_LOOPS = ("{% for a in x %}{% for b in x %}{% for c in x[:150] %}{% endfor %}"
               "{% endfor %}{% endfor %}done")
# Six renders each stopped at DURABLE_RENDER_TIMEOUT_S (2 s): were they run on the event
# loop, a probe would wait for several of them in turn (6-12 s). 4 s leaves a loaded
# machine its scheduling noise and still catches that.
HEALTHZ_BOUND_S = 4.0
PROBE_TIMEOUT_S = 30.0


def heavy_spec(template: str, at_step: int = 0, name: str = "heavy") -> str:
    steps = ['      - {agent: a, input: "first"}'] * at_step
    steps.append(f'      - {{agent: a, input: "{template}"}}')
    body = "\n".join(steps)
    return f"""
version: 0
name: {name}
runtime: {{provider: scripted}}
inputs:
  values: {{x: {LETTERS}}}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
{body}
"""


def test_healthz_answers_while_heavy_specs_are_submitted(redis_server: RedisServer,
                                                         prefix: str, tmp_path: Path) -> None:
    env = cli_env(DURABLE_REDIS_URL=redis_server.url, DURABLE_KEY_PREFIX=prefix,
                  DURABLE_RENDER_TIMEOUT_S="2")
    with api_process(env, tmp_path / "api.log") as url:
        latencies: list[float] = []
        failures: list[bool] = []
        answers: list[httpx.Response] = []
        attacking = threading.Event()
        attacking.set()

        def probe() -> None:
            # A probe that times out counts with the time it waited.
            with httpx.Client(base_url=url, timeout=PROBE_TIMEOUT_S) as client:
                while attacking.is_set():
                    started = time.monotonic()
                    try:
                        answered = client.get("/healthz").status_code in (200, 503)
                    except httpx.TransportError:
                        answered = False
                    latencies.append(time.monotonic() - started)
                    failures.append(not answered)
                    time.sleep(0.05)

        def attack(spec: str) -> None:
            with httpx.Client(base_url=url, timeout=120) as client:
                answers.append(client.post("/v1/sessions", json={"spec": spec}))

        prober = threading.Thread(target=probe)
        attackers = [threading.Thread(target=attack, args=(heavy_spec(t),))
                     for t in (POWER, LOOPS, POWER, LOOPS, SHORT_LOOPS, SHORT_LOOPS)]
        prober.start()
        wait_for_sync(lambda: latencies, what="a first /healthz answer")
        for thread in attackers:
            thread.start()
        for thread in attackers:
            thread.join(timeout=180)
        attacking.clear()
        prober.join(timeout=60)

    print(f"/healthz during the attack: {len(latencies)} answers, max {max(latencies):.3f}s")
    assert max(latencies) < HEALTHZ_BOUND_S, f"/healthz took up to {max(latencies):.2f}s"
    assert len(latencies) >= 3 and not any(failures)
    assert len(answers) == len(attackers)
    for r in answers:
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert "pattern.config.steps[0].input" in error["message"]
        assert "DURABLE_RENDER_TIMEOUT_S" in error["message"] or "bits" in error["message"]


@pytest.mark.timeout(240)
def test_poison_render_fails_once_and_stalls_no_one(fleet_factory) -> None:
    """The second step's template loops for minutes. It is rendered when step 0
    commits: in a thread, the lease renewed, stopped at the render limit. The session
    fails once, naming the step, the field and the limit; step 0 runs exactly once;
    five ordinary sessions on the same two workers complete meanwhile."""
    fleet: Fleet = fleet_factory(claim_idle_ms=2000, render_timeout_s=1)
    spec_dir = Path(fleet.logdir)
    poison_file = spec_dir / "poison.yaml"
    poison_file.write_text(heavy_spec(LOOPS, at_step=1, name="poison"))
    plain_file = spec_dir / "plain.yaml"
    plain_file.write_text(heavy_spec("{{ x|length }} letters", at_step=2, name="plain"))
    workers = [fleet.start_worker(), fleet.start_worker()]

    poison = fleet.cli("submit", str(poison_file)).stdout.strip()
    plain = [fleet.cli("submit", str(plain_file)).stdout.strip() for _ in range(5)]

    def status(sid: str) -> dict[str, object]:
        doc: dict[str, object] = fleet.cli_json("status", sid)
        return doc

    docs = [wait_for_sync(lambda s=sid: (d := status(s))["status"] == "completed" and d,
                          timeout_s=120, what=f"ordinary session {sid} to complete")
            for sid in plain]
    # Each ordinary session's own time, from its creation to its last write (the CLI
    # calls that look at it take seconds each on a loaded machine, and are not its time):
    # a worker stalled by the poison's template would hold it for minutes.
    took = max(_seconds(str(d["updated_at"])) - _seconds(str(d["created_at"])) for d in docs)
    failed = wait_for_sync(lambda: (d := status(poison))["status"] == "failed" and d,
                           timeout_s=60, what="the poison session to fail")
    error = str(failed["error"])
    assert "step:0" in error and "pattern.config.steps[1].input" in error, error
    assert "DURABLE_RENDER_TIMEOUT_S" in error, error

    history = fleet.cli_json("history", poison)
    runs = [e for e in history if e["step"] == "step:0"
            and e["type"] in ("step_started", "step_reclaimed")]
    assert len(runs) == 1, runs
    assert not [e for e in history if e["type"] == "step_reclaimed"]
    assert all(w.poll() is None for w in workers), fleet.logs()
    assert took < 45, f"an ordinary session took {took:.1f}s"
    assert "Traceback" not in fleet.logs()


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
