// The dobutsu shogi tablebase explorer: the board, the moves, play against the tablebase,
// perfect lines, judged lines and the file's statistics, over the JSON API of `dobutsu-tb serve`.
//
// The position lives in the URL (?position=S/-l-/-c-/-C-/-L-/-, with &play=sente|gote when
// playing, and &final=MOVE after a move that captured the lion); history.state keeps the
// moves played and the last move. Every server text is put in the page as text, never as HTML.
// The game (board size, pieces, their steps, promotions, hands, the royal piece, the try rule)
// is the file's variant, from GET /api/info: nothing of the 3x4 game is written in here.

const SVG = "http://www.w3.org/2000/svg";
const FILE_LETTERS = "abcdefghijklmno";
const SIDES = ["Sente", "Gote"];
const STANDARD = "dobutsu";
const SEED_START = "S/-l-/-c-/-C-/-L-/-";
const SEED_LINE = "Lb4-c3 Cb2xb3 Lc3xb3 C*b2 Lb3-c3 Lb1-c1 C*a2 Lc1-b1 Ca2-a1+ Lb1xa1 Lc3-c2";
const EXAMPLE_PLIES = 40;  // the example line of another variant: its start's perfect line, cut there
const ENGINE_DELAY_MS = 120;  // just long enough to see one's own move before the answer
// Board geometry (SVG units): cell size, board origin, hand rows; the board's 3x4 size in CSS pixels.
const CELL = 100, BX = 30, BY = 134, HAND_TOP_Y = 8, HAND_H = 96, BOARD_PX = 360, BOARD_3X4_W = 340;

// The game of the file, from /api/info's variant (tablebase/game/variant.py, Variant.to_dict()).
let GAME = null;

function gameOf(variant) {
  const files = variant.files, ranks = variant.ranks;
  const kinds = {}, baseOf = {};
  for (const p of variant.pieces) {
    kinds[p.letter] = {
      letter: p.letter, name: p.name, title: p.name[0].toUpperCase() + p.name.slice(1),
      steps: p.steps, royal: p.royal, promotesTo: p.promotes_to || null, promotionRanks: p.promotion_ranks,
      drop: p.drop, forbiddenDropRanks: p.forbidden_drop_ranks,
    };
    baseOf[p.letter] = p.letter;
  }
  for (const p of variant.pieces) if (p.promotes_to) baseOf[p.promotes_to] = p.letter;
  const letters = variant.pieces.map((p) => p.letter).join("");
  const square = `[a-${FILE_LETTERS[files - 1]}][1-9][0-9]?`;
  const royal = variant.pieces.find((p) => p.royal);
  return {
    name: variant.name, title: variant.title, files, ranks, cells: files * ranks,
    fileLetters: FILE_LETTERS.slice(0, files), kinds, baseOf, royal: royal.name,
    handOrder: variant.hand_order, drops: variant.drops, tryRule: variant.try_rule, start: variant.start,
    moveRe: new RegExp(`^([${letters}])(?:(${square})([-x])|\\*)(${square})(\\+?)$`),
  };
}

// What the rules say about the pieces, in words (the file panel).
function rulesText(game) {
  const parts = [`${game.files} files × ${game.ranks} ranks`];
  for (const k of Object.values(game.kinds)) {
    if (k.promotesTo) {
      const zone = k.promotionRanks === 1 ? "the far rank" : `the far ${k.promotionRanks} ranks`;
      parts.push(`the ${k.name} promotes to ${game.kinds[k.promotesTo].name} on ${zone}`);
    }
    if (k.drop && k.forbiddenDropRanks.length) {
      const ranks = k.forbiddenDropRanks.map((r) => (r === 1 ? "the far rank" : `rank ${r} from the far end`));
      parts.push(`a ${k.name} is never dropped on ${ranks.join(" or ")}`);
    }
  }
  parts.push(game.drops ? `captured pieces go to hand (${[...game.handOrder].map((c) => game.kinds[c].name).join(", ")})`
    : "no drops: captured pieces leave the game");
  parts.push(game.tryRule ? `the try rule: a ${game.royal} safe on the far rank wins` : "no try rule");
  return parts.join("; ");
}

const $ = (id) => document.getElementById(id);

const state = {
  info: null,        // GET /api/info
  position: null,    // text of the position shown (our notation)
  probe: null,       // GET /api/probe answer for it, or null
  error: null,       // {status, message} when the probe failed
  final: null,       // the move that captured the lion, when the game ended so
  play: null,        // "sente" | "gote": the human's side against the tablebase
  record: null,      // {start, moves: [...], positions: [...]}: the moves played to get here
  last: null,        // the last move played (highlighted)
  selected: null,    // {square} or {drop: letter}
  hover: null,       // a move of the list under the mouse
  flipped: false,
  line: null,        // GET /api/line answer shown in the panel
  loadSeq: 0,
};
const probeCache = new Map();

// --- talking to the server ------------------------------------------------------------------

async function api(path, options) {
  let response;
  try {
    response = await fetch(path, options);
  } catch (err) {
    return { ok: false, status: 0, data: { error: "the server does not answer: is dobutsu-tb serve still running?" } };
  }
  let data;
  try {
    data = await response.json();
  } catch (err) {
    data = { error: `unexpected answer from the server (HTTP ${response.status})` };
  }
  return { ok: response.ok, status: response.status, data };
}

const query = (text) => encodeURIComponent(text).replace(/%2F/g, "/");

