"""The web explorer in a real browser (issue 10): Debian's headless Chromium, driven by Playwright's
Python API, against ``dobutsu-tb serve`` on 127.0.0.1 with the lion-and-chick tablebase, and
(issue 18) with the lion-and-chick tablebase of the 5x3 board and the tiny 3x3 variant's.

Needs Chromium (``apt-get install chromium``; another binary with ``DOBUTSU_TB_CHROMIUM``) and
Playwright (``pip install -e '.[test]'``); without them the tests are skipped, unless
``DOBUTSU_TB_REQUIRE_BROWSER=1`` (as ``.ci/run`` sets) makes that a failure. Screenshots go to a
temporary folder, and those docs/web.md shows also to ``$DOBUTSU_TB_SCREENSHOTS`` (e.g. ``docs``)
when it is set: ``DOBUTSU_TB_SCREENSHOTS=docs python -m pytest tests/test_web_browser.py``.
"""

import os
import shutil
from pathlib import Path

import pytest

from conftest import LION_CHICK, LION_CHICK_5X3

CHROMIUM = os.environ.get("DOBUTSU_TB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SEED_LINE = "Lb4-c3 Cb2xb3 Lc3xb3 C*b2 Lb3-c3 Lb1-c1 C*a2 Lc1-b1 Ca2-a1+ Lb1xa1 Lc3-c2".split()
TIMEOUT_MS = 10_000


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set DOBUTSU_TB_CHROMIUM)"
    return None


if _missing() and os.environ.get("DOBUTSU_TB_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"the browser tests cannot run: {_missing()}")
pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)  # a fresh profile each launch
        yield b
        b.close()


