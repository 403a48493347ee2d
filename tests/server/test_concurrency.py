"""Concurrent requests for one task in one process (SQLite): duplicates make one step, others wait their turn."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from service_testkit import KEYS, goal, observation, read_head

from veriloop.llm.scripted import Delay
from veriloop.schemas.outputs import SemanticVerdict
from veriloop.server.settings import Settings

STEP_DONE = SemanticVerdict(
    action_succeeded=True, task_completed=False, confidence=0.9, reason="pressed"
)


@pytest.fixture
def api(thread_server, sqlite_settings, playbook):
    return thread_server(sqlite_settings)


def concurrently(send, bodies):
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


@pytest.mark.parametrize("retry_key", ["requestId", "stepIndex"])
def test_concurrent_duplicates_make_one_step_and_get_one_answer(
    api, scripted_model, sqlite_settings, retry_key
):
    client = api.client()
    task_id = client.interact(observation(4, 0, query=goal(4, 5))).json()["taskId"]
    # The first request holds the task for a while; the duplicates arrive meanwhile.
    scripted_model.script("verification", Delay(0.8, STEP_DONE))
    key = {"requestId": "press-1"} if retry_key == "requestId" else {"stepIndex": 0}
    body = observation(4, 1, taskId=task_id, **key)

    responses = concurrently(lambda b: api.client().interact(b), [body] * 5)

    assert [r.status_code for r in responses] == [200] * 5
    assert len({r.text for r in responses}) == 1, "every duplicate gets the very same answer"
    assert responses[0].json()["stepIndex"] == 1
    assert scripted_model.calls("verification") == 1
    state = read_head(sqlite_settings.database_url, task_id)
    assert [a["step_index"] for a in state["action_history"]] == [0, 1]
    assert [v["step_index"] for v in state["verification_history"]] == [0]
    # A late retry after the fact still gets the stored answer.
    assert client.interact(body).text == responses[0].text


def test_a_second_observation_waits_for_the_first_and_becomes_the_next_step(
    api, scripted_model, sqlite_settings
):
    client = api.client()
    task_id = client.interact(observation(4, 0, query=goal(4, 5))).json()["taskId"]
    scripted_model.script("verification", Delay(0.8, STEP_DONE))

    responses = concurrently(
        lambda b: api.client().interact(b),
        [observation(4, 1, taskId=task_id), observation(4, 2, taskId=task_id)],
    )

    assert sorted(r.json()["stepIndex"] for r in responses) == [1, 2]
    state = read_head(sqlite_settings.database_url, task_id)
    assert [a["step_index"] for a in state["action_history"]] == [0, 1, 2]
    assert [v["step_index"] for v in state["verification_history"]] == [0, 1]


def test_waiting_past_the_lock_timeout_answers_409_and_changes_nothing(
    thread_server, sqlite_settings, playbook, scripted_model
):
    server = thread_server(dataclasses.replace(sqlite_settings, lock_timeout_s=0.3))
    client = server.client()
    task_id = client.interact(observation(4, 0, query=goal(4, 5))).json()["taskId"]
    scripted_model.script("verification", Delay(2.0, STEP_DONE))

    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(
            server.client().interact, observation(4, 1, taskId=task_id, requestId="slow")
        )
        while (
            scripted_model.calls("verification") == 0
        ):  # the slow request holds the lock from now on
            time.sleep(0.01)
        before = read_head(sqlite_settings.database_url, task_id)
        busy = client.interact(observation(4, 2, taskId=task_id, requestId="impatient"))
        assert busy.status_code == 409 and busy.headers["Retry-After"] == "1"
        assert "send it again" in busy.json()["detail"]
        assert read_head(sqlite_settings.database_url, task_id) == before
        assert slow.result().json()["stepIndex"] == 1


def test_one_process_keeps_every_task_model_call_in_flight(api, scripted_model, playbook):
    """The nodes run on the event loop, not in the default thread pool (min(32, CPUs + 4) threads)."""
    tasks = 40
    everyone_waiting = threading.Event()

    def plan(request):
        # Each planning call waits until all are at the model: only a process that holds every
        # task in flight gets there (a thread pool would cap it at 6 and the wait would time out).
        if scripted_model.calls("planning") >= tasks:
            everyone_waiting.set()
        everyone_waiting.wait(timeout=60)
        return playbook(request)

    scripted_model.on("planning", plan)

    def start(n: int):
        return api.client().interact(observation(4, 0, query=goal(4, 2)))

    responses = concurrently(start, list(range(tasks)))

    assert [r.status_code for r in responses] == [200] * tasks
    assert scripted_model.peak_in_flight == tasks


def test_postgres_task_locks_hold_no_connection_per_step(
    thread_server, pg_url, scripted_model, playbook
):
    """Later steps take the task's cross-process lock: it must not cost a connection per step."""
    tasks = 40  # more than the old per-step lock pool (24 connections) let run at once
    api = thread_server(Settings(database_url=pg_url, api_keys=KEYS, pg_pool_size=4))
    started = concurrently(
        lambda n: api.client().interact(observation(4, 0, query=goal(4, 3))), list(range(tasks))
    )
    task_ids = [r.json()["taskId"] for r in started]
    everyone_waiting = threading.Event()

    def verify(request):
        # Only a process that runs every task's step at once gets all 40 verdicts to the model.
        if scripted_model.calls("verification") >= tasks:
            everyone_waiting.set()
        everyone_waiting.wait(timeout=60)
        return STEP_DONE

    scripted_model.on("verification", verify)
    steps = concurrently(
        lambda task_id: api.client().interact(observation(4, 1, taskId=task_id, stepIndex=0)),
        task_ids,
    )
    assert [r.status_code for r in steps] == [200] * tasks
    assert everyone_waiting.is_set() and scripted_model.peak_in_flight >= tasks