async function probe(text) {
  if (probeCache.has(text)) return probeCache.get(text);
  const result = await api(`/api/probe?position=${query(text)}`);
  if (result.ok || result.status === 404) {
    if (probeCache.size > 2000) probeCache.delete(probeCache.keys().next().value);
    probeCache.set(text, result);
  }
  return result;
}

// --- positions and moves --------------------------------------------------------------------

// {board: a letter or "" per square (a1 b1 ... row by row; upper case Sente), hands: [sente, gote] letters, turn}
function parsePosition(text) {
  const fields = text.split("/");
  const board = [...fields.slice(1, -1).join("")].map((c) => (c === "-" ? "" : c));
  const hand = fields[fields.length - 1];
  const letters = hand === "-" ? [] : [...hand];
  return {
    board,
    hands: [letters.filter((c) => c === c.toUpperCase()), letters.filter((c) => c !== c.toUpperCase()).map((c) => c.toUpperCase())],
    turn: fields[0] === "S" ? 0 : 1,
  };
}

// Fairy-Stockfish's FEN of a position of our notation: a promoted piece is "+" and its base letter.
function fenOf(text) {
  const pos = parsePosition(text), files = GAME.files;
  const ranks = [];
  for (let r = 0; r < GAME.ranks; r++) {
    let out = "", gap = 0;
    for (const c of pos.board.slice(files * r, files * r + files)) {
      if (!c) { gap++; continue; }
      if (gap) { out += gap; gap = 0; }
      const base = GAME.baseOf[c.toUpperCase()];
      out += base === c.toUpperCase() ? c : `+${c === c.toUpperCase() ? base : base.toLowerCase()}`;
    }
    ranks.push(out + (gap ? gap : ""));
  }
  const hand = text.split("/").pop();
  return `${ranks.join("/")}[${hand}] ${pos.turn ? "b" : "w"} 0 1`;
}

const cellOf = (square) => GAME.files * (Number(square.slice(1)) - 1) + FILE_LETTERS.indexOf(square[0]);
const squareOf = (cell) => GAME.fileLetters[cell % GAME.files] + (Math.floor(cell / GAME.files) + 1);
const sideOfLetter = (c) => (c === c.toUpperCase() ? 0 : 1);
const kindName = (letter) => GAME.kinds[letter.toUpperCase()].title;

function parseMove(text) {
  const m = GAME.moveRe.exec(text);
  return m && { piece: m[1], from: m[2] || null, drop: !m[2], to: m[4], capture: m[3] === "x", promote: m[5] === "+" };
}

// The board after a move that captures the lion (the game is over: there is no position to probe).
function boardAfterCapture(text, move) {
  const pos = parsePosition(text), mv = parseMove(move);
  const from = cellOf(mv.from), to = cellOf(mv.to);
  let piece = pos.board[from];
  if (mv.promote) {
    const promoted = GAME.kinds[mv.piece].promotesTo;
    piece = pos.turn ? promoted.toLowerCase() : promoted;
  }
  pos.board[to] = piece;
  pos.board[from] = "";
  return pos;
}

// A move's category and dtm are its value for the side that plays it (docs/rules.md §7).
const sameValue = (a, b) => a.category === b.category && a.dtm === b.dtm;
const signed = (n) => (n > 0 ? `+${n}` : n < 0 ? `−${-n}` : "0");
const plies = (n) => `${n} ${n === 1 ? "ply" : "plies"}`;

function describe(value, unit = false) {
  if (!value) return "unknown";
  if (value.category === "draw") return "draw";
  const n = Math.abs(value.dtm);
  return `${value.category} in ${unit ? plies(n) : n}`;
}

// --- the URL and history ----------------------------------------------------------------------

function readUrl() {
  const params = new URLSearchParams(location.search);
  const play = params.get("play");
  return { position: params.get("position"), final: params.get("final"), play: play === "sente" || play === "gote" ? play : null };
}

function urlFor({ position, final, play }) {
  const parts = [];
  if (position) parts.push(`position=${query(position)}`);
  if (final) parts.push(`final=${query(final)}`);
  if (play) parts.push(`play=${play}`);
  return location.pathname + (parts.length ? `?${parts.join("&")}` : "");
}

// Go to a position: a new history entry (or the current one replaced) and a fresh load.
function navigate({ position, final = null, play = state.play }, { replace = false, record = null, last = null } = {}) {
  const entry = { record: record || { start: position, moves: [], positions: [position] }, last };
  const url = urlFor({ position, final, play });
  if (replace) history.replaceState(entry, "", url);
  else history.pushState(entry, "", url);
  return load();
}

function playMove(m, options = {}) {
  if (!state.probe || !state.record) return;
  const rec = state.record;
  const record = {
    start: rec.start, moves: [...rec.moves, m.move],
    positions: [...rec.positions, m.position || state.position],
  };
  state.selected = null;
  if (m.terminal === "lion captured") {
    return navigate({ position: state.position, final: m.move }, { ...options, record, last: m.move });
  }
  return navigate({ position: m.position }, { ...options, record, last: m.move });
}

// --- loading a position -----------------------------------------------------------------------