def _open(browser, url):
    """A fresh page at ``url`` that fails the test on any error in the page."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    # The API's 400 and 404 answers are expected; anything else on the console is not.
    pg.on("console", lambda msg: errors.append(msg.text)
          if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
    pg.goto(url)
    yield pg
    context.close()
    assert errors == [], f"errors in the page: {errors}"


@pytest.fixture
def page(browser, web_server):
    yield from _open(browser, web_server)


@pytest.fixture
def page_5x3(browser, web_server_5x3):
    yield from _open(browser, web_server_5x3)


@pytest.fixture
def page_4x4(browser, web_server_4x4):
    yield from _open(browser, web_server_4x4)


@pytest.fixture
def page_3x3(browser, web_server_3x3):
    yield from _open(browser, web_server_3x3)


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    folder = tmp_path_factory.mktemp("screenshots")
    extra = os.environ.get("DOBUTSU_TB_SCREENSHOTS")

    def take(pg, name, docs=True):
        pg.screenshot(path=folder / f"{name}.png", full_page=True)
        if extra and docs:  # docs/web.md shows these
            Path(extra).mkdir(parents=True, exist_ok=True)
            pg.screenshot(path=Path(extra) / f"web-{name}.png", full_page=True)

    return take


@pytest.fixture(scope="module")
def tb(lion_chick_tb):
    from dobutsu_tb.tablebase.probe import open_tablebase

    with open_tablebase(lion_chick_tb.path) as t:
        yield t


@pytest.fixture(scope="module")
def tb_5x3(lion_chick_5x3_tb):
    from dobutsu_tb.tablebase.probe import open_tablebase

    with open_tablebase(lion_chick_5x3_tb.path) as t:
        yield t


def after(tb, position, *moves):
    """The position text after ``moves``, by the Python API (not the page's)."""
    for move in moves:
        position = next(m for m in tb.probe_moves(position) if m.move == move).position.text()
    return position


def ready(pg, position):
    """Wait until the page shows ``position`` with its value and moves."""
    pg.wait_for_function("p => document.body.dataset.position === p && document.body.dataset.state !== 'loading'",
                         arg=position)


def click_move(pg, move, side):
    """Play ``move`` by clicking on the board: the piece (or the piece in hand), then the square."""
    if move[1] == "*":
        pg.click(f'[data-hand="{move[0]}"][data-side="{side}"]')
    else:
        pg.click(f'[data-square="{move[1:3]}"]')
    pg.click(f'[data-square="{move[-3:-1] if move.endswith("+") else move[-2:]}"]')


def test_start_click_back_forward_reload(page, tb, shot):
    ready(page, LION_CHICK)
    assert page.inner_text("#value") == "Sente wins in 15 plies"
    rows = page.locator("#moves tbody tr")
    assert rows.count() == 5 and page.locator("#moves tbody tr.best").count() == 2
    assert sorted(r.get_attribute("data-move") for r in page.locator("#moves tr.best").all()) == ["Lb4-a3", "Lb4-c3"]
    assert page.locator("#moves tr.win").count() == 2 and page.locator("#moves tr.loss").count() == 3
    shot(page, "start")

    click_move(page, "Lb4-c3", "sente")
    second = after(tb, LION_CHICK, "Lb4-c3")
    ready(page, second)
    assert page.url.endswith(f"?position={second}")
    assert page.inner_text("#value") == "Sente wins in 14 plies"
    assert page.locator("#moves tbody tr").first.get_attribute("data-move") == "Cb2xb3"
    assert "loss in 14 plies" in page.locator("#moves tbody tr").first.inner_text()
    assert page.locator('[data-square="c3"] rect.last').count() == 1  # the last move is marked

    page.go_back()
    ready(page, LION_CHICK)
    assert page.inner_text("#value") == "Sente wins in 15 plies"
    page.go_forward()
    ready(page, second)
    page.reload()
    ready(page, second)

    page.click('#moves tr[data-move="Cb2xb3"]')  # a move from the list
    third = after(tb, second, "Cb2xb3")
    ready(page, third)
    assert page.inner_text("#value") == "Sente wins in 13 plies"
    assert page.locator('[data-hand="C"][data-side="gote"]').count() == 1


def test_drop_and_promotion_by_clicking(page, tb):
    position = after(tb, LION_CHICK, *SEED_LINE[:3])  # Gote to move, a chick in each hand
    page.goto(page.url.split("?")[0] + f"?position={position}")
    ready(page, position)
    click_move(page, "C*b2", "gote")
    ready(page, after(tb, position, "C*b2"))
    position = after(tb, LION_CHICK, *SEED_LINE[:8])
    page.goto(page.url.split("?")[0] + f"?position={position}")
    ready(page, position)
    click_move(page, "Ca2-a1+", "sente")  # a2 then a1: the chick promotes by itself
    ready(page, after(tb, position, "Ca2-a1+"))
    assert page.locator('[data-square="a1"] [data-piece="R"]').count() == 1


def test_paste_positions(page, shot):
    ready(page, LION_CHICK)
    page.fill("#position-input", "hello, world")
    page.click("#position-form button[type=submit]")
    error = page.locator("#position-error")
    error.wait_for(state="visible")
    assert "expected 6 fields" in error.inner_text()
    assert page.url.endswith(f"?position={LION_CHICK}")
    shot(page, "bad-input", docs=False)

    page.fill("#position-input", "S/gle/-c-/-C-/ELG/-")  # the standard start: not in this file
    page.press("#position-input", "Enter")
    ready(page, "S/gle/-c-/-C-/ELG/-")
    assert error.is_hidden()
    assert page.inner_text("#value") == "Not in this tablebase"
    assert "not reachable from S/-l-/-c-/-C-/-L-/-" in page.inner_text("#value-detail")
    assert page.locator('[data-square="b1"] [data-piece="l"]').count() == 1  # the board is drawn all the same

    page.fill("#position-input", "1l1/1c1/1C1/1L1[-] w 0 1")  # the lion-and-chick start as a FEN
    page.press("#position-input", "Enter")
    ready(page, LION_CHICK)
    assert "win in 15" in page.inner_text("#value-detail")
    assert page.inner_text("#value") == "Sente wins in 15 plies"
    assert page.url.endswith(f"?position={LION_CHICK}")


def _play_to_the_end(pg, human):
    """Play the page's best move for ``human`` until the game ends; return the values seen after
    each of the tablebase's answers (plies, for the side that wins)."""
    values = []
    while True:
        pg.wait_for_function("() => document.querySelector('#play-status').textContent.startsWith('Your move')"
                             " || !document.querySelector('#game-over').hidden")
        if pg.locator("#game-over").is_visible():
            return values
        values.append(int(pg.inner_text("#value").split(" in ")[1].split()[0]))
        before = pg.get_attribute("body", "data-position")
        click_move(pg, pg.locator("#moves tbody tr.best").first.get_attribute("data-move"), human)
        # A capture of the lion ends the game on the same position (the URL gains &final=MOVE).
        pg.wait_for_function("p => document.body.dataset.position !== p"
                             " || !document.querySelector('#game-over').hidden", arg=before)


def test_play_against_perfect_play(page, shot):
    ready(page, LION_CHICK)
    page.click("#play-sente")
    values = _play_to_the_end(page, "sente")
    # Sente plays best, and the tablebase (Gote) resists as long as possible: two plies a move.
    assert values == [15, 13, 11, 9, 7, 5, 3, 1]
    assert page.inner_text("#game-over").startswith("You win! Sente captures the lion")
    assert page.inner_text("#record").count(".") == 15
    assert "play=sente" in page.url
    shot(page, "play")

    page.click("#play-again")
    page.click("#play-gote")  # the tablebase (Sente) moves first, at once
    page.wait_for_function("() => document.querySelector('#play-status').textContent.startsWith('Your move')")
    assert page.inner_text("#value") == "Sente wins in 14 plies"
    assert page.locator("#board text.coord").first.text_content() == "c"  # Gote's view
    values = _play_to_the_end(page, "gote")
    assert values == [14, 12, 10, 8, 6, 4, 2]
    assert page.inner_text("#game-over").startswith("The tablebase wins.")


def test_judge_the_seed_line(page, tb, shot):
    ready(page, LION_CHICK)
    page.click("#judge-panel summary")
    page.click("#judge-example")
    page.locator("#judge-table tbody tr").first.wait_for()
    assert page.locator("#judge-table tbody tr").count() == 11
    flagged = page.locator("#judge-table tr.first-mistake")
    assert flagged.count() == 1 and page.locator("#judge-table tr.mistake").count() == 1
    assert flagged.get_attribute("data-ply") == "10"
    assert "Lb1xa1" in flagged.inner_text() and "best Lb1-c1 (loss in 6)" in flagged.inner_text()
    assert "the first mistake is ply 10" in page.inner_text("#judge-verdict")
    shot(page, "judge")
    flagged.click()  # the board after the mistake
    ready(page, after(tb, LION_CHICK, *SEED_LINE[:10]))
    assert page.inner_text("#value") == "Sente wins in 3 plies"

    page.fill("#judge-moves", "Lb4-c3 Lb1-b3")
    page.click("#judge-form button[type=submit]")
    page.locator("#judge-error").wait_for(state="visible")
    assert "ply 2 (Lb1-b3) is illegal" in page.inner_text("#judge-error")
    assert page.locator("#judge-table tr.illegal").count() == 1


def test_perfect_line_and_histogram(page, shot):
    ready(page, LION_CHICK)
    page.click("#line-panel summary")
    page.click("#line-show")
    page.locator("#line-moves li").nth(14).wait_for()
    assert page.locator("#line-moves li").count() == 15
    assert "Sente captures the lion" in page.inner_text("#line-summary")
    page.click("#line-next")
    page.wait_for_function("() => document.body.dataset.position !== 'S/-l-/-c-/-C-/-L-/-'")
    assert page.locator("#line-moves li.current").count() == 1
    page.click('#line-moves button[data-ply="15"]')
    page.locator("#game-over").wait_for(state="visible")
    assert "Sente captures the lion" in page.inner_text("#game-over")
    page.go_back()
    page.wait_for_function("() => document.querySelector('#game-over').hidden")

    page.click("#stats-panel summary")
    page.locator("#histogram rect.win").first.wait_for()
    assert page.locator("#histogram rect.win").count() == 11  # wins in 1, 3, ..., 21 plies
    assert page.locator("#longest li").count() == 10
    shot(page, "line-and-stats")


def test_hide_the_values(page):
    ready(page, LION_CHICK)
    page.check("#hide-values")
    assert page.locator("#value").is_hidden()
    # Listed by name, so that the order gives nothing away.
    assert [r.get_attribute("data-move") for r in page.locator("#moves tbody tr").all()] == [
        "Cb3xb2", "Lb4-a3", "Lb4-a4", "Lb4-c3", "Lb4-c4"]
    page.uncheck("#hide-values")
    assert page.locator("#value").is_visible()
    assert page.locator("#moves tbody tr").first.get_attribute("class").startswith("win")


# --- other variants: the board drawn at the file's size -------------------------------------------


def _coordinates(pg):
    return [t.text_content() for t in pg.locator("#board text.coord").all()]


def test_5x3_board_clicks_drop_promotion_and_url(page_5x3, tb_5x3, shot):
    pg = page_5x3
    ready(pg, LION_CHICK_5X3)
    assert _coordinates(pg) == ["a", "b", "c", "1", "2", "3", "4", "5"]
    assert pg.locator("#board [data-square]").count() == 15
    assert pg.get_attribute("#board", "viewBox") == "0 0 340 752"
    assert pg.locator('[data-square="b5"] [data-piece="L"]').count() == 1
    assert pg.locator('[data-square="b1"] [data-piece="l"]').count() == 1
    assert pg.locator('[data-square="b4"] [data-piece="C"]').count() == 1
    assert pg.locator('[data-square="b5"] .piece-dot').count() == 8  # the lion's eight steps
    assert pg.locator('[data-square="b4"] .piece-dot').count() == 1
    assert pg.get_attribute('[data-square="b2"]', "aria-label") == "b2 Gote Chick"
    assert pg.locator("#board rect.home-sente").count() == 3  # rank 5, Sente's home
    assert pg.locator('[data-square="a5"] rect.home-sente').count() == 1
    assert pg.inner_text("#value") == "Gote wins in 20 plies"
    assert pg.inner_text("#fen-text") == "1l1/1c1/3/1C1/1L1[-] w 0 1"
    assert sorted(r.get_attribute("data-move") for r in pg.locator("#moves tr.best").all()) == [
        "Lb5-a4", "Lb5-a5", "Lb5-c4", "Lb5-c5"]
    assert "loss in 12 plies" in pg.inner_text('#moves tr[data-move="Cb4-b3"]')
    assert "dobutsu-5x3 (3 files × 5 ranks)" in pg.text_content("#file-counts")

    click_move(pg, "Lb5-a4", "sente")  # the piece, then the square
    second = after(tb_5x3, LION_CHICK_5X3, "Lb5-a4")
    ready(pg, second)
    assert pg.url.endswith(f"?position={second}")
    assert pg.inner_text("#value") == "Gote wins in 19 plies"
    assert pg.locator('[data-square="a4"] rect.last').count() == 1
    pg.reload()  # the position comes back from the URL
    ready(pg, second)
    pg.go_back()
    ready(pg, LION_CHICK_5X3)

    line = [m.move for m in tb_5x3.principal_variation(LION_CHICK_5X3)]
    position = after(tb_5x3, LION_CHICK_5X3, *line[:8])  # Sente to move, a chick in each hand
    pg.goto(pg.url.split("?")[0] + f"?position={position}")
    ready(pg, position)
    assert pg.locator('[data-hand="C"][data-side="gote"]').count() == 1
    pg.click('[data-hand="C"][data-side="sente"]')
    targets = pg.locator("#board circle.target")
    assert targets.count() == 13  # every empty square
    shot(pg, "5x3")
    pg.click('[data-square="b4"]')
    ready(pg, after(tb_5x3, position, "C*b4"))
    assert pg.locator('[data-square="b4"] [data-piece="C"]').count() == 1
    assert pg.locator('[data-hand][data-side="sente"]').count() == 0

    position = after(tb_5x3, LION_CHICK_5X3, *line[:13])  # Gote's chick on a4, one step from its far rank
    pg.goto(pg.url.split("?")[0] + f"?position={position}")
    ready(pg, position)
    click_move(pg, "Ca4-a5+", "gote")  # a4 then a5: the chick promotes by itself
    ready(pg, after(tb_5x3, position, "Ca4-a5+"))
    assert pg.locator('[data-square="a5"] [data-piece="r"]').count() == 1
    assert pg.get_attribute('[data-square="a5"]', "aria-label") == "a5 Gote Hen"
    assert "+c" in pg.inner_text("#fen-text")


def test_4x4_board_squares_beyond_one_word(page_4x4, lion_chick_4x4_tb, shot):
    """A board of 16 squares (the fourth rank in the state's second word): drawn at its size,
    played by clicks, its values the file's."""
    from conftest import LION_CHICK_4X4
    from dobutsu_tb.tablebase.probe import open_tablebase

    pg = page_4x4
    ready(pg, LION_CHICK_4X4)
    assert _coordinates(pg) == ["a", "b", "c", "d", "1", "2", "3", "4"]
    assert pg.locator("#board [data-square]").count() == 16
    assert pg.locator('[data-square="b4"] [data-piece="L"]').count() == 1
    assert pg.locator('[data-square="c1"] [data-piece="l"]').count() == 1
    assert pg.locator("#board rect.home-sente").count() == 4
    assert pg.inner_text("#value") == "Sente wins in 9 plies"
    assert pg.inner_text("#fen-text") == "2l1/2c1/1C2/1L2[-] w 0 1"
    assert "dobutsu-4x4 (4 files × 4 ranks)" in pg.text_content("#file-counts")
    with open_tablebase(lion_chick_4x4_tb.path) as tb:
        best = tb.principal_variation(LION_CHICK_4X4)[0].move
        click_move(pg, best, "sente")
        ready(pg, after(tb, LION_CHICK_4X4, best))
    assert pg.inner_text("#value") == "Sente wins in 8 plies"
    shot(pg, "4x4", docs=False)


def test_5x3_positions_of_the_wrong_size(page_5x3):
    pg = page_5x3
    ready(pg, LION_CHICK_5X3)
    error = pg.locator("#position-error")
    for text, why in [(LION_CHICK, "expected 7 fields"), ("1l1/1c1/1C1/1L1[-] w 0 1", "expected 5 ranks"),
                      ("S/-l--/-c--/----/-C--/-L--/-", "rank 1 must have 3 cells")]:
        pg.fill("#position-input", text)
        pg.press("#position-input", "Enter")
        error.wait_for(state="visible")
        assert why in error.inner_text() and "a position of dobutsu-5x3: 3 files, 5 ranks" in error.inner_text()
        assert pg.url.endswith(f"?position={LION_CHICK_5X3}")
    pg.fill("#position-input", "1l1/1c1/3/1C1/1L1[-] w 0 1")  # the start as a FEN of this board
    pg.press("#position-input", "Enter")
    pg.wait_for_function("() => document.querySelector('#position-error').hidden")
    ready(pg, LION_CHICK_5X3)
    # A position of the 3x4 board in the address: the message, no board, no error in the page.
    pg.goto(pg.url.split("?")[0] + f"?position={LION_CHICK}")
    pg.wait_for_function("() => document.body.dataset.state === 'error'")
    assert pg.inner_text("#value") == "No position" and "expected 7 fields" in pg.inner_text("#value-detail")
    assert pg.locator("#board [data-square]").count() == 0
    pg.click("#to-start")
    ready(pg, LION_CHICK_5X3)


def test_5x3_line_judge_and_play(page_5x3, tb_5x3):
    pg = page_5x3
    ready(pg, LION_CHICK_5X3)
    pg.click("#line-panel summary")
    pg.click("#line-show")
    pg.locator("#line-moves li").nth(19).wait_for()
    assert pg.locator("#line-moves li").count() == 20
    assert "Gote captures the lion" in pg.inner_text("#line-summary")

    pg.click("#judge-panel summary")
    pg.click("#judge-example")  # another variant's example: the perfect line from the file's start
    pg.locator("#judge-table tbody tr").nth(19).wait_for()
    assert pg.locator("#judge-table tbody tr").count() == 20 and pg.locator("#judge-table tr.mistake").count() == 0
    assert "is perfect play" in pg.inner_text("#judge-verdict")
    pg.fill("#judge-moves", "Lb5-a4 Lb1-a2 Cb4-b3")
    pg.click("#judge-form button[type=submit]")
    pg.wait_for_function("() => document.querySelectorAll('#judge-table tbody tr').length === 3")
    flagged = pg.locator("#judge-table tr.first-mistake")
    assert flagged.get_attribute("data-ply") == "3" and "best La4-a5" in flagged.inner_text()
    flagged.click()  # the board after the mistake
    ready(pg, after(tb_5x3, LION_CHICK_5X3, "Lb5-a4", "Lb1-a2", "Cb4-b3"))

    pg.click("#to-start")
    ready(pg, LION_CHICK_5X3)
    pg.click("#play-gote")  # the tablebase (Sente) moves first; Gote wins, its chicks dropped and promoted
    pg.wait_for_function("() => document.querySelector('#play-status').textContent.startsWith('Your move')")
    assert _coordinates(pg) == ["c", "b", "a", "5", "4", "3", "2", "1"]  # Gote's view
    assert _play_to_the_end(pg, "gote") == [19, 17, 15, 13, 11, 9, 7, 5, 3, 1]
    assert pg.inner_text("#game-over").startswith("You win! Gote captures the lion")
    assert pg.inner_text("#record").count(".") == 20


def test_3x3_board_and_play(page_3x3):
    pg = page_3x3
    start = "S/-l-/c-C/-L-/-"
    ready(pg, start)
    assert _coordinates(pg) == ["a", "b", "c", "1", "2", "3"]
    assert pg.locator("#board [data-square]").count() == 9
    assert pg.inner_text("#fen-text") == "1l1/c1C/1L1[-] w 0 1"
    assert pg.inner_text("#value") == "Sente wins in 7 plies"
    pg.click("#play-sente")
    assert _play_to_the_end(pg, "sente") == [7, 5, 3, 1]
    assert pg.inner_text("#game-over").startswith("You win! Sente captures the lion")
