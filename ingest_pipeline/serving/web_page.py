"""The one web page ``serve`` gives a person: a question, filters on what documents are,
results grouped by page with the page drawn and the hits' boxes on it, each passage one click
from its lineage. Every value from the store is written with ``textContent``, never as HTML."""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ingest_pipeline search</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 1.5rem; max-width: 1100px; }
 form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin-bottom: 1rem; }
 #q { flex: 1 1 28rem; font-size: 1.05rem; padding: .4rem; }
 .result { border-top: 1px solid #ccc; padding: .8rem 0; display: grid;
           grid-template-columns: 360px 1fr; gap: 1rem; }
 .result img { width: 360px; border: 1px solid #ddd; }
 .where { font-weight: 600; }
 .about { color: #555; font-size: .9rem; }
 .passage { margin: .4rem 0; }
 .passage .n { display: inline-block; min-width: 1.4rem; font-weight: 700; color: #b35900; }
 pre.lineage { background: #f6f6f6; padding: .5rem; white-space: pre-wrap; font-size: .8rem; }
 #status { color: #555; }
</style>
</head>
<body>
<h1>Search</h1>
<form id="search">
 <input id="q" name="q" placeholder="Ask a question" autofocus>
 <select id="organisation" name="organisation"><option value="">any organisation</option></select>
 <select id="period" name="period"><option value="">any period</option></select>
 <select id="kind" name="kind"><option value="">any kind</option></select>
 <select id="group" name="group">
  <option value="page">one result per page</option>
  <option value="document">one per document</option>
  <option value="none">one per passage</option>
 </select>
 <button id="go" type="submit">Search</button>
</form>
<div id="status"></div>
<div id="results"></div>
<script>
const el = (tag, text, cls) => {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
};
async function fillFilters() {
  const docs = await (await fetch("/api/documents")).json();
  for (const field of ["organisation", "period", "kind"]) {
    const values = [...new Set(docs.map(d => d[field]).filter(Boolean))].sort();
    const select = document.getElementById(field);
    for (const value of values) {
      const option = el("option", value);
      option.value = value;
      select.appendChild(option);
    }
  }
}
async function showLineage(button, chunk, box) {
  const response = await fetch("/api/chunks/" + encodeURIComponent(chunk) + "/lineage");
  const chains = await response.json();
  box.textContent = JSON.stringify(chains, null, 1);
  box.hidden = false;
  button.disabled = true;
}
function render(result, rank) {
  const card = el("div", null, "result");
  const picture = el("div");
  const text = el("div");
  const doc = result.document || {};
  const page = result.page !== null && result.page !== undefined ? "  page " + result.page : "";
  text.appendChild(el("div", rank + ". " + result.shown_path + page, "where"));
  const about = [doc.organisation, doc.period, doc.kind].filter(Boolean).join(" · ");
  if (about) text.appendChild(el("div", about, "about"));
  result.passages.forEach((passage, i) => {
    const row = el("div", null, "passage");
    row.appendChild(el("span", i + 1, "n"));
    row.appendChild(el("span", passage.text));
    const button = el("button", "lineage");
    const box = el("pre", null, "lineage");
    box.hidden = true;
    button.addEventListener("click", () => showLineage(button, passage.chunk_id, box));
    row.appendChild(document.createTextNode(" "));
    row.appendChild(button);
    row.appendChild(box);
    text.appendChild(row);
  });
  if (result.page !== null && result.page !== undefined) {
    const img = el("img");
    const chunks = result.passages.map(p => p.chunk_id).join(",");
    img.alt = result.shown_path + " page " + result.page;
    img.src = "/api/pages/" + encodeURIComponent(result.document_id) + "/" + result.page + ".png?chunks=" +
      encodeURIComponent(chunks);
    img.addEventListener("error", () => img.remove());
    picture.appendChild(img);
  }
  card.appendChild(picture);
  card.appendChild(text);
  return card;
}
document.getElementById("search").addEventListener("submit", async (event) => {
  event.preventDefault();
  const params = new URLSearchParams();
  for (const name of ["q", "organisation", "period", "kind", "group"]) {
    const value = document.getElementById(name).value;
    if (value) params.set(name, value);
  }
  const status = document.getElementById("status");
  const results = document.getElementById("results");
  results.replaceChildren();
  status.textContent = "searching…";
  const response = await fetch("/api/search?" + params.toString());
  const body = await response.json();
  if (!response.ok) { status.textContent = body.error; return; }
  status.textContent = body.results.length + " results in " + body.seconds + " s";
  body.results.forEach((result, i) => results.appendChild(render(result, i + 1)));
});
fillFilters();
</script>
</body>
</html>
"""