async function load() {
  const seq = ++state.loadSeq;
  const url = readUrl();
  if (!url.position) {
    if (!state.info) return;
    history.replaceState({ record: null, last: null }, "", urlFor({ position: state.info.start, play: url.play }));
    return load();
  }
  const entry = history.state || {};
  Object.assign(state, {
    position: url.position, final: url.final, play: url.play, last: entry.last || null,
    record: entry.record || { start: url.position, moves: [], positions: [url.position] },
    selected: null, hover: null,
  });
  document.body.dataset.state = "loading";
  const result = await probe(url.position);
  if (seq !== state.loadSeq) return;  // a newer load has started
  state.probe = result.ok ? result.data : null;
  state.error = result.ok ? null : { status: result.status, message: result.data.error };
  if (result.ok && result.data.position !== url.position) {
    // A FEN or another spelling: show our notation in the URL.
    state.position = result.data.position;
    history.replaceState(history.state, "", urlFor({ position: state.position, final: state.final, play: state.play }));
  } else if (!result.ok && result.data.position) {
    state.position = result.data.position;
  } else if (!result.ok) {
    state.position = null;
  }
  if (state.final && !finalMove()) {
    // Not a move that captures the lion here (an edited address): show the position alone, and
    // keep a position the server refused in the address as it was typed.
    state.final = null;
    history.replaceState(history.state, "", urlFor({ position: state.position || url.position, play: state.play }));
  }
  render();
  document.body.dataset.state = state.error ? "error" : "ready";
  document.body.dataset.position = state.position || "";
  document.dispatchEvent(new CustomEvent("explorer:rendered", { detail: { position: state.position } }));
  maybeAnswer(seq);
}

function finalMove() {
  return state.probe && state.final ? state.probe.moves.find((m) => m.move === state.final && m.terminal === "lion captured") : null;
}

// --- the game's state -------------------------------------------------------------------------

function repetitions() {
  if (!state.record || !state.position || state.final) return 0;
  return state.record.positions.filter((p) => p === state.position).length;
}

// null while the game goes on, else {winner: 0|1|null, text}.
function gameOver() {
  if (state.final) {
    const winner = parsePosition(state.position).turn;
    return { winner, text: `${SIDES[winner]} captures the ${GAME.royal}: ${SIDES[winner]} wins.` };
  }
  if (state.probe && state.probe.terminal === "try") {
    const winner = 1 - parsePosition(state.position).turn;
    return { winner, text: `${SIDES[winner]}'s ${GAME.royal} has reached the far rank safely: ${SIDES[winner]} wins.` };
  }
  if (state.probe && state.probe.moves.length === 0) {
    const winner = 1 - parsePosition(state.position).turn;
    return { winner, text: `${SIDES[1 - winner]} has no move: ${SIDES[winner]} wins.` };
  }
  if (repetitions() >= 3) return { winner: null, text: "The position has occurred three times: a draw by repetition." };
  return null;
}

const humanSide = () => (state.play === "sente" ? 0 : state.play === "gote" ? 1 : null);

function canMove() {
  if (!state.probe || state.error || gameOver()) return false;
  const turn = parsePosition(state.position).turn;
  return humanSide() === null || humanSide() === turn;
}

// Against the tablebase: when it is its turn, it plays the first (best) move at once.
function maybeAnswer(seq) {
  const human = humanSide();
  if (human === null || !state.probe || state.error || gameOver()) return;
  if (parsePosition(state.position).turn === human) return;
  const best = state.probe.moves[0];
  setTimeout(() => {
    if (seq === state.loadSeq) playMove(best, { replace: true });
  }, ENGINE_DELAY_MS);
}

// --- drawing ----------------------------------------------------------------------------------

