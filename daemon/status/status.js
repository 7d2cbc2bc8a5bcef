// status.js - fills status.html from /state.json and /topology.svg, once a
// second; text goes in through textContent only, the SVG through
// DOMParser, so no name from the fabric is ever parsed as HTML.
"use strict";

const MAX_CIRCUITS_LISTED = 64;

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function fill(tableId, rows, build) {
  const body = document.querySelector("#" + tableId + " tbody");
  body.replaceChildren();
  for (const r of rows) {
    const tr = document.createElement("tr");
    build(tr, r);
    body.appendChild(tr);
  }
}

function circuitText(c) {
  return c.device + " " + c.in + "->" + c.out +
    (c.pods ? " (pod " + c.pods[0] + "->" + c.pods[1] + ")" : "");
}

function render(s) {
  document.getElementById("title").textContent =
    "ocsd: " + s.fabric.name + " (" + s.fabric.kind + ")";
  const role = document.getElementById("role");
  role.textContent = s.role === "follower"
    ? "follower; leader is " + (s.leader || "not known yet") : s.role;
  role.className = "role " + s.role;
  document.getElementById("updated").textContent =
    "updated " + new Date(s.now_ms).toLocaleTimeString();
  fill("jobs", s.jobs, (tr, j) => {
    tr.dataset.job = j.id;
    cell(tr, j.id);
    cell(tr, j.state, j.state === "FAILED" ? "bad" : j.state === "ACTIVE" ? "ok" : "warn");
    cell(tr, String(j.gpus));
    const listed = j.circuits || [];
    const shown = listed.slice(0, MAX_CIRCUITS_LISTED).map(circuitText);
    if (j.n_circuits > shown.length)
      shown.push("... " + (j.n_circuits - shown.length) + " more" +
        (s.circuits_listed ? "" : " (too many to list: the drawing counts them per pod pair)"));
    cell(tr, j.n_circuits + (shown.length ? ": " + shown.join(", ") : ""), "circuits");
    cell(tr, j.reason);
  });
  fill("devices", s.devices, (tr, d) => {
    tr.dataset.device = d.name;
    cell(tr, d.name);
    cell(tr, String(d.group));
    cell(tr, d.session, d.session === "connected" ? "ok" :
      d.session === "disconnected" ? "bad" : "warn");
    cell(tr, d.health, d.health === "healthy" ? "ok" :
      d.health === "unreachable" ? "bad" : "warn");
    cell(tr, d.drained ? "drained" : "", d.drained ? "warn" : "");
    cell(tr, String(d.drift), d.drift ? "warn" : "");
    cell(tr, d.error);
  });
  const drifted = s.devices.filter((d) => d.drift > 0);
  document.getElementById("drift").textContent = s.drift_total === 0
    ? "no drift"
    : s.fabric.kind === "ocstrx-ring"
      ? s.bundle_drift.length + (s.bundle_drift.length === 1 ? " bundle differs" : " bundles differ") +
        " from the rings"
      : s.drift_total + " cross-connects differ from the intent on " +
        drifted.map((d) => d.name + " (" + d.drift + ")").join(", ");
  fill("bundle-drift", s.bundle_drift, (tr, b) => {
    cell(tr, String(b.node));
    cell(tr, String(b.bundle));
    cell(tr, b.job || "(no ring)");
    cell(tr, b.found + (b.found_peer >= 0 ? " (to node " + b.found_peer + ")" : ""), "warn");
    cell(tr, b.expected);
  });
  document.getElementById("bundle-drift").hidden = s.bundle_drift.length === 0;
  fill("rings", s.rings, (tr, r) => {
    cell(tr, r.job);
    cell(tr, String(r.index));
    cell(tr, r.change, r.change === "placed" ? "" : "warn");
    cell(tr, r.failed_node >= 0 ? String(r.failed_node) : "");
    cell(tr, r.nodes.join(" "));
  });
  const parts = [];
  if (s.faulty_nodes.length) parts.push("faulty nodes: " + s.faulty_nodes.join(", "));
  if (s.faulty_gpus.length) parts.push("faulty (swapped) GPUs: " + s.faulty_gpus.join(", "));
  document.getElementById("faulty").textContent = parts.length ? parts.join("; ") : "none faulty";
  fill("events", s.events.slice().reverse(), (tr, e) => {
    cell(tr, new Date(e.at_ms).toLocaleTimeString());
    cell(tr, e.text);
  });
}

function showSvg(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = doc.documentElement;
  const box = document.getElementById("topology");
  if (root.nodeName !== "svg") {
    box.textContent = "the drawing did not parse";
    return;
  }
  box.replaceChildren(document.importNode(root, true));
}

async function tick() {
  try {
    const [state, svg] = await Promise.all([
      fetch("/state.json", { cache: "no-store" }).then((r) => r.json()),
      fetch("/topology.svg", { cache: "no-store" }).then((r) => r.text()),
    ]);
    render(state);
    showSvg(svg);
  } catch (e) {
    document.getElementById("updated").textContent = "cannot reach ocsd: " + e;
  }
  setTimeout(tick, 1000);
}

tick();
