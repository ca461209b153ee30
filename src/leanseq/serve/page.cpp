#include "leanseq/serve/page.h"

#include "leanseq/serve/request.h"

namespace leanseq::serve {

namespace {
std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}
}  // namespace

std::string page_html(const std::vector<ModelInfo>& models, size_t selected) {
  const auto& m = models.at(selected);
  const std::string title = "leanseq: " + escape_html(m.source_lang) + " &rarr; " + escape_html(m.target_lang);
  std::string others;
  for (size_t i = 0; i < models.size(); ++i) {
    if (i == selected) continue;
    others += std::string(others.empty() ? " Other models:" : ",") + " <a href=\"/?model=" + escape_html(models[i].name) +
              "\">" + escape_html(models[i].source_lang) + " &rarr; " + escape_html(models[i].target_lang) + "</a>";
  }
  // The model's name as a JavaScript string (JSON), with "</" kept from ending the script; sent
  // only where several models are served (one model's name may be a long checkpoint path, which a
  // request's "model" field would refuse).
  std::string model_field;
  if (models.size() > 1) {
    model_field = ", model: " + json_text(m.name);
    for (size_t at = 0; (at = model_field.find("</", at)) != std::string::npos;) model_field.replace(at, 2, "<\\/");
  }
  return R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>)" + title + R"(</title>
<style>
body{font-family:sans-serif;max-width:46em;margin:2em auto;padding:0 1em;color:#222}
textarea{width:100%;height:7em;font-size:1em;box-sizing:border-box}
#out{white-space:pre-wrap;border:1px solid #ccc;min-height:3em;padding:.5em;margin-top:.5em}
#meta{color:#666;font-size:.9em;margin-top:.3em}
button{font-size:1em;margin-top:.5em;padding:.3em 1.2em}
</style></head>
<body>
<h1>)" + title + R"(</h1>
<p>Model: <code>)" + escape_html(m.name) + R"(</code>. One sentence per line.)" + others + R"(</p>
<textarea id="src" aria-label="source text"></textarea>
<button id="go">Translate</button>
<div id="out" aria-live="polite"></div>
<div id="meta"></div>
<script>
async function translate() {
  const lines = document.getElementById('src').value.split('\n').filter(l => l.trim() !== '');
  const out = document.getElementById('out'), meta = document.getElementById('meta');
  if (lines.length === 0) { out.textContent = ''; meta.textContent = ''; return; }
  meta.textContent = 'translating...';
  const t0 = performance.now();
  try {
    const r = await fetch('/v1/translate', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                            body: JSON.stringify({texts: lines)" + model_field + R"(})});
    const j = await r.json();
    if (!r.ok) { out.textContent = ''; meta.textContent = 'error: ' + j.error; return; }
    out.textContent = j.translations.map(t => t.text).join('\n');
    meta.textContent = lines.length + ' sentence(s): ' + j.elapsed_ms.toFixed(0) + ' ms on the server, ' +
                       (performance.now() - t0).toFixed(0) + ' ms in all';
  } catch (e) { meta.textContent = 'error: ' + e; }
}
document.getElementById('go').addEventListener('click', translate);
const q = new URLSearchParams(location.search).get('q');
if (q) { document.getElementById('src').value = q; translate(); }
</script>
</body></html>
)";
}

}  // namespace leanseq::serve