function el(name, attrs = {}, parent = null, text = null) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function html(name, attrs = {}, parent = null, text = null) {
  const node = document.createElement(name);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "className") node.className = v;
    else node.setAttribute(k, v);
  }
  if (text !== null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

// Screen position of a cell's top left corner.
function cellXY(cell) {
  let r = Math.floor(cell / GAME.files), f = cell % GAME.files;
  if (state.flipped) { r = GAME.ranks - 1 - r; f = GAME.files - 1 - f; }
  return [BX + f * CELL, BY + r * CELL];
}

// A piece as a lettered tile with its name and a dot for each of its steps (Sente's view: forward
// is up; Gote's pieces are drawn turned round). A leap (two squares or more in a direction) is a
// ring near the tile's edge; a piece with leaps has its one-square steps' dots drawn nearer in.
// The board's SVG at the variant's size (the 3x4 board is 360 CSS pixels wide, and a cell keeps its size).
function sizeBoard() {
  const width = BX + GAME.files * CELL + 10, height = BY + GAME.ranks * CELL + 14 + HAND_H + HAND_TOP_Y;
  $("board").setAttribute("viewBox", `0 0 ${width} ${height}`);
  document.documentElement.style.setProperty("--board-px", `${Math.round((width * BOARD_PX) / BOARD_3X4_W)}px`);
}

function drawPiece(parent, letter, cx, cy, size, upsideDown) {
  const side = sideOfLetter(letter), kind = GAME.kinds[letter.toUpperCase()];
  const g = el("g", { transform: `translate(${cx} ${cy}) rotate(${upsideDown ? 180 : 0}) scale(${size / 84})` }, parent);
  el("rect", { x: -42, y: -42, width: 84, height: 84, rx: 12, class: `piece-tile ${side ? "gote" : "sente"}` }, g);
  const reach = (df, dr) => Math.max(Math.abs(df), Math.abs(dr));
  const leaps = kind.steps.some(([df, dr]) => reach(df, dr) > 1);
  for (const [df, dr] of kind.steps) {
    const n = reach(df, dr);
    if (n === 1) el("circle", { cx: df * (leaps ? 28 : 32), cy: -dr * (leaps ? 28 : 32), r: 4, class: "piece-dot" }, g);
    else el("circle", { cx: (df / n) * 38, cy: (-dr / n) * 38, r: 3, class: "piece-dot leap" }, g);
  }
  el("text", { x: 0, y: -3, class: "piece-letter" }, g, kind.letter);
  const name = el("text", { x: 0, y: 27, class: "piece-name" }, g, kind.title);
  if (kind.title.length > 10) name.setAttribute("textLength", "76");  // a long name squeezed into the tile
  return g;
}

function legalMoves() {
  return canMove() ? state.probe.moves : [];
}

function targetsOfSelection() {
  const sel = state.selected;
  if (!sel) return [];
  return legalMoves().filter((m) => {
    const mv = parseMove(m.move);
    return mv && (sel.square ? mv.from === sel.square : mv.drop && mv.piece === sel.drop);
  });
}

function renderBoard() {
  const svg = $("board");
  svg.replaceChildren();
  if (!state.position) return;
  const ended = finalMove();
  const pos = ended ? boardAfterCapture(state.position, ended.move) : parsePosition(state.position);
  const turn = parsePosition(state.position).turn;
  const lastMove = state.last ? parseMove(state.last) : null;
  const hover = state.hover ? parseMove(state.hover) : null;
  const highlight = new Map();
  if (lastMove) {
    if (lastMove.from) highlight.set(lastMove.from, "last");
    highlight.set(lastMove.to, "last");
  }
  if (hover) {
    if (hover.from) highlight.set(hover.from, "hover");
    highlight.set(hover.to, "hover");
  }
  // Coordinates.
  const { files, ranks } = GAME;
  for (let f = 0; f < files; f++) {
    const file = state.flipped ? files - 1 - f : f;
    el("text", { x: BX + f * CELL + CELL / 2, y: BY - 12, class: "coord" }, svg, GAME.fileLetters[file]);
  }
  for (let r = 0; r < ranks; r++) {
    const rank = state.flipped ? ranks - r : r + 1;
    el("text", { x: BX / 2, y: BY + r * CELL + CELL / 2, class: "coord" }, svg, String(rank));
  }
  // Squares and pieces.
  for (let cell = 0; cell < GAME.cells; cell++) {
    const [x, y] = cellXY(cell), square = squareOf(cell), piece = pos.board[cell];
    const g = el("g", { class: "cell", "data-square": square, role: "button",
      "aria-label": `${square}${piece ? ` ${SIDES[sideOfLetter(piece)]} ${kindName(piece)}` : ""}` }, svg);
    const rank = Math.floor(cell / files);
    const home = rank === ranks - 1 ? " home-sente" : rank === 0 ? " home-gote" : "";
    el("rect", { x, y, width: CELL, height: CELL, class: `square${home}${highlight.has(square) ? ` ${highlight.get(square)}` : ""}` }, g);
    if (piece) {
      const g2 = drawPiece(g, piece, x + CELL / 2, y + CELL / 2, 84, (sideOfLetter(piece) === 1) !== state.flipped);
      g2.setAttribute("data-piece", piece);
    }
  }
  // Hands: Gote's above the board, Sente's below (the other way round when flipped).
  for (const side of [0, 1]) {
    const top = (side === 1) !== state.flipped;
    const y = top ? HAND_TOP_Y : BY + ranks * CELL + 14, width = files * CELL;
    el("rect", { x: BX, y, width, height: HAND_H, rx: 8, class: "hand-area" }, svg);
    const toMove = turn === side && !ended;
    el("text", { x: BX + 10, y: y + 16, class: `hand-label${toMove ? " to-move" : ""}` }, svg,
      `${SIDES[side]}'s hand${toMove ? " · to move" : ""}`);
    if (toMove) el("circle", { cx: BX + width - 14, cy: y + 12, r: 6, class: "turn-marker" }, svg);
    // One slot per kind that can be in hand (in the variant's order), at most a cell wide.
    const slot = Math.min(CELL, width / Math.max(1, GAME.handOrder.length)), size = Math.min(66, slot - 8), k = size / 66;
    const kinds = [...GAME.handOrder].filter((c) => pos.hands[side].includes(c));
    kinds.forEach((kind, i) => {
      const count = pos.hands[side].filter((c) => c === kind).length;
      const cx = BX + slot / 2 + i * slot, cy = y + 58;
      const g = el("g", { class: "hand-piece", "data-hand": kind, "data-side": SIDES[side].toLowerCase(), role: "button",
        "aria-label": `${SIDES[side]}'s ${kindName(kind)} in hand${count > 1 ? ` (${count})` : ""}` }, svg);
      drawPiece(g, side ? kind.toLowerCase() : kind, cx, cy, size, (side === 1) !== state.flipped);
      if (state.selected && state.selected.drop === kind && side === turn) {
        el("rect", { x: cx - 36 * k, y: cy - 36 * k, width: 72 * k, height: 72 * k, rx: 10, class: "selected-outline" }, svg);
      }
      if (count > 1) {
        el("circle", { cx: cx + 32 * k, cy: cy - 28 * k, r: 11, class: "count-bg" }, g);
        el("text", { x: cx + 32 * k, y: cy - 28 * k, class: "count" }, g, `×${count}`);
      }
    });
    const empty = GAME.drops ? "(empty)" : "(no drops: captured pieces leave the game)";
    if (!kinds.length) el("text", { x: BX + width / 2, y: y + 60, class: "hand-label", "text-anchor": "middle" }, svg, empty);
  }
  // Selection and targets.
  if (state.selected && state.selected.square) {
    const [x, y] = cellXY(cellOf(state.selected.square));
    el("rect", { x: x + 2.5, y: y + 2.5, width: CELL - 5, height: CELL - 5, class: "selected-outline" }, svg);
  }
  for (const m of targetsOfSelection()) {
    const mv = parseMove(m.move), [x, y] = cellXY(cellOf(mv.to));
    const occupied = pos.board[cellOf(mv.to)];
    el("circle", { cx: x + CELL / 2, cy: y + CELL / 2, r: occupied ? 44 : 16, class: `target${occupied ? " capture" : ""}` }, svg);
  }
}

function renderValue() {
  const value = $("value"), detail = $("value-detail");
  value.className = "value";
  if (state.error) {
    value.classList.add("missing");
    value.textContent = state.error.status === 404 ? "Not in this tablebase" : "No position";
    detail.textContent = state.error.message;
    return;
  }
  const p = state.probe, turn = parsePosition(state.position).turn, side = SIDES[turn], other = SIDES[1 - turn];
  const n = Math.abs(p.dtm);
  const over = gameOver();
  if (state.final) {
    value.textContent = `${side} wins`;
    detail.textContent = `${side} has captured the ${GAME.royal} with ${state.final}.`;
    return;
  }
  if (p.category === "win") value.textContent = `${side} wins in ${plies(n)}`;
  else if (p.category === "loss") value.textContent = n === 0 ? `${other} has won` : `${other} wins in ${plies(n)}`;
  else value.textContent = "Draw with best play";
  value.classList.add(p.category);
  const note = p.terminal === "catch" ? ` (it can capture the enemy ${GAME.royal})` : p.terminal === "try" ? " (the game is over)" : "";
  detail.textContent = `${side} to move: ${describe(p, true)} for ${side}${note}; DTM ${signed(p.dtm)}.`;
  if (over && over.winner === null) detail.textContent += " " + over.text;
}

function renderMoves() {
  const body = $("moves").tBodies[0];
  body.replaceChildren();
  // No list once the game is over (the box above says why).
  $("moves").hidden = !state.probe || Boolean(state.error) || Boolean(state.final) || !state.probe.moves.length;
  if ($("moves").hidden) return;
  // Without the values, the order would give the best move away: list the moves by name.
  const hidden = $("hide-values").checked;
  const moves = hidden ? [...state.probe.moves].sort((a, b) => (a.move < b.move ? -1 : 1)) : state.probe.moves;
  const best = state.probe.moves[0];
  const clickable = canMove();
  for (const m of moves) {
    const isBest = sameValue(m, best);
    const tr = html("tr", { className: `${m.category}${isBest ? " best" : ""}`, "data-move": m.move }, body);
    html("td", { className: "mv-best", title: isBest ? "a best move" : "" }, tr, isBest ? "★" : "");
    html("td", { className: "mv-move" }, tr, m.move);
    html("td", { className: "mv-result" }, tr, describe(m.category === "unknown" ? null : m, true));
    html("td", { className: "mv-dtm", title: "the move's signed DTM, for the side that plays it" }, tr,
      m.dtm === null ? "?" : signed(m.dtm));
    const royal = GAME.royal;  // the words of `dobutsu-tb probe` (reports.move_note; a test holds them equal)
    const note = m.category === "unknown" ? "not in this tablebase" : m.terminal === "lion captured" ? `captures the ${royal}`
      : m.terminal === "try" ? `the ${royal} reaches the far rank safely` : m.terminal === "catch" ? `leaves the ${royal} to be captured` : "";
    html("td", { className: "mv-note" }, tr, note);
    if (!clickable) tr.style.cursor = "default";
  }
}

function renderGameOver() {
  const box = $("game-over"), over = gameOver();
  box.hidden = !over;
  box.replaceChildren();
  if (!over) return;
  const human = humanSide();
  let headline = over.text;
  if (human !== null) {
    headline = over.winner === null ? "Draw." : over.winner === human ? "You win!" : "The tablebase wins.";
    html("span", {}, box, `${headline} ${over.text}`);
    const again = html("button", { type: "button", id: "play-again" }, box, "Play again");
    again.style.marginLeft = "0.8em";
    again.addEventListener("click", () => navigate({ position: state.record.start, play: state.play }));
  } else {
    html("span", {}, box, `Game over. ${over.text}`);
  }
}

function renderTexts() {
  $("position-text").textContent = state.position || "";
  $("fen-text").textContent = state.position ? fenOf(state.position) : "";
  const rec = state.record, p = $("record");
  p.hidden = !rec || !rec.moves.length;
  if (!p.hidden) {
    p.textContent = `Moves from ${rec.start}: ` + rec.moves.map((m, i) => `${i + 1}. ${m}`).join(" ");
  }
}

function renderPlay() {
  const human = humanSide();
  $("play-sente").classList.toggle("active", human === 0);
  $("play-gote").classList.toggle("active", human === 1);
  $("play-stop").hidden = human === null;
  const status = $("play-status");
  status.hidden = human === null;
  if (human !== null) {
    const over = gameOver(), turn = state.position ? parsePosition(state.position).turn : 0;
    status.textContent = over ? "The game is over." : turn === human ? `Your move (${SIDES[human]}).` : "The tablebase is thinking…";
  }
}

function renderLine() {
  const list = $("line-moves"), line = state.line;
  list.replaceChildren();
  const current = line ? plyInLine(line) : -1;
  if (line && current < 0) {
    state.line = null;  // the board has left the line
    return renderLine();
  }
  $("line-show").hidden = Boolean(line);
  $("line-prev").disabled = !line || current <= 0;
  $("line-next").disabled = !line || current >= line.moves.length;
  $("line-summary").textContent = line ? `${line.moves.length} plies from ${line.position}` +
    (line.end ? (line.end === "draw" ? ": a draw (the line stops)" : `: ${line.end}.`) : ": the game is already over.") : "";
  if (!line) return;
  line.moves.forEach((m, i) => {
    const li = html("li", { className: i + 1 === current ? "current" : "" }, list);
    html("span", { className: "ply" }, li, `${m.ply}.`);
    const b = html("button", { type: "button", "data-ply": String(m.ply) }, li, m.move);
    b.addEventListener("click", () => goToLinePly(i + 1));
  });
}

function render() {
  renderBoard();
  renderValue();
  renderMoves();
  renderGameOver();
  renderTexts();
  renderPlay();
  renderLine();
}

// --- the perfect line -------------------------------------------------------------------------

async function showLine() {
  if (!state.position || state.error) return;
  $("line-summary").textContent = "Finding the line…";
  const result = await api(`/api/line?position=${query(state.position)}`);
  if (!result.ok) {
    $("line-summary").textContent = result.data.error;
    return;
  }
  state.line = result.data;
  renderLine();
}

function goToLinePly(k) {
  const line = state.line, played = line.moves.slice(0, k);
  const positions = [line.position, ...played.filter((m) => m.position).map((m) => m.position)];
  const record = { start: line.position, moves: played.map((m) => m.move), positions };
  const last = played[k - 1], position = positions[positions.length - 1];
  if (last && last.position === null) return navigate({ position, final: last.move, play: null }, { record, last: last.move });
  return navigate({ position, play: null }, { record, last: last ? last.move : null });
}

// How many plies of the line lead to the board shown, or -1 when it is not on the line.
function plyInLine(line) {
  if (state.final) {
    const last = line.moves[line.moves.length - 1];
    return last && last.position === null && last.move === state.final ? line.moves.length : -1;
  }
  return [line.position, ...line.moves.map((m) => m.position)].indexOf(state.position);
}

function stepLine(delta) {
  const line = state.line;
  if (!line) return;
  const current = plyInLine(line);
  const k = Math.max(0, Math.min(line.moves.length, current + delta));
  if (k !== current) goToLinePly(k);
}

// --- judging a line ---------------------------------------------------------------------------

async function judge() {
  const error = $("judge-error"), verdict = $("judge-verdict"), table = $("judge-table");
  error.hidden = true;
  const start = $("judge-start").value.trim() || state.position || (state.info && state.info.start);
  const moves = $("judge-moves").value.trim();
  const result = await api("/api/verify-line", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ start, moves }),
  });
  if (!result.ok) {
    error.textContent = result.data.error;
    error.hidden = false;
    verdict.hidden = table.hidden = true;
    if (!result.data.plies) return;  // an illegal move comes with the verdicts of the plies before it
  }
  const report = result.data;
  verdict.textContent = report.verdict;
  verdict.className = `verdict ${report.perfect ? "perfect" : "flawed"}`;
  verdict.hidden = false;
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const p of report.plies) {
    const classes = p.optimal ? "" : `mistake${p.ply === report.first_mistake ? " first-mistake" : ""}`;
    const tr = html("tr", { className: classes, "data-ply": String(p.ply) }, body);
    html("td", {}, tr, String(p.ply));
    html("td", {}, tr, p.side === "sente" ? "Sente" : "Gote");
    html("td", { className: "mv-move" }, tr, p.move);
    html("td", {}, tr, describe(p.before));
    html("td", {}, tr, p.ending && p.ending.includes("captures") ? `${GAME.royal} lost` : describe(p.after));
    const text = p.optimal ? "optimal" : `${p.ply === report.first_mistake ? "FIRST MISTAKE" : "mistake"}: ${describe(p.result)}; best ${p.best.join(", ")}`;
    html("td", { className: p.optimal ? "optimal verdict-cell" : "verdict-cell" }, tr, text + (p.ending ? ` (${p.ending})` : ""));
    tr.addEventListener("click", () => goToJudgedPly(report, p.ply));
  }
  if (report.illegal) {
    const tr = html("tr", { className: "illegal", "data-ply": String(report.illegal.ply) }, body);
    html("td", {}, tr, String(report.illegal.ply));
    html("td", {}, tr, "");
    html("td", { className: "mv-move" }, tr, report.illegal.move);
    html("td", { colspan: "3" }, tr, `ILLEGAL: ${report.illegal.reason}`);
  }
  table.hidden = false;
  const first = body.querySelector("tr.first-mistake");
  if (first) first.scrollIntoView({ block: "nearest" });
}

