"""The web explorer's JSON API (issue 10): the same JSON as the command line, errors as JSON, and
no input, however hostile, answered with a 500."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import LION_CHICK

starlette = pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from dobutsu_tb.analysis.web import create_app  # noqa: E402
from dobutsu_tb.analysis.web.app import MAX_BODY_BYTES, MAX_LINE_PLIES  # noqa: E402

SEED_LINE = "Lb4-c3 Cb2xb3 Lc3xb3 C*b2 Lb3-c3 Lb1-c1 C*a2 Lc1-b1 Ca2-a1+ Lb1xa1 Lc3-c2".split()
# A position after the seed's third ply with chicks in both hands, a catch-terminal position whose
# quiet moves lead out of the tablebase, and a try-terminal one.
POSITIONS = [LION_CHICK, "G/-l-/---/-L-/---/Cc", "S/-lR/-CL/---/---/-", "S/-L-/---/---/l--/Cc"]


@pytest.fixture(scope="module")
def client(lion_chick_tb):
    # raise_server_exceptions: an unexpected exception fails the test instead of becoming a 500.
    with TestClient(create_app(lion_chick_tb.path), raise_server_exceptions=True) as c:
        yield c


@pytest.mark.parametrize("position", POSITIONS)
def test_probe_is_probe_json(client, cli, lion_chick_tb, position):
    answer = client.get("/api/probe", params={"position": position})
    assert answer.status_code == 200
    assert answer.json() == json.loads(cli("probe", position, "--tb", lion_chick_tb.path, "--json").output)


def test_probe_of_the_start(client):
    data = client.get("/api/probe", params={"position": LION_CHICK}).json()
    assert (data["position"], data["category"], data["dtm"], data["terminal"]) == (LION_CHICK, "win", 15, None)
    assert [m["move"] for m in data["moves"][:2]] in (["Lb4-a3", "Lb4-c3"], ["Lb4-c3", "Lb4-a3"])
    assert [(m["category"], m["dtm"]) for m in data["moves"]] == [
        ("win", 15), ("win", 15), ("loss", -14), ("loss", -8), ("loss", -8)]
    assert [m["after"] for m in data["moves"]][:3] == [{"category": "loss", "dtm": -14}] * 2 + [
        {"category": "win", "dtm": 13}]


def test_probe_takes_a_fen_and_gote_to_move(client):
    fen = client.get("/api/probe", params={"position": "1l1/1c1/1C1/1L1[-] w 0 1"}).json()
    assert fen["position"] == LION_CHICK and fen["dtm"] == 15
    # Gote to move in the mirrored start: the same position for the tablebase.
    gote = client.get("/api/probe", params={"position": "G/-l-/-c-/-C-/-L-/-"}).json()
    assert (gote["category"], gote["dtm"]) == ("win", 15)
    assert {m["move"] for m in gote["moves"]} >= {"Lb1-a2", "Lb1-c2"}


def test_line_is_line_json(client, cli, lion_chick_tb):
    answer = client.get("/api/line", params={"position": LION_CHICK})
    assert answer.status_code == 200
    assert answer.json() == json.loads(cli("line", LION_CHICK, "--tb", lion_chick_tb.path, "--json").output)
    assert len(answer.json()["moves"]) == 15
    short = client.get("/api/line", params={"position": LION_CHICK, "max_plies": 3}).json()
    assert short["moves"] == answer.json()["moves"][:3]
    assert short["end"] == "stopped at max_plies before the end of the game"


def test_verify_line_is_verify_line_json(client, cli, lion_chick_tb):
    expected = json.loads(cli("verify-line", "--start", LION_CHICK, "--tb", lion_chick_tb.path, "--json",
                              *SEED_LINE).output)[0]
    for moves in (SEED_LINE, " ".join(SEED_LINE)):
        answer = client.post("/api/verify-line", json={"start": LION_CHICK, "moves": moves})
        assert answer.status_code == 200
        assert answer.json() == expected
    assert expected["first_mistake"] == 10
    # Without a start, the file's start position.
    assert client.post("/api/verify-line", json={"moves": SEED_LINE}).json() == expected


def test_verify_line_illegal_move_is_a_400_with_the_plies_before(client):
    answer = client.post("/api/verify-line", json={"start": LION_CHICK, "moves": ["Lb4-c3", "Lb1-b3"]})
    assert answer.status_code == 400
    data = answer.json()
    assert data["error"] == "ply 2 (Lb1-b3) is illegal: an L on b1 cannot move to b3"
    assert len(data["plies"]) == 1 and data["illegal"]["ply"] == 2


@pytest.mark.parametrize("moves", ["\ud800", ["Lb4-a3", "\udfff"], "Lb4-a3 \u00e9"])
def test_an_unencodable_move_is_a_400_not_a_500(client, moves):
    # A lone surrogate cannot be encoded in UTF-8: the answer echoes it escaped.
    body = json.dumps({"start": LION_CHICK, "moves": moves})  # ASCII, the surrogates escaped
    answer = client.post("/api/verify-line", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and "is illegal" in answer.json()["error"]


def test_stats_is_stats_json(client, cli, lion_chick_tb):
    answer = client.get("/api/stats")
    assert answer.status_code == 200
    data = answer.json()
    assert data == json.loads(cli("stats", "--tb", lion_chick_tb.path, "--json").output)
    assert sum(data["dtm_wins"]) == data["wins"] == 6465
    assert client.get("/api/stats").json() == data  # counted once, then kept


def test_info(client):
    data = client.get("/api/info").json()
    assert (data["file"], data["start"], data["nonterminal"]) == ("lion-chick.h5", LION_CHICK, 11711)
    assert data["start_value"] == {"category": "win", "dtm": 15}


def test_page_and_static_files(client):
    page = client.get("/")
    assert page.status_code == 200 and "<svg id=\"board\"" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in ("app.js", "style.css", "favicon.svg"):
        assert client.get(f"/static/{name}").status_code == 200
    # No CDN: the page loads nothing from elsewhere.
    assert "http" not in page.text.replace("http-equiv", "")


@pytest.mark.parametrize("method,url,body,status,message", [
    ("GET", "/api/probe", None, 400, "give a position"),
    ("GET", "/api/probe?position=", None, 400, "give a position"),
    ("GET", "/api/probe?position=S/gle/-c-/-C-/EL/-", None, 400, "rank 4 must have 3 cells"),
    ("GET", "/api/probe?position=S/-l-/-c-/-C-/-L-/L", None, 400, "cannot be in hand"),
    ("GET", "/api/probe?position=gl%C2%B2/1c1/1C1/ELG[-]%20w%200%201", None, 400, "unknown piece letter"),
    ("GET", "/api/probe?position=" + "S" * 101, None, 400, "at most 100 characters"),
    ("GET", "/api/probe?position=S/gle/-c-/-C-/ELG/-", None, 404, "not in this tablebase"),
    ("GET", "/api/line?position=S/-l-/-c-/-C-/-L-/-&max_plies=0", None, 400, "max_plies"),
    ("GET", "/api/line?position=S/-l-/-c-/-C-/-L-/-&max_plies=1e3", None, 400, "max_plies"),
    ("POST", "/api/verify-line", b"", 400, "must be JSON"),
    ("POST", "/api/verify-line", b"[1, 2]", 400, "JSON object"),
    ("POST", "/api/verify-line", b"[" * 100_000, 413, "over 65,536 bytes"),
    ("POST", "/api/verify-line", b"[" * 50_000, 400, "must be JSON"),
    ("POST", "/api/verify-line", b'{"moves": 5}', 400, '"moves" must be a list'),
    ("POST", "/api/verify-line", b'{"moves": NaN, "start": Infinity}', 400, '"start" must be'),
    ("POST", "/api/verify-line", b'{"moves": "\xff\xfe"}', 400, "must be JSON"),
    ("POST", "/api/verify-line", b'{"moves": []}', 400, "is empty"),
    ("POST", "/api/verify-line", b'{"moves": [null]}', 400, '"moves" must be a list'),
    ("POST", "/api/verify-line", b'{"moves": ["Lb4-c3"], "start": ["S"]}', 400, '"start" must be'),
    ("POST", "/api/verify-line", b'{"moves": ["' + b"x" * 1000 + b'"]}', 400, "is not a move"),
    ("POST", "/api/verify-line", json.dumps({"moves": ["Lb4-c3"] * (MAX_LINE_PLIES + 1)}).encode(), 413,
     f"at most {MAX_LINE_PLIES} plies"),
    ("POST", "/api/verify-line", b'{"start": "S/gle/-c-/-C-/ELG/-", "moves": "Lb4-c3"}', 404, "not in this tablebase"),
    ("GET", "/api/nothing", None, 404, "no such page"),
    ("GET", "/static/../../etc/passwd", None, 404, "no such page"),
    ("GET", "/static/nothing.js", None, 404, "no such page"),
    ("DELETE", "/api/probe", None, 405, "DELETE is not allowed"),
    ("GET", "/api/verify-line", None, 405, "GET is not allowed"),
    ("PUT", "/", None, 405, "PUT is not allowed"),
])
def test_errors_are_json(client, method, url, body, status, message):
    answer = client.request(method, url, content=body)
    assert answer.status_code == status
    assert message in answer.json()["error"]


def test_body_limit_without_content_length(client):
    def chunks():
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b" " * 1024
    answer = client.post("/api/verify-line", content=chunks())
    assert answer.status_code == 413


def test_uncovered_position_names_itself(client):
    data = client.get("/api/probe", params={"position": "gle/1c1/1C1/ELG[-] w 0 1"}).json()
    assert data["position"] == "S/gle/-c-/-C-/ELG/-" and "not in this tablebase" in data["error"]


_settings = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
_position_like = st.one_of(
    st.text(max_size=120),
    st.text(alphabet="SG/-lgecrLGECR123[]+ wb0", min_size=10, max_size=40),
    st.builds(lambda side, ranks, hand: "/".join([side, *ranks, hand]), st.sampled_from("SGX"),
              st.lists(st.text(alphabet="-lgecrLGECR", min_size=3, max_size=3), min_size=4, max_size=4),
              st.text(alphabet="-CEGceg", min_size=1, max_size=4)),
)


@_settings
@given(text=_position_like)
def test_any_position_text_gets_an_answer(client, text):
    for url in ("/api/probe", "/api/line"):
        answer = client.get(url, params={"position": text})
        assert answer.status_code in (200, 400, 404)
        assert answer.status_code == 200 or answer.json()["error"]


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=20),
                     lambda inner: (st.lists(inner, max_size=5)
                                    | st.dictionaries(st.text(max_size=8), inner, max_size=5)),
                     max_leaves=20)


@_settings
@given(start=st.one_of(_json, _position_like), moves=st.one_of(
    _json, st.lists(st.sampled_from(SEED_LINE + ["C*b2", "Lb4-a4", "x", "Ca2-a1"]), max_size=15)))
def test_any_verify_line_body_gets_an_answer(client, start, moves):
    answer = client.post("/api/verify-line", json={"start": start, "moves": moves})
    assert answer.status_code in (200, 400, 404, 413)
    assert answer.status_code == 200 or answer.json()["error"]


def test_the_page_and_probe_give_a_moves_note_in_the_same_words():
    """The third hostile round: the page said 'leaves the lion en prise' where ``probe`` says
    'leaves the lion to be captured' (and 'the lion's try wins' for 'the lion reaches the far
    rank'). The page writes the words of :func:`reports.move_note`."""
    from pathlib import Path

    from dobutsu_tb.analysis import web
    from dobutsu_tb.analysis.reports import move_note
    from dobutsu_tb.tablebase.probe import MoveValue
    from dobutsu_tb.tablebase.values import WIN, Terminal

    page = (Path(web.__file__).parent / "static" / "app.js").read_text(encoding="utf-8")
    for terminal in (Terminal.ROYAL_CAPTURED, Terminal.TRY, Terminal.CATCH):
        words = move_note(MoveValue("Lb1xb2", None, WIN, 1, terminal), "${royal}")
        assert words and f"`{words}`" in page, words
    assert f'"{move_note(MoveValue("Lb1-a1", None, None, None))}"' in page
    assert "en prise" not in page and "try wins" not in page
