"""The shell examples the docs include outside docs/examples/cli, run with bash as shown: the
embedded broker started from a checkout and with token authentication and TLS (on free ports, the
pages' defaults overridden through PULSAR_PORT and PULSAR_HTTP_PORT), the pip dry run of one's own
pins, and the two commands of the getting-started page checked against what CI runs."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import ssl
import sys
from importlib.metadata import version
from pathlib import Path

import httpx

from tests.support.doc_scripts import EXAMPLES, included, run_on_terminal, run_script, serving
from tests.support.security import CLIENT_CN, Pki, write_key_pair, write_secret_key

CHECKOUT = EXAMPLES.parents[1]
FREE_PORTS = {"PULSAR_PORT": "0", "PULSAR_HTTP_PORT": "0"}


def included_lines(script: Path, marker: str) -> list[str]:
    """The lines a page includes from ``script``: between ``[START marker]`` and ``[END marker]``."""
    return included(script, marker).splitlines()


def test_every_example_script_is_included_by_a_page() -> None:
    pages = "".join(page.read_text() for page in EXAMPLES.parent.glob("*.md"))
    for script in [*EXAMPLES.rglob("*.sh"), *EXAMPLES.rglob("*.sql"), *EXAMPLES.rglob("*.txt")]:
        name = script.relative_to(EXAMPLES.parent).as_posix()
        assert f"{{literalinclude}} {name}" in pages, f"no page includes {name}"


def test_the_broker_starts_from_a_checkout_as_shown(tmp_path: Path) -> None:
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])  # the checkout's .venv, as make creates it
    script = EXAMPLES / "broker" / "standalone.sh"
    with serving(["bash", script], tmp_path, **FREE_PORTS) as (service_url, web_url):
        assert re.fullmatch(r"pulsar://127\.0\.0\.1:\d+", service_url), service_url
        assert httpx.get(f"{web_url}/admin/v2/clusters").json() == ["standalone"]
    assert (tmp_path / "var" / "broker").is_dir()

    # The alternative the page gives in a comment, on free ports rather than the defaults.
    alternative = next(line for line in included_lines(script, "standalone") if line.startswith("# or: "))
    command = [*shlex.split(alternative.removeprefix("# or: ")), "--port", "0", "--http-port", "0"]
    with serving(command, tmp_path) as (service_url, _):
        assert service_url.startswith("pulsar://127.0.0.1:"), service_url


def test_the_token_and_tls_broker_starts_as_shown(tmp_path: Path, pki: Pki) -> None:
    shutil.copy(pki.cert, tmp_path / "server.pem")
    shutil.copy(pki.key, tmp_path / "server-key.pem")
    write_secret_key(tmp_path / "secret.key")
    script = EXAMPLES / "security" / "token_tls_broker.sh"
    env = {**FREE_PORTS, "PULSAR_DATA_DIR": str(tmp_path / "data")}
    with serving(["bash", script], tmp_path, **env) as (service_url, web_url):
        # The ready line has the form of the page's comment, on this run's ports.
        shown = included_lines(script, "token tls broker")[-1].removeprefix("# ")
        ready = f"airflow-pulsar standalone ready: service_url={service_url} web_service_url={web_url}"
        assert re.sub(r":\d+\b", ":PORT", ready) == re.sub(r":\d+\b", ":PORT", shown), (ready, shown)
        refused = httpx.get(f"{web_url}/admin/v2/clusters", verify=ssl.create_default_context(cafile=pki.ca))
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer"), refused.text


def test_the_broker_with_every_method_starts_as_shown(tmp_path: Path, pki: Pki) -> None:
    for source, name in ((pki.cert, "server.pem"), (pki.key, "server-key.pem"), (pki.ca, "client-ca.pem")):
        shutil.copy(source, tmp_path / name)
    shutil.copy(write_key_pair(tmp_path, "issuer").public, tmp_path / "issuer-public.pem")
    users, *broker = included_lines(EXAMPLES / "security" / "all_methods_broker.sh", "all methods broker")
    # The password, typed at the prompt and again to verify it, never on the command line.
    run_on_terminal(users, tmp_path, {"Password:": "etl-pass", "Verifying - Password:": "etl-pass"})
    assert re.fullmatch(r"etl:\$apr1\$\S+\n", (tmp_path / "users.htpasswd").read_text())
    env = {**FREE_PORTS, "PULSAR_DATA_DIR": str(tmp_path / "data")}
    with serving(["bash", "-c", "\n".join(broker)], tmp_path, **env) as (service_url, web_url):
        assert service_url.startswith("pulsar+ssl://") and web_url.startswith("https://"), (service_url, web_url)
        trust = ssl.create_default_context(cafile=pki.ca)
        url = f"{web_url}/admin/v2/clusters"
        assert httpx.get(url, verify=trust, auth=("etl", "etl-pass")).status_code == 200
        assert httpx.get(url, verify=trust, auth=("etl", "wrong")).status_code == 401
        trust.load_cert_chain(pki.client_cert, pki.client_key)
        assert httpx.get(url, verify=trust).status_code == 200, f"the certificate of {CLIENT_CN} was refused"


def test_the_permission_paths_answer_as_shown(broker) -> None:
    names = {"t": "docs-grants", "ns": "grants", "topic": "orders", "role": "role-a", "sub": "sub"}
    namespace, role, sub = "docs-grants/grants", names["role"], names["sub"]
    created = broker.admin("PUT", "/admin/v2/tenants/docs-grants", json={"adminRoles": [], "allowedClusters": ["standalone"]})
    assert created.status_code in (204, 409), created.text  # 409: made by an earlier run on this broker
    for path in (f"/admin/v2/namespaces/{namespace}", f"/admin/v2/persistent/{namespace}/orders"):
        assert broker.admin("PUT", path).status_code in (204, 409)
    answers = {}
    for line in included_lines(EXAMPLES / "security" / "permission_paths.txt", "permission paths"):
        request, _, comment = line.partition("#")
        method, path = request.split()
        body = json.loads(comment.strip().removeprefix("body ")) if comment.strip().startswith("body ") else None
        if method == "POST" and body is None:  # the topic grant: its actions, as for a namespace
            body = ["produce"]
        response = broker.admin(method, path.format(**names), json=body)
        assert response.is_success, f"{line}: {response.status_code} {response.text}"
        if method == "GET":
            answers[path] = response.json()
    namespace_grants, subscription_grants = answers.values()
    assert sorted(namespace_grants[role]) == ["consume", "produce"], namespace_grants
    assert sorted(subscription_grants[sub]) == ["role-a", "role-b"], subscription_grants
    # After the two DELETEs: the namespace grant is gone, the subscription keeps role-b; the topic's stays.
    assert role not in broker.admin("GET", f"/admin/v2/namespaces/{namespace}/permissions").json()
    assert broker.admin("GET", f"/admin/v2/namespaces/{namespace}/permissions/subscription").json() == {sub: ["role-b"]}
    assert broker.admin("GET", f"/admin/v2/persistent/{namespace}/orders/permissions").json()[role] == ["produce"]


def test_the_dry_run_resolves_pins_with_the_provider(tmp_path: Path) -> None:
    # Pins this environment satisfies; without an index pip resolves them against what is installed.
    (tmp_path / "requirements.txt").write_text(f"protobuf=={version('protobuf')}\npyspark=={version('pyspark')}\n")
    output = run_script(EXAMPLES / "installing" / "dry_run.sh", tmp_path, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    for requirement in ("airflow-pulsar[spark]", f"protobuf=={version('protobuf')}", f"pyspark=={version('pyspark')}"):
        assert f"Requirement already satisfied: {requirement} in" in output, output[-3000:]
    assert "Would install" not in output, output


def test_the_two_commands_are_targets_ci_runs() -> None:
    """CI runs `make test` (.ci/run), and `make demo`'s recipe is the module tests/integration/test_demo.py runs."""
    commands = [line.split("#")[0].split() for line in included_lines(EXAMPLES / "getting-started" / "two_commands.sh", "two commands")]
    assert [command[0] for command in commands] == ["make", "make"], commands
    targets = [command[1] for command in commands]
    assert targets == ["demo", "test"], targets
    makefile = (CHECKOUT / "Makefile").read_text()
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"the Makefile has no target {target}"
    assert re.search(r"^make test$", (CHECKOUT / ".ci" / "run").read_text(), re.MULTILINE), ".ci/run does not run make test"
    demo_recipe = re.search(r"^demo:.*\n\t(.*)", makefile, re.MULTILINE)
    assert demo_recipe is not None and "-m airflow_pulsar.demo" in demo_recipe.group(1), demo_recipe
    assert '"-m", "airflow_pulsar.demo"' in (CHECKOUT / "tests" / "integration" / "test_demo.py").read_text()