// The example line: the seed's lion-and-chick line in the standard game, else the perfect line
// from the file's start (cut at EXAMPLE_PLIES: a drawn line goes on for ever).
async function judgeExample() {
  let start = SEED_START, moves = SEED_LINE;
  if (GAME.name !== STANDARD) {
    start = state.info.start;
    const result = await api(`/api/line?position=${query(start)}&max_plies=${EXAMPLE_PLIES}`);
    if (!result.ok) {
      $("judge-error").textContent = result.data.error;
      $("judge-error").hidden = false;
      return;
    }
    moves = result.data.moves.map((m) => m.move).join(" ");
  }
  $("judge-start").value = start;
  $("judge-moves").value = moves;
  return judge();
}

// Show the board after ply k of a judged line, found by following the moves through probes.
async function goToJudgedPly(report, k) {
  let position = report.start;
  const positions = [position], moves = [];
  for (const p of report.plies.slice(0, k)) {
    const result = await probe(position);
    const m = result.ok && result.data.moves.find((x) => x.move === p.move);
    if (!m) return;
    moves.push(p.move);
    if (m.terminal === "lion captured") {
      return navigate({ position, final: m.move, play: null }, { record: { start: report.start, moves, positions }, last: m.move });
    }
    position = m.position;
    positions.push(position);
  }
  return navigate({ position, play: null }, { record: { start: report.start, moves, positions }, last: moves[moves.length - 1] || null });
}

