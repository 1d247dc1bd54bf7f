"""``serve`` as programs and people use it: a real server on loopback over an ingested root,
its HTTP API, and its web page in a real browser (Debian's chromium through Playwright)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ingest_pipeline_tests.pdf_writer import annual_report_pdf
from ingest_pipeline_tests.servers import free_port

CLI = str(Path(sys.executable).parent / "ingest-pipeline")
HOSTILE = "<img src=x onerror=\"document.title='owned'\"> harvest machines"
# A name that would recolour a terminal and set its title, were it printed raw.
ODD_NAME = "\x1b[31mlog\x1b]0;owned\x07.md"


def get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def get_json(url: str):
    status, body, _ = get(url)
    return status, json.loads(body)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("serve") / "data"
    sources = data / "sources"
    sources.mkdir(parents=True)
    (sources / "nw_2021.pdf").write_bytes(annual_report_pdf("Northwind Traders Ltd", 2021))
    (sources / "fab_2021.pdf").write_bytes(annual_report_pdf("Fabrikam Growers Inc.", 2021))
    (sources / "notes.md").write_text(f"# Harvest notes\n\n{HOSTILE}\n")
    (sources / ODD_NAME).write_text("# Lighthouse log\n\nThe keeper's logbook of lantern oil and wicks.\n")
    done = subprocess.run([CLI, "--data", str(data), "ingest"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    port = free_port()
    process = subprocess.Popen(
        [CLI, "--data", str(data), "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()
        try:
            if get(f"{url}/api/documents")[0] == 200:
                break
        except OSError:
            time.sleep(0.5)
    else:
        pytest.fail("serve did not answer within 180 s")
    yield url, data
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=60)


def search(url: str, **params):
    return get_json(f"{url}/api/search?{urllib.parse.urlencode(params)}")


def test_search_over_http_groups_by_page_and_filters_by_document(server):
    url, _ = server
    status, body = search(url, q="capital expenditure greenhouses", k=3)
    assert status == 200 and body["results"]
    keys = [(r["document_id"], r["page"]) for r in body["results"]]
    assert len(keys) == len(set(keys))
    status, body = search(url, q="capital expenditure greenhouses", organisation="Fabrikam Growers")
    assert status == 200 and {r["path"] for r in body["results"]} == {"fab_2021.pdf"}
    status, body = search(
        url, q="capital expenditure", where="organisation = 'Northwind Traders' and page >= 2"
    )
    assert status == 200 and body["results"]
    assert all(r["path"] == "nw_2021.pdf" and r["page"] >= 2 for r in body["results"])
    status, body = search(url, q="Northwind Traders capital expenditure", k=1, context="page")
    assert body["named"] and body["results"][0]["path"] == "nw_2021.pdf"
    assert body["results"][0]["context"][0]["page"] == body["results"][0]["page"]
    for params, code in [
        ({"q": "x", "where": "colour = 'red'"}, 400),
        ({"q": "x", "k": "many"}, 400),
        ({"q": "x", "group": "sentence"}, 400),
        ({"q": ""}, 400),
    ]:
        status, body = search(url, **params)
        assert status == code and body["error"], params


def test_a_name_is_kept_as_it_is_and_shown_escaped(server):
    url, _ = server
    status, body = search(url, q="keeper logbook of lantern oil", k=1)
    assert status == 200 and body["results"][0]["path"] == ODD_NAME
    shown = body["results"][0]["shown_path"]
    assert shown == "\\x1b[31mlog\\x1b]0;owned\\x07.md"
    _, documents = get_json(f"{url}/api/documents")
    assert {d["shown_path"] for d in documents if d["path"] == ODD_NAME} == {shown}


def test_records_lineage_and_pictures_are_reachable_and_nothing_else(server):
    url, _ = server
    status, documents = get_json(f"{url}/api/documents")
    nw = next(d for d in documents if d["path"] == "nw_2021.pdf")
    assert nw["organisation"] == "Northwind Traders Ltd" and nw["period"] == "2021"
    status, record = get_json(f"{url}/api/documents/{nw['document_id']}")
    assert status == 200 and record["read_from"]["organisation"]["page"] == 1
    _, body = search(
        url, q="capital expenditure greenhouses", where="organisation = 'Northwind Traders'", k=1
    )
    hit = body["results"][0]
    status, chains = get_json(f"{url}/api/chunks/{hit['chunk_id']}/lineage")
    assert status == 200 and chains[0]["chunker"].startswith("pdf@") and chains[0]["source"]["sha256"]
    chunks = ",".join(p["chunk_id"] for p in hit["passages"])
    status, png, kind = get(f"{url}/api/pages/{hit['document_id']}/{hit['page']}.png?chunks={chunks}")
    assert status == 200 and kind == "image/png" and png.startswith(b"\x89PNG")
    for path in [
        f"/api/pages/{hit['document_id']}/99.png",
        "/api/pages/..%2F..%2Fetc%2Fpasswd/1.png",
        "/api/documents/..%2F..%2Fetc%2Fpasswd",
        "/api/chunks/nope/lineage",
        "/etc/passwd",
    ]:
        status, body, _ = get(url + path)
        assert status == 404 and b"root:" not in body, path
    request = urllib.request.Request(f"{url}/api/search?q=x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 405


def _outward_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_the_service_answers_on_loopback_only(server):
    url, _ = server
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no address besides loopback to try")
    port = int(url.rsplit(":", 1)[1])
    assert get(f"{url}/api/documents")[0] == 200
    with pytest.raises(OSError):
        socket.create_connection((address, port), timeout=5).close()


def test_a_person_searches_sees_the_page_and_opens_the_lineage(server):
    url, _ = server
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium",
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1200})
            page.goto(url + "/", timeout=60_000)
            page.wait_for_selector("#organisation option >> nth=2", state="attached", timeout=60_000)
            page.fill("#q", "capital expenditure on greenhouses")
            page.select_option("#organisation", "Northwind Traders Ltd")
            page.click("#go")
            page.wait_for_selector(".result", timeout=60_000)
            first = page.locator(".result").first
            assert "nw_2021.pdf" in first.inner_text()
            assert all("nw_2021.pdf" in text for text in page.locator(".result .where").all_inner_texts())
            image = first.locator("img")
            image.wait_for(timeout=60_000)
            page.wait_for_function("document.querySelector('.result img').naturalWidth > 0", timeout=60_000)
            first.get_by_text("lineage").first.click()
            lineage = first.locator("pre.lineage").first
            lineage.wait_for(state="visible", timeout=60_000)
            assert "pdf@" in lineage.inner_text() and "sha256" in lineage.inner_text()
            # A document's text is shown as text: markup in it makes no element and runs nothing.
            page.select_option("#organisation", "")
            page.fill("#q", "harvest machines notes")
            page.click("#go")
            page.wait_for_function("document.querySelectorAll('.result').length > 0", timeout=60_000)
            page.get_by_text("onerror", exact=False).first.wait_for(timeout=60_000)
            assert page.title() != "owned"
            assert page.locator(".passage img").count() == 0
            # A file name's control characters are shown as escapes, never written raw.
            page.fill("#q", "keeper logbook of lantern oil")
            page.click("#go")
            page.get_by_text("lantern oil", exact=False).first.wait_for(timeout=60_000)
            where = page.locator(".result .where").first.inner_text()
            assert "\\x1b[31mlog" in where and "\x1b" not in where and "\x07" not in where
        finally:
            browser.close()
