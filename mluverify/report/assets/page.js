// The one script of every mluverify page: interactive tables, the detail view, copy buttons
// and banner chips. Data comes formatted from Python; nothing here computes a report number.
"use strict";
(function () {
  const tables = {};
  window.mluverifyTables = tables;  // for tests and benchmarks driving the page
  const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const number = (s) => s === "" ? NaN : s === "inf" ? Infinity : s === "-inf" ? -Infinity : Number(s);

  class Table {
    constructor(root) {
      const spec = JSON.parse(root.querySelector("script.mv-data").textContent);
      Object.assign(this, {root, spec, rows: spec.rows, query: "", values: new Set(), showHidden: false,
                           sortColumn: -1, descending: false, limit: spec.page});
      this.order = spec.rows.map((_, i) => i);  // the rows in the current sort order
      this.haystack = spec.rows.map((row) => spec.shown.map((c) => row[c]).join("\u0001").toLowerCase());
      this.keys = {};
      this.build();
      this.apply();
    }

    build() {
      const spec = this.spec;
      const controls = document.createElement("div");
      controls.className = "mv-controls";
      controls.innerHTML = '<input type="search" placeholder="filter rows (text)" aria-label="filter">'
        + '<span class="mv-values"></span>'
        + (spec.hide >= 0 ? `<label><input type="checkbox" class="mv-hide"> ${esc(spec.hideLabel)}</label>` : "")
        + '<span class="mv-count"></span>';
      this.input = controls.querySelector("input[type=search]");
      this.input.addEventListener("input", () => this.filter(this.input.value));
      if (spec.hide >= 0) {
        controls.querySelector(".mv-hide").addEventListener("change", (e) => { this.showHidden = e.target.checked; this.apply(); });
      }
      if (spec.tone >= 0) this.buildChips(controls.querySelector(".mv-values"));
      const head = spec.shown.map((c) => `<th class="${spec.numeric[c] ? "" : "text"}" data-column="${c}">${esc(spec.columns[c]).replace(/_/g, "_<wbr>")}</th>`);
      const scroll = document.createElement("div");
      scroll.className = "mv-scroll";
      scroll.innerHTML = `<table><thead><tr>${head.join("")}</tr></thead><tbody></tbody></table>`;
      this.tbody = scroll.querySelector("tbody");
      scroll.querySelectorAll("th").forEach((th) => th.addEventListener("click", () => this.sort(Number(th.dataset.column))));
      this.tbody.addEventListener("click", (e) => this.clicked(e));
      this.more = document.createElement("button");
      this.more.className = "mv-more";
      this.more.type = "button";
      this.more.addEventListener("click", () => { this.limit += spec.page; this.render(); });
      this.root.append(controls, scroll, this.more);
    }

    buildChips(holder) {
      const counts = new Map();
      for (const row of this.rows) counts.set(row[this.spec.tone], (counts.get(row[this.spec.tone]) || 0) + 1);
      const listed = [...this.spec.order.filter((v) => counts.has(v)), ...[...counts.keys()].filter((v) => !this.spec.order.includes(v)).sort()];
      holder.innerHTML = listed.map((v) => `<button type="button" class="chip ${this.spec.tones[v] || "muted"}" data-value="${esc(v)}">${esc(v || "(none)")} <b>${counts.get(v)}</b></button>`).join("");
      holder.querySelectorAll(".chip").forEach((chip) => chip.addEventListener("click", () => this.toggleValue(chip.dataset.value)));
      this.chips = holder;
    }

    toggleValue(value) { this.setValues(this.values.has(value) ? [...this.values].filter((v) => v !== value) : [...this.values, value]); }

    // Show only rows whose tone column holds one of ``values`` (every row when empty).
    setValues(values) {
      this.values = new Set(values);
      if (this.chips) this.chips.querySelectorAll(".chip").forEach((c) => c.classList.toggle("on", this.values.has(c.dataset.value)));
      this.apply();
    }

    filter(text) { this.query = text.trim().toLowerCase(); this.limit = this.spec.page; this.apply(); }

    sortKeys(column) {
      if (!(column in this.keys)) {
        this.keys[column] = this.spec.numeric[column] ? Float64Array.from(this.rows, (r) => number(r[column])) : this.rows.map((r) => r[column]);
      }
      return this.keys[column];
    }

    // Click a header: ascending, again: descending. Missing values go last either way; ties
    // keep the page's own order (failures first).
    sort(column) {
      this.descending = this.sortColumn === column ? !this.descending : false;
      this.sortColumn = column;
      const keys = this.sortKeys(column), sign = this.descending ? -1 : 1;
      const missing = (k) => k === "" || (typeof k === "number" && Number.isNaN(k));
      const compare = this.spec.numeric[column]
        ? (a, b) => (keys[a] - keys[b]) * sign
        : (a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0) * sign;
      this.order = this.rows.map((_, i) => i).sort((a, b) => {
        const ma = missing(keys[a]), mb = missing(keys[b]);
        return ma || mb ? ma - mb || a - b : compare(a, b) || a - b;
      });
      this.root.querySelectorAll("th").forEach((th) => {
        th.classList.toggle("asc", Number(th.dataset.column) === column && !this.descending);
        th.classList.toggle("desc", Number(th.dataset.column) === column && this.descending);
      });
      this.apply();
    }

    apply() {
      const {tone, hide} = this.spec, query = this.query, values = this.values;
      this.visible = this.order.filter((i) => (!values.size || values.has(this.rows[i][tone]))
        && (this.showHidden || hide < 0 || this.rows[i][hide] !== "yes")
        && (!query || this.haystack[i].includes(query)));
      this.render();
    }

    render() {
      const spec = this.spec, shown = this.visible.slice(0, this.limit);
      this.tbody.innerHTML = shown.map((i) => this.rowHtml(i)).join("");
      const total = this.rows.length, matching = this.visible.length;
      this.root.querySelector(".mv-count").textContent = (matching === total ? `${total} rows` : `${matching} of ${total} rows`)
        + (shown.length < matching ? `, first ${shown.length} shown` : "");
      this.more.hidden = shown.length >= matching;
      this.more.textContent = `show ${Math.min(spec.page, matching - shown.length)} more`;
    }

    rowHtml(i) {
      const spec = this.spec, row = this.rows[i];
      const tone = spec.tone >= 0 ? spec.tones[row[spec.tone]] || "" : "";
      const cells = spec.shown.map((c) => {
        const text = esc(row[c]);
        if (c === spec.tone) return `<td class="text"><span class="badge ${tone}">${text}</span></td>`;
        if (c in spec.long) return `<td class="text long"><div class="fold" style="max-width:${spec.long[c]}em" title="${text}">${text}</div></td>`;
        return `<td class="${spec.numeric[c] ? "" : "text"}">${text}</td>`;
      });
      return `<tr class="${tone}${spec.detail.length ? " detail" : ""}" data-row="${i}">${cells.join("")}</tr>`;
    }

    clicked(event) {
      const cell = event.target.closest("td");
      if (!cell) return;
      // A row with a detail view opens it from any cell (the view shows long texts whole);
      // without one, a long cell unfolds in place.
      if (this.spec.detail.length) this.openDetail(Number(cell.parentElement.dataset.row));
      else if (cell.classList.contains("long")) cell.classList.toggle("open");
    }

    openDetail(i) {
      const spec = this.spec, row = this.rows[i], dialog = document.getElementById("mv-detail");
      const field = (c) => {
        if (spec.code.includes(c)) return codeHtml(row[c]);
        if (spec.links.includes(c)) return `<a href="${esc(row[c])}">${esc(row[c])}</a>`;
        return esc(row[c]);
      };
      const sections = spec.detail.map(([heading, columns]) => {
        const filled = columns.filter((c) => row[c] !== "");
        if (!filled.length) return "";
        return `<h3>${esc(heading)}</h3><dl class="mv-facts">${filled.map((c) => `<dt>${esc(spec.columns[c])}</dt><dd>${field(c)}</dd>`).join("")}</dl>`;
      });
      const title = spec.shown.filter((c) => c !== spec.tone).map((c) => row[c])[0];
      const tone = spec.tone >= 0 ? `<span class="badge ${spec.tones[row[spec.tone]] || ""}">${esc(row[spec.tone])}</span> ` : "";
      dialog.querySelector(".mv-detail-body").innerHTML = `<h2>${tone}${esc(title)}</h2>${sections.join("")}`;
      dialog.dataset.row = i;
      if (!dialog.open) dialog.showModal();
    }
  }

  function codeHtml(text) {
    return `<div class="mv-code"><button type="button" class="mv-copy">copy</button><pre class="code">${esc(text)}</pre></div>`;
  }

  // Copy a code block: the clipboard API where the page may use it, else a selection copy.
  async function copy(button) {
    const text = button.parentElement.querySelector("pre").textContent;
    try {
      await navigator.clipboard.writeText(text);
    } catch (err) {
      const area = document.createElement("textarea");
      area.value = text;
      button.parentElement.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    button.textContent = "copied";
    setTimeout(() => { button.textContent = "copy"; }, 1500);
  }

  document.addEventListener("click", (e) => {
    const button = e.target.closest("button");
    if (!button) return;
    if (button.classList.contains("mv-copy")) copy(button);
    else if (button.classList.contains("mv-close")) button.closest("dialog").close();
    else if (button.closest(".mv-banner") && button.dataset.table && tables[button.dataset.table]) {
      // A banner chip shows only its status; clicked again (it is on), every row again.
      const table = tables[button.dataset.table], value = button.dataset.value;
      const on = table.values.size === 1 && table.values.has(value);
      table.setValues(on ? [] : [value]);
      button.closest(".mv-banner").querySelectorAll(".chip").forEach((c) => c.classList.toggle("on", !on && c === button));
      if (!on) table.root.scrollIntoView();
    }
  });
  document.querySelectorAll(".mv-table").forEach((root) => { tables[root.id] = new Table(root); });
})();
