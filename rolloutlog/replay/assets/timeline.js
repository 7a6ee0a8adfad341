// rolloutlog timeline: uPlot keeps the time scale, the axis, drag-to-zoom and the canvas;
// this script draws the run's lanes in uPlot's draw hook and answers hover.
// window.__timeline.stats() reports what the last draw showed (for tests and benchmarks).
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("timeline-data").textContent);
  const TYPES = { Float32: Float32Array, Uint32: Uint32Array, Int32: Int32Array,
    Uint8: Uint8Array, Int8: Int8Array, Int16: Int16Array };
  function decode(column) {
    const text = atob(column.b64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return new TYPES[column.type](bytes.buffer);
  }
  const C = {};
  for (const name in D.columns) C[name] = decode(D.columns[name]);

  const MARKER_STYLE = {
    cancelled_stale: ["#e377c2", "triangle", "▲"], cancelled_overload: ["#8c564b", "triangle", "▲"],
    cancelled_straggler: ["#17becf", "triangle", "▲"], cancelled_shutdown: ["#7f7f7f", "triangle", "▲"],
    cancelled_restart: ["#bcbd22", "triangle", "▲"], cancelled_leftover: ["#9467bd", "triangle", "▲"],
    cancelled_redundant: ["#aec7e8", "triangle", "▲"],
    dropped: ["#d62728", "diamond", "◆"], failed: ["#000000", "square", "■"],
    late: ["#ff7f0e", "circle", "●"],
  };
  const TRAINER_COLOR = { busy: "#2ca02c", weight_update: "#9467bd", idle: "#d9d9d9" };
  // why the trainer waited (rolloutlog explain), one colour a cause
  const CAUSE_COLOR = { pause: "#9467bd", hold: "#8c564b", held: "#e377c2", straggler: "#17becf",
    gate: "#ff7f0e", redo: "#d62728", failed: "#555555", fill: "#bdbdbd" };
  const LANE = 16, GAP = 4; // trainer, causes and batch lanes, CSS pixels
  const LANES = 3;
  function versionColor(v, alpha) { // golden-angle hues: neighbouring versions differ
    return "hsla(" + ((v * 137.508) % 360) + ",70%,45%," + alpha + ")";
  }

  const stats = { episodes: D.episodes, rows: D.rows, draws: 0, bars_visible: 0, bars_drawn: 0,
    markers_visible: {}, markers_drawn: {}, version_lines: 0, ships: 0, trainer_spans: 0,
    cause_spans: 0,
    pauses_visible: 0,
    x_min: 0, x_max: 0, first_draw_ms: null, last_draw_ms: null, draw_ms: null, parts_ms: {} };

  function lowerBound(arr, lo, hi, value) { // first index in [lo, hi) with arr[i] >= value
    while (lo < hi) { const mid = (lo + hi) >>> 1; if (arr[mid] < value) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function layout(u) {
    const r = uPlot.pxRatio, b = u.bbox;
    const rowsTop = b.top + LANES * (LANE + GAP) * r;
    const rowH = (b.top + b.height - rowsTop) / Math.max(D.rows, 1);
    const xmin = u.scales.x.min, xmax = u.scales.x.max;
    const k = b.width / (xmax - xmin);
    return { r, b, rowsTop, rowH, xmin, xmax, px: (t) => b.left + (t - xmin) * k };
  }

  function draw(u) {
    const began = performance.now();
    const L = layout(u), ctx = u.ctx;
    ctx.save();
    ctx.textAlign = "left";
    ctx.beginPath(); ctx.rect(L.b.left, L.b.top, L.b.width, L.b.height); ctx.clip();
    const parts = { trainer: drawTrainer, causes: drawCauses, ships: drawShips, episodes: drawEpisodes,
      pauses: drawPauses, markers: drawMarkers, versions: drawVersions };
    for (const name in parts) {
      const t = performance.now();
      parts[name](ctx, L);
      stats.parts_ms[name] = performance.now() - t;
    }
    ctx.restore();
    stats.draws++; stats.x_min = L.xmin; stats.x_max = L.xmax;
    stats.last_draw_ms = performance.now();
    stats.draw_ms = stats.last_draw_ms - began;
    if (stats.first_draw_ms === null) stats.first_draw_ms = stats.last_draw_ms;
    document.getElementById("range").textContent =
      "showing " + Math.max(L.xmin, D.range[0]).toFixed(2) + " s … " +
      Math.min(L.xmax, D.range[1]).toFixed(2) + " s"; // not the padding past either end
  }

  function clampX(L, x) { return Math.max(L.b.left - 2, Math.min(L.b.left + L.b.width + 2, x)); }

  function drawTrainer(ctx, L) {
    let n = 0;
    for (const [s, e, kind] of D.trainer) {
      if (e < L.xmin || s > L.xmax) continue;
      const x0 = clampX(L, L.px(s)), x1 = clampX(L, L.px(e));
      ctx.fillStyle = TRAINER_COLOR[D.trainer_kinds[kind]];
      ctx.fillRect(x0, L.b.top, Math.max(x1 - x0, 1), LANE * L.r); n++;
    }
    stats.trainer_spans = n;
    label(ctx, L, "trainer", L.b.top);
  }

  function drawCauses(ctx, L) {
    const y = L.b.top + (LANE + GAP) * L.r;
    let n = 0;
    for (const [s, e, kind] of D.causes) {
      if (e < L.xmin || s > L.xmax) continue;
      const x0 = clampX(L, L.px(s)), x1 = clampX(L, L.px(e));
      ctx.fillStyle = CAUSE_COLOR[D.cause_kinds[kind]];
      ctx.fillRect(x0, y, Math.max(x1 - x0, 1), LANE * L.r); n++;
    }
    stats.cause_spans = n;
    label(ctx, L, "why it waited", y);
  }

  function drawShips(ctx, L) {
    const y = L.b.top + 2 * (LANE + GAP) * L.r;
    let n = 0, lastLabel = -Infinity;
    ctx.fillStyle = "#444"; ctx.font = 10 * L.r + "px sans-serif"; ctx.textBaseline = "middle";
    for (const [t, step] of D.ships) {
      if (t < L.xmin || t > L.xmax) continue;
      const x = L.px(t);
      ctx.fillRect(Math.round(x), y, Math.max(L.r, 1), LANE * L.r); n++;
      if (x - lastLabel > 34 * L.r) { ctx.fillText("s" + step, x + 2 * L.r, y + LANE * L.r / 2); lastLabel = x; }
    }
    stats.ships = n;
    label(ctx, L, "batches", y);
  }

  function label(ctx, L, text, y) {
    ctx.fillStyle = "#000a"; ctx.font = 10 * L.r + "px sans-serif"; ctx.textBaseline = "top";
    ctx.fillText(text, L.b.left + 2 * L.r, y + 2 * L.r);
  }

  // Episodes and markers are painted into one pixel buffer (a Uint32Array over ImageData),
  // composited onto uPlot's canvas with one drawImage: hundreds of thousands of bars cost a
  // few typed-array fills each instead of a canvas call each.
  let raster = null;
  function rasterFor(L) {
    const w = Math.max(1, Math.ceil(L.b.width));
    const h = Math.max(1, Math.ceil(L.b.top + L.b.height - L.rowsTop));
    if (!raster || raster.w !== w || raster.h !== h) {
      const canvas = document.createElement("canvas");
      canvas.width = w; canvas.height = h;
      const context = canvas.getContext("2d"), image = context.createImageData(w, h);
      raster = { w, h, canvas, context, image, pixels: new Uint32Array(image.data.buffer) };
    }
    raster.pixels.fill(0);
    return raster;
  }
  function rgba(hex, alpha) { // "#rrggbb" -> a little-endian RGBA pixel
    const n = parseInt(hex.slice(1), 16);
    return ((Math.round(alpha * 255) << 24) | ((n & 255) << 16) | (n & 0xff00) | (n >> 16)) >>> 0;
  }
  function versionHex(v) { // the hue of versionColor(v), as #rrggbb
    const h = (v * 137.508) % 360, s = 0.7, l = 0.45, a = s * Math.min(l, 1 - l);
    const f = (n) => { const k = (n + h / 30) % 12; return l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1)); };
    return "#" + [f(0), f(8), f(4)].map((x) => Math.round(x * 255).toString(16).padStart(2, "0")).join("");
  }

  // Level of detail: within one colour, a bar that falls inside the pixels already painted
  // on its row is skipped, so at most about one bar per pixel, row and colour is painted.
  function drawEpisodes(ctx, L) {
    const R = rasterFor(L), start = C.start, end = C.end, row = C.row, pixels = R.pixels;
    const last = new Float64Array(D.rows), left = L.b.left;
    const gap = L.rowH > 3 ? 1 : 0;
    let visible = 0, drawn = 0, vmin = Infinity, vmax = -Infinity;
    for (const [offset, count, version, discarded] of D.slices) {
      const stop = offset + count, color = rgba(versionHex(version), discarded ? 0.3 : 0.95);
      let i = lowerBound(start, offset, stop, L.xmin - D.max_duration);
      last.fill(-Infinity);
      for (; i < stop; i++) {
        const s = start[i];
        if (s > L.xmax) break;
        if (end[i] < L.xmin) continue;
        visible++;
        if (version < vmin) vmin = version;
        if (version > vmax) vmax = version;
        let x0 = Math.max(0, Math.floor(L.px(s) - left));
        const x1 = Math.min(R.w, Math.max(x0 + 1, Math.ceil(L.px(end[i]) - left)));
        const r = row[i];
        if (x1 <= last[r]) continue;
        if (x0 < last[r]) x0 = last[r];
        last[r] = x1; drawn++;
        const y1 = Math.min(R.h, Math.max(Math.floor(r * L.rowH) + 1, Math.floor((r + 1) * L.rowH) - gap));
        for (let y = Math.floor(r * L.rowH); y < y1; y++) pixels.fill(color, y * R.w + x0, y * R.w + x1);
      }
    }
    stats.bars_visible = visible; stats.bars_drawn = drawn;
    legendVersions(vmin, vmax);
  }

  // An interrupted and resumed episode is drawn as its segments: each pause is cleared
  // from its bar (the gap between abort and resume) and the segment after it is painted in
  // the colour of the version it was generated under.
  const PAUSED = C.pause_episode || new Uint32Array(0);
  function drawPauses(ctx, L) {
    const R = raster, pixels = R.pixels, left = L.b.left, gap = L.rowH > 3 ? 1 : 0;
    let visible = 0;
    function fill(r, t0, t1, color) {
      const x0 = Math.max(0, Math.floor(L.px(t0) - left));
      const x1 = Math.min(R.w, Math.ceil(L.px(t1) - left));
      if (x1 <= x0) return;
      const y1 = Math.min(R.h, Math.max(Math.floor(r * L.rowH) + 1, Math.floor((r + 1) * L.rowH) - gap));
      for (let y = Math.floor(r * L.rowH); y < y1; y++) pixels.fill(color, y * R.w + x0, y * R.w + x1);
    }
    for (let k = 0; k < PAUSED.length; k++) {
      const i = PAUSED[k], until = C.pause_until[k];
      if (until < L.xmin || C.pause_start[k] > L.xmax) continue;
      visible++;
      const r = C.row[i], discarded = D.discarded.includes(D.outcomes[C.outcome[i]]);
      if (C.pause_version[k] >= 0) fill(r, C.pause_end[k], until, rgba(versionHex(C.pause_version[k]), discarded ? 0.3 : 0.95));
      fill(r, C.pause_start[k], C.pause_end[k], 0);
    }
    stats.pauses_visible = visible;
  }

  // Markers sit on their episode's row; one per kind per pixel and row is drawn, each a
  // copy of a small pre-drawn sprite, then the buffer goes onto the canvas.
  let sprites = null;
  function spritesOf(size) {
    if (sprites && sprites.size === size) return sprites;
    const side = size + 2, half = Math.floor(side / 2);
    sprites = { size, masks: D.markers.map((name) => {
      const canvas = document.createElement("canvas");
      canvas.width = canvas.height = side;
      const c = canvas.getContext("2d"), p = new Path2D();
      shape(p, MARKER_STYLE[name][1], side / 2, side / 2, size / 2);
      c.fillStyle = "#000"; c.fill(p);
      const alpha = c.getImageData(0, 0, side, side).data, dx = [], dy = [];
      for (let j = 0; j < side * side; j++) if (alpha[4 * j + 3] >= 128) { dx.push(j % side - half); dy.push(Math.floor(j / side) - half); }
      return { dx, dy, color: rgba(MARKER_STYLE[name][0], 1) };
    }) };
    return sprites;
  }
  function drawMarkers(ctx, L) {
    const R = raster, t = C.marker_t, kind = C.marker_kind, episode = C.marker_episode;
    const seen = new Uint16Array(R.w * Math.max(D.rows, 1)), pixels = R.pixels; // a bit per kind
    const sprite = spritesOf(Math.round(Math.max(3 * L.r, Math.min(L.rowH * 0.9, 7 * L.r))));
    const visible = {}, drawn = {};
    for (const name of D.markers) { visible[name] = 0; drawn[name] = 0; }
    for (let i = lowerBound(t, 0, t.length, L.xmin); i < t.length && t[i] <= L.xmax; i++) {
      const k = kind[i], r = C.row[episode[i]], x = Math.floor(L.px(t[i]) - L.b.left);
      visible[D.markers[k]]++;
      const cell = r * R.w + Math.min(R.w - 1, Math.max(0, x));
      if (seen[cell] & (1 << k)) continue;
      seen[cell] |= 1 << k; drawn[D.markers[k]]++;
      const y = Math.floor((r + 0.5) * L.rowH), { dx, dy, color } = sprite.masks[k];
      for (let j = 0; j < dx.length; j++) {
        const px = x + dx[j], py = y + dy[j];
        if (px >= 0 && px < R.w && py >= 0 && py < R.h) pixels[py * R.w + px] = color;
      }
    }
    stats.markers_visible = visible; stats.markers_drawn = drawn;
    R.context.putImageData(R.image, 0, 0);
    ctx.drawImage(R.canvas, Math.floor(L.b.left), Math.floor(L.rowsTop));
  }

  function shape(p, kind, x, y, s) {
    if (kind === "triangle") { p.moveTo(x, y - s); p.lineTo(x + s, y + s); p.lineTo(x - s, y + s); p.closePath(); }
    else if (kind === "diamond") { p.moveTo(x, y - s); p.lineTo(x + s, y); p.lineTo(x, y + s); p.lineTo(x - s, y); p.closePath(); }
    else if (kind === "square") { p.rect(x - s * 0.8, y - s * 0.8, 1.6 * s, 1.6 * s); }
    else { p.moveTo(x + s, y); p.arc(x, y, s, 0, 2 * Math.PI); }
  }

  function drawVersions(ctx, L) {
    let n = 0, lastLabel = -Infinity;
    ctx.lineWidth = Math.max(L.r, 1); ctx.font = 10 * L.r + "px sans-serif"; ctx.textBaseline = "top";
    for (const [lines, dash] of [[D.pending, [4 * L.r, 3 * L.r]], [D.live, []]]) {
      ctx.setLineDash(dash);
      let lastX = null;
      for (const [t, v] of lines) {
        if (t < L.xmin || t > L.xmax) continue;
        const x = Math.round(L.px(t)) + 0.5;
        n++;
        if (lastX !== null && x - lastX < 4 * L.r) continue; // lines closer than 4 px: one
        lastX = x;
        ctx.strokeStyle = versionColor(v, 0.9);
        ctx.beginPath(); ctx.moveTo(x, L.b.top); ctx.lineTo(x, L.b.top + L.b.height); ctx.stroke();
        if (dash.length === 0 && x - lastLabel > 28 * L.r) {
          ctx.fillStyle = versionColor(v, 1); ctx.fillText("v" + v, x + 2 * L.r, L.rowsTop - GAP * L.r - 10 * L.r);
          lastLabel = x;
        }
      }
    }
    ctx.setLineDash([]);
    stats.version_lines = n;
  }

  // --- hover -------------------------------------------------------------------------------
  const tip = document.getElementById("tip");
  function episodeAt(L, t, r) {
    if (r < 0 || r >= D.rows) return -1;
    const lo = C.row_start[r], hi = C.row_start[r + 1], byRow = C.by_row, tol = 3 * L.r / (L.b.width / (L.xmax - L.xmin));
    let a = lo, b = hi; // last episode of the row starting at or before t + tol
    while (a < b) { const m = (a + b) >>> 1; if (C.start[byRow[m]] <= t + tol) a = m + 1; else b = m; }
    for (let j = a - 1; j >= lo && j >= a - 2; j--) {
      const i = byRow[j];
      if (C.end[i] >= t - tol) return i;
    }
    return -1;
  }
  function describe(i) {
    const outcome = D.outcomes[C.outcome[i]];
    const id = D.ids ? D.ids[i] : D.groups[C.group[i]] + "/" + C.member[i];
    const lines = ["episode " + id, "dispatched at v" + C.version[i] + ", " + C.start[i].toFixed(3) +
      " s → " + C.end[i].toFixed(3) + " s (" + (C.end[i] - C.start[i]).toFixed(3) + " s)"];
    if (outcome === "trained") lines.push("trained in batch " + C.step[i] + " (trains on v" + (C.step[i] - 1) + "), age " + C.age[i]);
    else if (outcome === "pruned") lines.push("discarded: zero advantage, cut in batch " + C.step[i] + " at age " + C.age[i]);
    else if (outcome === "dropped") lines.push("discarded: dropped stale by the sink at age " + C.age[i]);
    else if (outcome === "cancelled") lines.push("discarded: cancelled (" + D.cancel_reasons[C.reason[i]] + ")");
    else if (outcome === "failed") lines.push("discarded: failed");
    else if (outcome === "rejected") lines.push("discarded: group rejected by the curriculum");
    else if (outcome === "eval") lines.push("eval episode (never trained)");
    else if (outcome === "waiting") lines.push("arrived; not shipped when the log ends");
    else lines.push("still in flight when the log ends");
    if (C.late[i]) lines.push("its result arrived late, after the cancellation");
    const first = lowerBound(PAUSED, 0, PAUSED.length, i);
    for (let k = first; k < PAUSED.length && PAUSED[k] === i; k++) {
      const resumed = C.pause_version[k] >= 0 ? ", resumed at " + C.pause_end[k].toFixed(3) + " s under v" + C.pause_version[k] : ", never resumed";
      lines.push("interrupted at " + C.pause_start[k].toFixed(3) + " s" + resumed);
    }
    return lines.join("\n");
  }
  function spanAt(t) {
    for (const [s, e, k] of D.trainer) if (s <= t && t <= e) return "trainer " + D.trainer_kinds[k].replace("_", " ") + ": " + s.toFixed(2) + " s → " + e.toFixed(2) + " s";
    return null;
  }
  function causeAt(t) {
    for (const [s, e, k] of D.causes) if (s <= t && t <= e) return "the trainer waited: " + D.cause_kinds[k].replace("_", " ") + ", " + s.toFixed(2) + " s → " + e.toFixed(2) + " s (rolloutlog explain)";
    return null;
  }
  function hover(u) {
    const left = u.cursor.left, top = u.cursor.top;
    if (left == null || left < 0) { tip.hidden = true; return; }
    const L = layout(u), t = u.posToVal(left, "x"), y = L.b.top + top * L.r;
    let text = null;
    if (y < L.b.top + LANE * L.r) text = spanAt(t);
    else if (y >= L.b.top + (LANE + GAP) * L.r && y < L.b.top + (2 * LANE + GAP) * L.r) text = causeAt(t);
    else if (y >= L.rowsTop) { const i = episodeAt(L, t, Math.floor((y - L.rowsTop) / L.rowH)); if (i >= 0) text = describe(i); }
    if (text === null) { tip.hidden = true; return; }
    const box = u.over.getBoundingClientRect();
    tip.textContent = text; tip.hidden = false;
    tip.style.left = Math.min(box.left + left + 14, window.innerWidth - tip.offsetWidth - 4) + "px";
    tip.style.top = box.top + top + 14 + "px";
  }

  // --- zoom and pan ------------------------------------------------------------------------
  const PAD = (D.range[1] - D.range[0]) * 0.01; // room for the markers at either end
  const FULL = [D.range[0] - PAD, D.range[1] + PAD];
  function setRange(u, min, max) {
    const span = Math.max(max - min, (FULL[1] - FULL[0]) * 1e-7);
    const pad = (FULL[1] - FULL[0]) * 0.05; // pan a little past either end, no further
    min = Math.max(FULL[0] - pad, Math.min(min, FULL[1] + pad - span));
    u.setScale("x", { min, max: min + span });
  }
  function zoom(u, factor, at) {
    const { min, max } = u.scales.x;
    setRange(u, at - (at - min) * factor, at + (max - at) * factor);
  }
  function pan(u, fraction) {
    const { min, max } = u.scales.x, d = (max - min) * fraction;
    setRange(u, min + d, max + d);
  }
  let panning = null;
  function startPan(u, e) {
    panning = { x: e.clientX, min: u.scales.x.min, max: u.scales.x.max };
    const move = (ev) => {
      const dt = (ev.clientX - panning.x) / (u.bbox.width / uPlot.pxRatio) * (panning.max - panning.min);
      setRange(u, panning.min - dt, panning.max - dt);
    };
    const up = () => { panning = null; window.removeEventListener("mousemove", move); window.removeEventListener("mouseup", up); };
    window.addEventListener("mousemove", move); window.addEventListener("mouseup", up);
  }

  // --- legend and summary ------------------------------------------------------------------
  const legend = document.getElementById("legend");
  function item(html) { const div = document.createElement("div"); div.className = "item"; div.innerHTML = html; return div; }
  function swatch(color) { return '<span class="swatch" style="background:' + color + '"></span>'; }
  const versionsBox = document.createElement("div");
  legend.append(item("bars: episodes, by dispatch version; pale = discarded"), versionsBox);
  for (const name of D.markers) {
    const [color, , glyph] = MARKER_STYLE[name];
    legend.append(item('<span class="glyph" style="color:' + color + '">' + glyph + "</span>" + name.replace("_", " ")));
  }
  legend.append(item(swatch("repeating-linear-gradient(90deg,#555 0 4px,transparent 4px 7px)") + "version pending"),
    item(swatch("#555") + "version live"));
  for (const kind of D.trainer_kinds) legend.append(item(swatch(TRAINER_COLOR[kind]) + "trainer " + kind.replace("_", " ")));
  for (const kind of D.cause_kinds) legend.append(item(swatch(CAUSE_COLOR[kind]) + "waited: " + kind.replace("_", " ")));
  let shownVersions = "";
  function legendVersions(vmin, vmax) {
    const key = vmin + ":" + vmax;
    if (key === shownVersions) return;
    shownVersions = key;
    versionsBox.textContent = "";
    if (vmin > vmax) return;
    for (let v = vmin; v <= Math.min(vmax, vmin + 9); v++) versionsBox.append(item(swatch(versionColor(v, 0.95)) + "v" + v));
    if (vmax > vmin + 9) versionsBox.append(item("… to v" + vmax + " (zoom in to see them here)"));
  }
  const table = document.createElement("table");
  function addRow(key, value) {
    const tr = table.insertRow();
    tr.insertCell().textContent = key; tr.insertCell().textContent = value;
  }
  for (const [key, value] of D.summary_rows) addRow(key, value);
  document.getElementById("summary").append(table);

  // --- the chart ---------------------------------------------------------------------------
  const chart = document.getElementById("chart");
  function size() { return { width: chart.clientWidth, height: Math.max(chart.clientHeight, 200) }; }
  const u = new uPlot({
    ...size(),
    scales: { x: { time: false }, y: { auto: false, range: [0, 1] } },
    axes: [{ label: "seconds since " + D.origin.toFixed(3) + " s (log time)", grid: { stroke: "#eee" } }, { show: false }],
    series: [{}, { stroke: "transparent", points: { show: false } }],
    legend: { show: false },
    cursor: {
      y: false, points: { show: false }, drag: { x: true, y: false, setScale: true },
      bind: { mousedown: (self, target, handler) => (e) => {
        if (e.shiftKey || e.button === 1) { startPan(self, e); return null; }
        return handler(e);
      } },
    },
    hooks: { draw: [draw], setCursor: [hover] },
  }, [[FULL[0], FULL[1]], [null, null]], chart);
  u.over.addEventListener("wheel", (e) => {
    e.preventDefault();
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan(u, (e.deltaX || e.deltaY) / 1000);
    else zoom(u, Math.exp(e.deltaY * 0.002), u.posToVal(e.offsetX, "x"));
  }, { passive: false });
  window.addEventListener("keydown", (e) => {
    const { min, max } = u.scales.x, mid = (min + max) / 2;
    if (e.key === "+" || e.key === "=") zoom(u, 0.5, mid);
    else if (e.key === "-" || e.key === "_") zoom(u, 2, mid);
    else if (e.key === "ArrowLeft") pan(u, -0.2);
    else if (e.key === "ArrowRight") pan(u, 0.2);
    else if (e.key === "0" || e.key === "Home") setRange(u, FULL[0], FULL[1]);
    else return;
    e.preventDefault();
  });
  window.addEventListener("resize", () => u.setSize(size()));

  window.__timeline = {
    stats: () => JSON.parse(JSON.stringify(stats)),
    setRange: (min, max) => setRange(u, min, max),
    range: () => [u.scales.x.min, u.scales.x.max],
    where: (i) => { // the page coordinates of the middle of episode i's bar (i in page order)
      const L = layout(u), box = u.over.getBoundingClientRect();
      const x = (L.px((C.start[i] + C.end[i]) / 2) - L.b.left) / L.r;
      const y = (L.rowsTop + (C.row[i] + 0.5) * L.rowH - L.b.top) / L.r;
      return { x: box.left + x, y: box.top + y };
    },
    tooltip: () => (tip.hidden ? null : tip.textContent),
  };
})();