// --- the file's statistics --------------------------------------------------------------------

function renderInfo() {
  const info = state.info;
  const other = GAME.name === STANDARD ? "" : ` · ${GAME.title}`;
  $("file-info").textContent = `${info.file}: ${info.nonterminal.toLocaleString("en")} positions from ${info.start}${other}`;
  if (other) document.title = `${GAME.title}: tablebase`;
  $("file-rules").textContent = `${GAME.title}: ${rulesText(GAME)}.`;
  const dl = $("file-counts");
  dl.replaceChildren();
  const rows = [
    ["file", info.file], ["variant", `${GAME.name} (${GAME.files} files × ${GAME.ranks} ranks)`], ["start position", info.start],
    ["start value", `${describe(info.start_value, true)} for the side to move`],
    ["reachable positions", info.reachable], ["catch-terminal (win in 1)", info.catch_terminal],
    ...(GAME.tryRule ? [["try-terminal (loss in 0)", info.try_terminal]] : []), ["stored (non-terminal)", info.nonterminal],
    ["wins", info.wins], ["draws", info.draws], ["losses", info.losses],
  ];
  for (const [k, v] of rows) {
    html("dt", {}, dl, k);
    html("dd", {}, dl, typeof v === "number" ? v.toLocaleString("en") : v);
  }
}

