"""A logged-in HTTP client for the farm's web nodes."""

import json

import requests

from tests.harness.processes import manage, wait_for

DEMO_PASSWORD = "farm-test-password"


class WebClient:
    """One user's browser-less session; requests to any node share its cookies."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def url(self, path: str, node: str | None = None) -> str:
        return (node or self.base) + path

    def login(self, username: str, password: str = DEMO_PASSWORD) -> "WebClient":
        self.session.get(self.url("/accounts/login/"), timeout=10).raise_for_status()
        response = self.session.post(
            self.url("/accounts/login/"),
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": self.session.cookies["csrftoken"],
                "next": "/",
            },
            allow_redirects=False,
            timeout=10,
        )
        assert response.status_code == 302, f"login as {username} failed: {response.status_code}"
        return self

    def get(self, path: str, *, node: str | None = None, **kwargs: object) -> requests.Response:
        kwargs.setdefault("timeout", 10)
        return self.session.get(self.url(path, node), **kwargs)

    def post(
        self, path: str, data: dict | None = None, *, node: str | None = None, **kwargs: object
    ) -> requests.Response:
        headers = {"X-CSRFToken": self.session.cookies.get("csrftoken", ""), **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 10)
        return self.session.post(self.url(path, node), data=data or {}, headers=headers, **kwargs)

    def start_report(self, kind: str, params: dict, *, node: str | None = None) -> dict:
        response = self.post(f"/reports/{kind}/", params, node=node, headers={"Accept": "application/json"})
        assert response.status_code == 202, response.text
        return response.json()

    def progress(self, job: str, *, node: str | None = None) -> dict:
        response = self.get(f"/progress/{job}/", node=node)
        assert response.status_code == 200, response.text
        return response.json()

    def wait_until(
        self, job: str, predicate, *, node: str | None = None, timeout: float = 120, what: str = ""
    ) -> dict:
        return wait_for(
            lambda: (lambda p: p if predicate(p) else None)(self.progress(job, node=node)),
            timeout=timeout,
            interval=0.05,
            what=what or f"job {job}",
        )


def flush_votes(env: dict) -> bool:
    """Run the vote flusher by hand: True when it ran, False when another
    flusher (beat's) held the lock just then."""
    try:
        manage(env, "flush_votes")
    except RuntimeError as exc:
        if "another flusher is running" in str(exc):
            return False
        raise
    return True


def create_poll(env: dict, question: str, choices: list[str]) -> tuple[int, list[int]]:
    """A poll made on the farm's database; returns its id and its choices' ids."""
    out = manage(
        env,
        "shell",
        "-c",
        "import json; from demofarm.polls.models import Poll; "
        f"p = Poll.objects.create(question={question!r}); "
        f"ids = [p.choices.create(text=t, position=i).id for i, t in enumerate({choices!r})]; "
        "print(json.dumps([p.id, ids]))",
    )
    poll, ids = json.loads(out.strip().splitlines()[-1])
    return poll, ids


def vote_anonymously(
    node: str, poll: int, choice: int, session: requests.Session | None = None
) -> requests.Response:
    """A vote as a browser without a voter cookie makes it: the poll page (for
    the CSRF cookie), then the POST."""
    session = session or requests.Session()
    if "csrftoken" not in session.cookies:
        session.get(f"{node}/polls/{poll}/", timeout=30).raise_for_status()
    return session.post(
        f"{node}/polls/{poll}/vote/",
        data={"choice": choice},
        headers={"X-CSRFToken": session.cookies["csrftoken"], "Accept": "application/json"},
        timeout=30,
    )


def new_user(env: dict, node: str, username: str) -> WebClient:
    """A user of the farm's database (made if missing), logged in on `node`."""
    manage(
        env,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.filter(username='{username}').exists() or "
        f"get_user_model().objects.create_user('{username}', password='{DEMO_PASSWORD}')",
    )
    return WebClient(node).login(username)
