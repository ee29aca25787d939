import os
import subprocess
import sys

import pytest

from .helpers import ROOT, Server

#: The fixture plugins (hello, conformance) live outside the venv so `make serve` never serves
#: them; `make test` puts this folder on PYTHONPATH. A bare `pytest` run gets it here (built
#: first when missing), for itself and for every server it starts.
FIXTURE_SITE = ROOT / ".conformance" / "site"


def _with_fixture_site() -> None:
    if not (FIXTURE_SITE / ".fixtures").exists():
        subprocess.run(["make", "-s", "fixtures"], cwd=ROOT, check=True, stdout=sys.stderr)
    site = str(FIXTURE_SITE)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if site not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([site, *paths])
    if site not in sys.path:
        sys.path.insert(0, site)


_with_fixture_site()

# Every server the suite starts keeps its data (task stores, indexes) in a folder of this run,
# never in the user's data dir that other runs and other checkouts share.
if "MCPKIT_DATA_DIR" not in os.environ:
    import tempfile

    os.environ["MCPKIT_DATA_DIR"] = tempfile.mkdtemp(prefix="mcpkit-test-data-")

#: Both HTTP servers run the HTTP test modules: mcpkit's own (the default) and hypercorn.
HTTP_SERVERS = ("mcpkit", "hypercorn")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "http_server_kind" in metafunc.fixturenames:
        metafunc.parametrize("http_server_kind", HTTP_SERVERS, indirect=True, scope="module")


@pytest.fixture(scope="module")
def http_server_kind(request: pytest.FixtureRequest):
    """Which server `mcpkit serve --transport http` runs for this module's tests."""
    patch = pytest.MonkeyPatch()
    patch.setenv("MCPKIT_HTTP_SERVER", request.param)
    yield request.param
    patch.undo()


@pytest.fixture
def hello():
    """The hello example plugin served alone over stdio."""
    with Server("--plugin", "hello") as srv:
        yield srv
