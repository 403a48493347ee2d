"""Two service processes on one database (PostgreSQL, or one SQLite file on this host): tasks move
between them, duplicates make one step, and 20 tasks x 10 steps interleaved across both lose,
duplicate and cross-wire nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from service_testkit import goal, observation

from veriloop.llm.scripted import Delay
from veriloop.schemas.outputs import SemanticVerdict


@pytest.fixture(params=["postgres", "sqlite"])
def pair(request, tmp_path, process_servers, playbook):
    """Two processes started together on one fresh schema or SQLite file (their set-up runs
    concurrently)."""
    if request.param == "postgres":
        # Asked for before the servers start: its schema is dropped after they stop.
        url = request.getfixturevalue("pg_url")
    else:
        url = f"sqlite:///{tmp_path / 'veriloop.sqlite'}"
    return process_servers(url, count=2)


def test_a_task_started_on_one_process_continues_on_the_other(pair):
    a, b = (server.client() for server in pair)
    answers = [a.interact(observation(3, 0, query=goal(3, 4))).json()]
    task_id = answers[0]["taskId"]
    for presses in range(1, 5):
        client = (b, a)[presses % 2]
        answers.append(
            client.interact(
                observation(3, presses, taskId=task_id, stepIndex=answers[-1]["stepIndex"])
            ).json()
        )

    assert [x["action"] for x in answers] == ["click(3)"] * 4 + ["finish()"]
    assert a.detail(task_id) == b.detail(task_id)
    assert [v["stepIndex"] for v in b.detail(task_id)["verifications"]] == [0, 1, 2, 3]


@pytest.mark.parametrize("retry_key", ["requestId", "stepIndex"])
def test_concurrent_duplicates_on_both_processes_make_one_step(pair, scripted_model, retry_key):
    a, b = (server.client() for server in pair)
    task_id = a.interact(observation(5, 0, query=goal(5, 5))).json()["taskId"]
    # The first duplicate to take the lock holds it while its model call is slow; the others queue
    # on the advisory lock (across processes) and then find the stored answer.
    scripted_model.script(
        "verification",
        Delay(
            1.0,
            SemanticVerdict(
                action_succeeded=True, task_completed=False, confidence=0.9, reason="ok"
            ),
        ),
    )
    key = {"requestId": "retry-me"} if retry_key == "requestId" else {"stepIndex": 0}
    body = observation(5, 1, taskId=task_id, **key)
    urls = [pair[i % 2].url for i in range(6)]
    with ThreadPoolExecutor(len(urls)) as pool:
        responses = list(pool.map(lambda url: _client_for(pair, url).interact(body), urls))

    assert [r.status_code for r in responses] == [200] * 6
    assert len({r.text for r in responses}) == 1
    assert scripted_model.calls("verification") == 1
    detail = b.detail(task_id)
    assert [x["stepIndex"] for x in detail["actions"]] == [0, 1]
    assert [v["stepIndex"] for v in detail["verifications"]] == [0]


def test_twenty_tasks_ten_steps_each_across_two_processes(pair):
    tasks, presses = 20, 10

    def run_task(n: int) -> tuple[int, str, list[dict]]:
        button = 100 + n
        clients = [server.client() for server in pair]
        answers = [
            clients[n % 2].interact(observation(button, 0, query=goal(button, presses))).json()
        ]
        task_id = answers[0]["taskId"]
        while answers[-1]["status"] == "executing" and len(answers) <= presses + 1:
            step = len(answers)
            body = observation(
                button,
                step,
                taskId=task_id,
                stepIndex=answers[-1]["stepIndex"],
                requestId=f"{n}-{step}",
            )
            response = clients[(n + step) % 2].interact(body)
            assert response.status_code == 200, response.text
            answers.append(response.json())
        return button, task_id, answers

    with ThreadPoolExecutor(tasks) as pool:
        results = list(pool.map(run_task, range(tasks)))

    assert len({task_id for _, task_id, _ in results}) == tasks
    reader = pair[0].client()
    for button, task_id, answers in results:
        expected = [f"click({button})"] * presses + ["finish()"]
        assert [x["action"] for x in answers] == expected
        assert [x["stepIndex"] for x in answers] == list(range(presses + 1))
        detail = reader.detail(task_id)
        assert detail["status"] == "completed"
        # The full history, each action with the page its own client sent for that step.
        assert [
            (x["stepIndex"], x["action"], x["beforeState"]["url"]) for x in detail["actions"]
        ] == [(i, expected[i], observation(button, i)["url"]) for i in range(presses + 1)]
        assert [v["stepIndex"] for v in detail["verifications"]] == list(range(presses))
        assert all(
            f"Press {button} (pressed" in " ".join(v["observations"])
            for v in detail["verifications"]
        )


def _client_for(pair, url):
    return next(server for server in pair if server.url == url).client()


def test_workers_need_a_database_file(monkeypatch):
    from veriloop.server.main import serve

    monkeypatch.setenv("VERILOOP_DATABASE_URL", "sqlite:///:memory:")  # restored after the test
    with pytest.raises(ValueError, match="in-memory"):
        serve(workers=2, database_url="sqlite:///:memory:")
