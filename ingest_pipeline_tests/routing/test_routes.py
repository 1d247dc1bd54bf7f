"""Routes as plain functions: filters over path, media type and size, combined; the first
route that matches wins; a document no route takes is turned away with the reason; and
routes that cannot be used as written are refused with a message naming the route."""

import pytest

from ingest_pipeline.routing import DEFAULT_ROUTE, Facts, Routes, RoutingError, parse_match, parse_routes
from ingest_pipeline.settings import load_settings
from ingest_pipeline_tests.conftest import write

MiB = 1024 * 1024
PDF = "application/pdf"


def facts(path: str, media: str = PDF, size: int = 1000) -> Facts:
    return Facts(path, media, size)


def test_a_filter_holds_when_every_test_it_states_holds():
    match = parse_match({"path": ["contracts/", "legal/*.pdf"], "media_type": "application/*"}, "when")
    assert match.matches(facts("contracts/a.pdf"))
    assert match.matches(facts("legal/2024/q3/b.pdf"))  # "*" crosses folders
    assert not match.matches(facts("old/legal/b.pdf"))  # a glob is over the whole path
    assert match.matches(facts("archive/contracts/c.docx", "application/vnd.openxmlformats"))
    assert not match.matches(facts("contracts/a.md", "text/markdown"))
    assert not match.matches(facts("notes/a.pdf"))


def test_sizes_all_any_and_not_combine():
    match = parse_match(
        {
            "any": [{"path": "scans/"}, {"media_type": "image/*"}],
            "not": {"path": "*/draft*"},
            "all": [{"larger_than_mib": 1}, {"smaller_than_mib": 5}],
        },
        "when",
    )
    assert match.matches(facts("scans/a.pdf", size=2 * MiB))
    assert match.matches(facts("photos/b.png", "image/png", 3 * MiB))
    assert not match.matches(facts("scans/draft-a.pdf", size=2 * MiB))  # not
    assert not match.matches(facts("scans/a.pdf", size=MiB // 2))  # too small
    assert not match.matches(facts("scans/a.pdf", size=6 * MiB))  # too large
    assert not match.matches(facts("notes/a.pdf", size=2 * MiB))  # neither of any


def test_the_first_matching_route_wins_and_one_without_when_catches_the_rest():
    routes = parse_routes(
        [
            {"name": "pdfs", "when": {"media_type": PDF}, "ocr_dpi": 300},
            {"name": "contracts", "when": {"path": "contracts/"}, "serve": False},
            {"name": "rest"},
        ],
        ["default", "retrieval"],
        "retrieval",
    )
    assert routes.route_for(facts("contracts/a.pdf")).name == "pdfs"  # first, though both match
    assert routes.route_for(facts("contracts/a.md", "text/markdown")).name == "contracts"
    assert routes.route_for(facts("x.md", "text/markdown")).name == "rest"
    assert routes.turned_away(facts("x.md", "text/markdown")) is None
    assert routes.route_for(facts("a.pdf")).reader_settings() == {"ocr_dpi": 300}


def test_without_a_catch_all_a_document_no_route_takes_is_turned_away_with_the_reason():
    routes = parse_routes(
        [
            {"name": "pdfs", "when": {"media_type": PDF}},
            {"name": "old", "when": {"path": "old/"}, "skip": True},
        ],
        ["default", "retrieval"],
        "retrieval",
    )
    assert routes.route_for(facts("notes.txt", "text/plain")) is None
    assert "no route accepts it (routes: pdfs, old" in routes.turned_away(facts("notes.txt", "text/plain"))
    assert routes.turned_away(facts("old/a.txt", "text/plain")) == "route 'old' skips it"
    assert routes.turned_away(facts("a.pdf")) is None


def test_a_root_without_routes_takes_every_document_by_the_default_route(data_dir):
    settings = load_settings(str(data_dir))
    assert settings.routes == Routes()
    assert settings.routes.route_for(facts("anything.bin", "application/octet-stream")) is DEFAULT_ROUTE
    assert DEFAULT_ROUTE.goes_through("retrieval", "retrieval")
    assert DEFAULT_ROUTE.goes_through("default", "retrieval")


def test_where_a_route_sends_a_document():
    routes = parse_routes(
        [
            {"name": "contracts", "when": {"path": "c/"}, "serve": "default", "profiles": []},
            {"name": "drafts", "when": {"path": "d/"}, "serve": False},
            {"name": "rest"},
        ],
        ["default", "retrieval", "layout"],
        "retrieval",
    )
    contracts, drafts, rest = routes.routes
    assert contracts.goes_through("retrieval", "retrieval")
    assert not contracts.goes_through("layout", "retrieval")
    assert contracts.cut_as("retrieval", "retrieval") == "default"
    assert contracts.cut_as("default", "retrieval") == "default"
    assert not drafts.goes_through("retrieval", "retrieval") and drafts.goes_through("layout", "retrieval")
    assert rest.cut_as("retrieval", "retrieval") == "retrieval"
    assert contracts.described() == {
        "name": "contracts",
        "when": {"path": ["c/"]},
        "serve": "default",
        "profiles": [],
    }
    assert drafts.described()["serve"] is False


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"when": {"path": "a/"}}, "needs a name"),
        ({"name": "a", "when": {"paths": "a/"}}, "unknown test paths"),
        ({"name": "a", "serve": "nosuch"}, "serve names no profile: 'nosuch'"),
        ({"name": "a", "profiles": ["nosuch"]}, "profiles names no profile: nosuch"),
        ({"name": "a", "serve": False, "profiles": ["retrieval"]}, "serve = false and lists the served"),
        ({"name": "a", "ocr_dpi": 0}, "ocr_dpi must be a whole number above 0"),
        ({"name": "a", "parse_timeout": "soon"}, "parse_timeout must be a number above 0"),
        ({"name": "a", "when": {"larger_than_mib": -1}}, "larger_than_mib must be a number of MiB"),
        ({"name": "a", "when": {"any": {"path": "x"}}}, "any must be a list of filters"),
        ({"name": "a", "colour": "red"}, "unknown key colour"),
    ],
)
def test_a_route_that_cannot_be_used_as_written_is_refused_naming_it(entry, message):
    with pytest.raises(RoutingError, match="route|routes") as caught:
        parse_routes([entry], ["default", "retrieval"], "retrieval")
    assert message in str(caught.value)


def test_two_routes_of_one_name_and_routes_in_the_settings_file(data_dir):
    with pytest.raises(RoutingError, match="two routes are named a"):
        parse_routes([{"name": "a"}, {"name": "a"}], ["default"], "default")
    write(
        data_dir / "ingest_pipeline.toml",
        '[[routes]]\nname = "scans"\nwhen = { path = "scans/" }\nocr = false\n\n[[routes]]\nname = "rest"\n',
    )
    settings = load_settings(str(data_dir))
    assert [r.name for r in settings.routes.routes] == ["scans", "rest"]
    source = {"path": "scans/a.pdf", "media_type": PDF, "bytes": 10}
    assert settings.route_of(source).reader_settings() == {"ocr": False}
    write(data_dir / "ingest_pipeline.toml", '[[routes]]\nname = "x"\nserve = "layout"\n')
    with pytest.raises(RoutingError, match="serve names no profile"):
        load_settings(str(data_dir))
