// The browse page: the view first, then the zoom on demand, then the slow charts.
// Chat text is untrusted: it only ever reaches the page as textContent.
"use strict";

(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const embedded = readEmbedded();
  const state = { t: 0, lines: [], stack: [], rows: new Map(), marked: null };

  class NotIncluded extends Error {}

  function readEmbedded() {
    const holder = document.getElementById("embedded");
    return holder ? JSON.parse(holder.textContent) : null;
  }

  // One request of the page's own origin, or its answer from the file's embedded data.
  async function get(path) {
    if (embedded) {
      if (Object.prototype.hasOwnProperty.call(embedded, path)) return embedded[path];
      throw new NotIncluded("not included in this file");
    }
    const response = await fetch(path, { cache: "no-store" });
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function svg(tag, attributes) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, String(value));
    return node;
  }

  const number = (value) => Number(value).toLocaleString("en-US");
  const hue = (level) => (210 + level * 47) % 360;
  const bytes = (value) => (value >= 10000 ? `${(value / 1000).toFixed(0)}K` : number(value));

  function tint(node, level) {
    node.style.setProperty("--hue", String(hue(level)));
  }

  function spanText(line) {
    return line.n === 1 ? `msg ${number(line.id)}` : `${number(line.id)}–${number(line.id + line.n - 1)}`;
  }

  // A row of the view or of a zoom: id+n, level, span, bytes, text.
  function lineRow(line, className, withSpan) {
    const row = el("li", className);
    row.tabIndex = 0;
    row.dataset.id = String(line.id);
    row.dataset.n = String(line.n);
    row.dataset.level = String(line.level);
    tint(row, line.level);
    row.append(el("span", "name", `${line.id}+${line.n}`), el("span", "level", `L${line.level}`));
    if (withSpan) row.append(el("span", "span", spanText(line)), el("span", "bytes", `${number(line.bytes)} B`));
    const text = line.text === null ? el("span", "text unbuilt", "(not summarized yet: zoom it)") : el("span", "text", line.text);
    row.append(text);
    row.title = line.text === null ? "" : line.text;
    return row;
  }

  function onActivate(row, action) {
    row.addEventListener("click", action);
    row.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        action();
      }
    });
  }

  // -- the view and the bar -------------------------------------------------------------

  async function showView() {
    const view = await get("api/view");
    state.t = view.t;
    state.lines = view.lines;
    const list = document.getElementById("lines");
    const rows = view.lines.map((line) => {
      const row = lineRow(line, "line", true);
      onActivate(row, () => openLine(line));
      row.addEventListener("mouseenter", () => markBar(line));
      state.rows.set(`${line.id}+${line.n}`, row);
      return row;
    });
    list.replaceChildren(...rows);
    document.getElementById("view-size").textContent = `${number(view.lines.length)} lines, ${number(view.bytes)} bytes`;
    drawBar(view);
    performance.mark("evertalk:lines"); // read by the benchmark: time from navigation start
    document.body.dataset.lines = String(view.lines.length);
  }

  function drawBar(view) {
    const bar = document.getElementById("bar");
    const t = Math.max(view.t, 1);
    const rects = view.lines.map((line) => {
      const rect = svg("rect", { x: (line.id / t) * 1000, y: 0, width: Math.max((line.n / t) * 1000, 0.4), height: 28 });
      rect.setAttribute("fill", `hsl(${hue(line.level)} 60% ${line.level % 2 ? 48 : 60}%)`);
      const title = svg("title");
      title.textContent = `${line.id}+${line.n}: level ${line.level}, ${spanText(line)}`;
      rect.append(title);
      return rect;
    });
    bar.replaceChildren(...rects);
    document.getElementById("bar-end").textContent = `message ${number(Math.max(view.t - 1, 0))}`;
  }

  function markBar(line) {
    const bar = document.getElementById("bar");
    if (state.marked) state.marked.remove();
    const t = Math.max(state.t, 1);
    state.marked = svg("rect", { class: "marked", x: (line.id / t) * 1000, y: 1, width: Math.max((line.n / t) * 1000, 1), height: 26 });
    bar.append(state.marked);
    document.getElementById("bar-note").textContent = `${line.id}+${line.n} covers ${spanText(line)} (level ${line.level})`;
  }

  function markPending(summarizing) {
    if (!summarizing) return;
    const t = Math.max(state.t, 1);
    const x = (summarizing.first / t) * 1000;
    const rect = svg("rect", { class: "pending", x, y: 22, width: Math.max(1000 - x, 2), height: 6 });
    const title = svg("title");
    title.textContent = `still being summarized: messages ${summarizing.first}–${summarizing.last}`;
    rect.append(title);
    document.getElementById("bar").append(rect);
  }

  // -- zoom --------------------------------------------------------------------------------

  function openLine(line) {
    for (const row of document.querySelectorAll(".line.open")) row.classList.remove("open");
    const row = state.rows.get(`${line.id}+${line.n}`);
    if (row) row.classList.add("open");
    markBar(line);
    state.stack = [line];
    showZoom();
  }

  function descend(line) {
    state.stack.push(line);
    showZoom();
  }

  async function showZoom() {
    performance.mark("evertalk:zoom-start");
    const here = state.stack[state.stack.length - 1];
    drawCrumbs();
    document.getElementById("up").disabled = state.stack.length < 2;
    const body = document.getElementById("zoom-body");
    const head = el("p", "node-text", here.text === null ? "(not summarized yet: zoom it)" : here.text);
    body.replaceChildren(el("p", "note", `${here.id}+${here.n}: level ${here.level}, ${spanText(here)}`), head);
    let answer;
    try {
      answer = await get(`api/zoom?id=${here.id}&n=${here.n}`);
    } catch (error) {
      body.append(el("p", error instanceof NotIncluded ? "note missing" : "error", error.message));
      document.body.dataset.zoom = `${here.id}+${here.n}`;
      return;
    }
    if (state.stack[state.stack.length - 1] !== here) return; // another click came first
    body.append(answer.message ? messageBlock(answer.message) : childrenBlock(answer.children));
    performance.measure("evertalk:zoom", "evertalk:zoom-start"); // read by the benchmark
    document.body.dataset.zoom = `${here.id}+${here.n}`;
  }

  function childrenBlock(children) {
    const list = el("ol", "lines children");
    for (const child of children) {
      const row = lineRow(child, "child", false);
      onActivate(row, () => descend(child));
      list.append(row);
    }
    return list;
  }

  function messageBlock(message) {
    const block = el("div", "message");
    block.dataset.message = String(message.id);
    const meta = el("p", "meta");
    meta.append(el("span", `kind ${message.kind}`, message.kind), ` message ${number(message.id)}, ${message.date}, ${number(message.bytes)} bytes`);
    if (message.agent) meta.append(`, subagent ${message.agent}`);
    block.append(meta, el("pre", "message-text", message.text));
    for (const name of message.images) {
      if (embedded) {
        block.append(el("p", "note", `image ${name}: not included in this file`));
      } else {
        const image = el("img");
        image.alt = `image ${name}`;
        image.src = `api/image?name=${encodeURIComponent(name)}`;
        block.append(image);
      }
    }
    return block;
  }

  function drawCrumbs() {
    const crumbs = document.getElementById("crumbs");
    const buttons = state.stack.map((line, depth) => {
      const button = el("button", depth === state.stack.length - 1 ? "here" : "", `${line.id}+${line.n}`);
      button.type = "button";
      button.addEventListener("click", () => {
        state.stack = state.stack.slice(0, depth + 1);
        showZoom();
      });
      return button;
    });
    crumbs.replaceChildren(...buttons);
  }

  function goUp() {
    if (state.stack.length > 1) {
      state.stack.pop();
      showZoom();
    }
  }

  // -- status and date ---------------------------------------------------------------------

  async function showStatus() {
    const status = await get("api/status");
    const line = document.getElementById("status");
    const parts = [
      [`${number(status.messages)}`, " messages"],
      status.last_date ? ["", `last ${status.last_date}`] : null,
      [`view ${number(status.view_lines)} lines, ${number(status.view_bytes)} B`, status.shrinking ? " (merging)" : ""],
      [`cview ${number(status.cview_lines)} lines, ${number(status.cview_bytes)} B`, ""],
      [`${number(status.built + status.free + status.cut + status.unbuilt)}`, ` nodes: ${number(status.built)} by the model, ${number(status.free)} free, ${number(status.cut)} cut, ${number(status.unbuilt)} unbuilt`],
      ["", status.compactor ? `compactor running (pid ${status.compactor.pid})` : "compactor not running"],
    ].filter(Boolean);
    const items = [];
    for (const [strong, rest] of parts) {
      if (items.length) items.push(" · ");
      if (strong) items.push(el("b", "", strong));
      items.push(rest);
    }
    if (status.summarizing) {
      const s = status.summarizing;
      items.push(" · ", el("span", "pending", `still summarizing messages ${number(s.first)}–${number(s.last)} (${number(s.unbuilt)} nodes to go)`));
    }
    line.replaceChildren(...items);
    return status;
  }

  async function showDate(event) {
    event.preventDefault();
    const out = document.getElementById("date-out");
    const id = document.getElementById("date-id").value;
    try {
      out.textContent = (await get(`api/date?id=${encodeURIComponent(id)}`)).date;
      out.className = "";
    } catch (error) {
      out.textContent = error.message;
      out.className = error instanceof NotIncluded ? "note" : "error";
    }
  }

  // Show what `api/<what>` answers, in the element of that id, once the server has it ready
  // (asking again each second until then); or the error it gives instead.
  async function showWhenReady(what, show) {
    const found = await get(`api/${what}`);
    if (!found.ready) {
      setTimeout(() => showWhenReady(what, show).catch(fail(what)), 1000);
      return;
    }
    const place = document.getElementById(what);
    if (found.error) {
      place.replaceChildren(el("p", "error", found.error));
      return;
    }
    show(found, place);
  }

  // -- the sawtooth ------------------------------------------------------------------------

  function showSawtooth(found, place) {
    const [ceiling, floor, cceiling, cfloor] = found.budget;
    place.replaceChildren(...sawChart(found, 2, "view", [floor, ceiling], `the view: ${number(found.batches)} batches over ${number(found.t)} messages`));
    document.getElementById("csawtooth").replaceChildren(...sawChart(found, 5, "cview", [cfloor, cceiling], `the compaction view: ${number(found.fits)} fits`));
    document.body.dataset.sawtooth = "ready";
  }

  // One chart: the least–most band of each stretch and its last size, with the floor and ceiling.
  function sawChart(found, column, className, limits, caption) {
    const rows = found.stretches;
    const top = Math.max(limits[1] * 1.15, ...rows.map((row) => row[column + 2])) || 1;
    const width = 1000, height = 220, t = Math.max(found.t, 1);
    const x = (message) => (message / t) * width;
    const y = (size) => height - (size / top) * (height - 10);
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none" });
    const upper = rows.map((row) => `${x(row[1] + 1)},${y(row[column + 2])}`);
    const lower = rows.map((row) => `${x(row[1] + 1)},${y(row[column + 1])}`).reverse();
    chart.append(svg("polygon", { class: `band ${className}`, points: [...upper, ...lower].join(" ") }));
    chart.append(svg("polyline", { class: `trace ${className}`, fill: "none", points: rows.map((row) => `${x(row[1] + 1)},${y(row[column])}`).join(" ") }));
    for (const limit of limits) {
      chart.append(svg("line", { class: "limit", x1: 0, x2: width, y1: y(limit), y2: y(limit) }));
      const label = svg("text", { x: 4, y: y(limit) - 3 });
      label.textContent = bytes(limit);
      chart.append(label);
    }
    return [chart, el("p", "caption", caption)];
  }

  // -- usage -------------------------------------------------------------------------------

  function showUsage(found, place) {
    const summary = found.summary;
    if (!summary.total || !summary.total.calls) {
      place.replaceChildren(el("p", "note", "No model calls yet."));
      return;
    }
    const perNode = summary.calls_per_node === null ? "- (no compactions yet)" : `${summary.calls_per_node.toFixed(2)} (${number(summary.compaction_calls)} calls, ${number(summary.built_nodes)} nodes)`;
    place.replaceChildren(
      usageTable("day", summary.by_day),
      usageTable("role", summary.by_role),
      el("p", "", `compaction calls per built node: ${perNode}`),
    );
  }

  function usageTable(label, groups) {
    const table = el("table");
    const head = el("tr");
    for (const name of [label, "calls", "input", "output", "cache read", "read share", "cost", ""]) head.append(el("th", "", name));
    table.append(head);
    const most = Math.max(...Object.values(groups).map((totals) => totals.cost), 0);
    for (const [key, totals] of Object.entries(groups)) {
      const row = el("tr");
      const share = totals.cache_read_share === null ? "-" : `${(totals.cache_read_share * 100).toFixed(1)}%`;
      for (const cell of [key, number(totals.calls), number(totals.input), number(totals.output), number(totals.cache_read), share, `$${totals.cost.toFixed(2)}${totals.unpriced ? "*" : ""}`]) {
        row.append(el("td", "", cell));
      }
      const barCell = el("td", "barcell");
      const costBar = el("div", "costbar");
      costBar.style.width = most ? `${(totals.cost / most) * 100}%` : "0";
      barCell.append(costBar);
      row.append(barCell);
      table.append(row);
    }
    return table;
  }

  function fail(what) {
    return (error) => {
      const place = document.getElementById(what === "usage" ? "usage" : what === "status" ? "status" : what === "view" ? "lines" : "sawtooth");
      place.replaceChildren(el("span", "error", `${what}: ${error.message}`));
    };
  }

  document.getElementById("up").addEventListener("click", goUp);
  document.getElementById("date-form").addEventListener("submit", (event) => showDate(event));
  // The view and the status first; the sawtooth and the usage only once the lines are shown.
  Promise.all([showView().catch(fail("view")), showStatus().catch(fail("status"))]).then(([, status]) => {
    if (status) markPending(status.summarizing);
    showWhenReady("sawtooth", showSawtooth).catch(fail("sawtooth"));
    showWhenReady("usage", showUsage).catch(fail("usage"));
  });
})();