let statsAsked = false;
async function loadStats() {
  if (statsAsked) return;
  statsAsked = true;
  $("stats-status").textContent = "Counting the positions per DTM (the whole file is read: about 15 s for the full tablebase)…";
  const result = await api("/api/stats");
  if (!result.ok) {
    statsAsked = false;
    $("stats-status").textContent = result.data.error;
    return;
  }
  $("stats-status").textContent = "";
  drawHistogram(result.data);
  const longest = $("longest");
  longest.replaceChildren();
  html("p", {}, longest, "The longest wins (click to see one):");
  const ol = html("ol", {}, longest);
  for (const w of result.data.longest) {
    const li = html("li", {}, ol);
    const a = html("a", { href: urlFor({ position: w.position }) }, li, w.position);
    html("span", {}, li, `: win in ${plies(w.dtm)}`);
    a.addEventListener("click", (ev) => { ev.preventDefault(); navigate({ position: w.position, play: null }); });
  }
}

function drawHistogram(stats) {
  const svg = $("histogram");
  svg.replaceChildren();
  $("histogram-figure").hidden = false;
  const W = 640, H = 260, left = 48, right = 10, mid = 125, half = 100;
  const top = Math.max(stats.dtm_wins.length, stats.dtm_losses.length, 2);
  const most = Math.max(1, ...stats.dtm_wins, ...stats.dtm_losses);
  const decades = Math.max(1, Math.ceil(Math.log10(most + 1)));
  const scale = (n) => (n > 0 ? (Math.log10(n + 1) / decades) * half : 0);
  const bw = (W - left - right) / top;
  for (let d = 0; d <= decades; d++) {
    const dy = (d / decades) * half;
    for (const y of [mid - dy, mid + dy]) el("line", { x1: left, x2: W - right, y1: y, y2: y, class: "grid" }, svg);
    el("text", { x: left - 4, y: mid - dy + 4, "text-anchor": "end" }, svg, d ? `1e${d}` : "0");
    if (d) el("text", { x: left - 4, y: mid + dy + 4, "text-anchor": "end" }, svg, `1e${d}`);
  }
  for (let d = 0; d < top; d++) {
    const x = left + d * bw, w = Math.max(bw - 0.5, 0.5);
    const wins = stats.dtm_wins[d] || 0, losses = stats.dtm_losses[d] || 0;
    if (wins) {
      const h = scale(wins);
      el("rect", { x, y: mid - h, width: w, height: h, class: "win" }, svg).appendChild(el("title", {}, null, `DTM ${d}: ${wins.toLocaleString("en")} wins`));
    }
    if (losses) {
      const h = scale(losses);
      el("rect", { x, y: mid, width: w, height: h, class: "loss" }, svg).appendChild(el("title", {}, null, `DTM ${d}: ${losses.toLocaleString("en")} losses`));
    }
  }
  el("line", { x1: left, x2: W - right, y1: mid, y2: mid, class: "axis" }, svg);
  const step = top > 100 ? 20 : top > 40 ? 10 : 5;
  for (let d = 0; d < top; d += step) el("text", { x: left + d * bw + bw / 2, y: H - 8, "text-anchor": "middle" }, svg, String(d));
  el("text", { x: W - right, y: 14, "text-anchor": "end" }, svg, "wins");
  el("text", { x: W - right, y: H - 22, "text-anchor": "end" }, svg, "losses");
}

