"""SIGTERM stops a loaded service process within 10 s, and its tasks go on in a new process."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from service_testkit import goal, observation

from veriloop.llm.scripted import ANY_PURPOSE, Delay
from veriloop.schemas.outputs import SemanticVerdict

TASKS = 12
HUNG = Delay(
    12, SemanticVerdict(action_succeeded=True, task_completed=False, confidence=0.9, reason="ok")
)


def test_sigterm_under_load_exits_within_10_s_and_tasks_continue(
    pg_url, process_servers, playbook, scripted_model
):
    server = process_servers(pg_url)
    client = server.client()
    tasks = [
        client.interact(observation(20 + i, 0, query=goal(20 + i, 3))).json() for i in range(TASKS)
    ]
    # Every step now waits on a model call longer than the shutdown grace.
    scripted_model.script("verification", *[HUNG] * TASKS)
    bodies = [
        observation(20 + i, 1, taskId=t["taskId"], stepIndex=0, requestId=f"step-{i}")
        for i, t in enumerate(tasks)
    ]

    def send(body):
        try:
            return server.client(timeout=30).interact(body).status_code
        except httpx.TransportError:
            return "dropped"

    with ThreadPoolExecutor(TASKS) as pool:
        sent = [pool.submit(send, body) for body in bodies]
        deadline = time.monotonic() + 60
        while scripted_model.in_flight < TASKS:
            assert time.monotonic() < deadline, "the steps never reached their model call"
            time.sleep(0.05)
        stopped_at = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=30)
        took = time.monotonic() - stopped_at
        answers = [future.result() for future in sent]

    assert took < 10, f"the service took {took:.1f} s to stop"
    assert 200 not in answers, answers  # no step finished: its model call never answered
    # A new process continues every task from where it was: the step runs once, as step 1.
    scripted_model.reset()
    scripted_model.on(ANY_PURPOSE, playbook)
    successor = process_servers(pg_url).client()
    for body in bodies:
        reply = successor.interact(body)
        assert reply.status_code == 200, reply.text
        assert reply.json()["stepIndex"] == 1
    detail = successor.detail(tasks[0]["taskId"])
    assert [a["stepIndex"] for a in detail["actions"]] == [0, 1]