// --- events -----------------------------------------------------------------------------------

function onBoardClick(ev) {
  if (!canMove()) return;
  const hand = ev.target.closest("[data-hand]"), cell = ev.target.closest("[data-square]");
  const pos = parsePosition(state.position);
  if (hand) {
    const side = hand.dataset.side === "sente" ? 0 : 1;
    state.selected = side === pos.turn && !(state.selected && state.selected.drop === hand.dataset.hand) ? { drop: hand.dataset.hand } : null;
    return renderBoard();
  }
  if (!cell) return;
  const square = cell.dataset.square;
  const move = targetsOfSelection().find((m) => parseMove(m.move).to === square);
  if (move) return playMove(move);
  const piece = pos.board[cellOf(square)];
  const own = piece && sideOfLetter(piece) === pos.turn;
  state.selected = own && !(state.selected && state.selected.square === square) ? { square } : null;
  renderBoard();
}

function onMovesClick(ev) {
  const tr = ev.target.closest("tr[data-move]");
  if (!tr || !canMove()) return;
  const move = state.probe.moves.find((m) => m.move === tr.dataset.move);
  if (move) playMove(move);
}

function onMovesHover(ev) {
  const tr = ev.target.closest("tr[data-move]");
  const move = tr ? tr.dataset.move : null;
  if (move !== state.hover) {
    state.hover = move;
    renderBoard();
  }
}

async function onPositionSubmit(ev) {
  ev.preventDefault();
  const text = $("position-input").value.trim(), error = $("position-error");
  error.hidden = true;
  if (!text) {
    error.textContent = `Type a position, e.g. ${state.info.start} or ${fenOf(state.info.start)}.`;
    error.hidden = false;
    return;
  }
  const result = await probe(text);
  if (!result.ok && result.status !== 404) {
    error.textContent = result.data.error;
    error.hidden = false;
    return;
  }
  const position = result.ok ? result.data.position : result.data.position || text;
  probeCache.set(position, result);
  await navigate({ position, play: null });
}

function startPlaying(side) {
  if (!state.position || state.error) return;
  state.flipped = side === "gote";
  const start = state.final ? state.record.start : state.position;
  return navigate({ position: start, play: side }, { record: { start, moves: [], positions: [start] } });
}

function init() {
  $("board").addEventListener("click", onBoardClick);
  const moves = $("moves");
  moves.addEventListener("click", onMovesClick);
  moves.addEventListener("mouseover", onMovesHover);
  moves.addEventListener("mouseleave", () => { state.hover = null; renderBoard(); });
  $("position-form").addEventListener("submit", onPositionSubmit);
  $("back").addEventListener("click", () => history.back());
  $("forward").addEventListener("click", () => history.forward());
  $("flip").addEventListener("click", () => { state.flipped = !state.flipped; renderBoard(); });
  $("to-start").addEventListener("click", () => state.info && navigate({ position: state.info.start, play: null }));
  $("play-sente").addEventListener("click", () => startPlaying("sente"));
  $("play-gote").addEventListener("click", () => startPlaying("gote"));
  $("play-stop").addEventListener("click", () => navigate({ position: state.position, final: state.final, play: null },
    { record: state.record, last: state.last }));
  $("hide-values").addEventListener("change", (ev) => {
    document.body.classList.toggle("hide-values", ev.target.checked);
    renderMoves();
  });
  $("line-show").addEventListener("click", showLine);
  $("line-prev").addEventListener("click", () => stepLine(-1));
  $("line-next").addEventListener("click", () => stepLine(1));
  $("judge-form").addEventListener("submit", (ev) => { ev.preventDefault(); judge(); });
  $("judge-here").addEventListener("click", () => { $("judge-start").value = state.position || ""; });
  $("judge-example").addEventListener("click", judgeExample);
  $("judge-record").addEventListener("click", () => {
    if (!state.record) return;
    $("judge-start").value = state.record.start;
    $("judge-moves").value = state.record.moves.join(" ");
  });
  $("stats-panel").addEventListener("toggle", (ev) => { if (ev.target.open) loadStats(); });
  window.addEventListener("popstate", load);
  document.addEventListener("keydown", (ev) => {
    if (ev.target.closest("input, textarea") || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (ev.key === "ArrowLeft") history.back();
    else if (ev.key === "ArrowRight") history.forward();
  });
}

async function main() {
  init();
  const url = readUrl();
  const [info] = await Promise.all([api("/api/info"), url.position ? probe(url.position) : null]);
  if (!info.ok) {
    $("value").textContent = "The server does not answer";
    $("value-detail").textContent = info.data.error;
    document.body.dataset.state = "error";
    return;
  }
  state.info = info.data;
  GAME = gameOf(state.info.variant);
  state.flipped = url.play === "gote";
  sizeBoard();
  renderInfo();
  $("judge-start").placeholder = state.info.start;
  $("position-input").placeholder = `${state.info.start}  or  ${fenOf(state.info.start)}`;
  if (GAME.name !== STANDARD) {
    $("judge-example").textContent = "Example: the perfect line from the start";
    $("judge-moves").placeholder = "moves in our notation, one after the other";
  }
  await load();
}

main();
