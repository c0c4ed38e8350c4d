// SPDX-License-Identifier: Apache-2.0
#include "report_page.hpp"

#include "report_page_assets.hpp"  // generated: page/report.js and page/report.css

namespace loupe::sinks {
namespace {

constexpr const char* kHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>loupe report</title>
<style>
)HTML";

constexpr const char* kBody = R"HTML(</style></head><body>
<h1 id="title">loupe report</h1><div class="muted" id="window"></div>
<section id="findings" hidden></section>
<div id="profilers"></div><div id="health"></div>
<div class="tip" id="tip"></div>
<pre id="selftest-result" hidden></pre>
<script id="loupe-data" type="application/json">)HTML";

constexpr const char* kScript = R"HTML(</script>
<script>
)HTML";

constexpr const char* kTail = R"HTML(</script></body></html>
)HTML";

}  // namespace

std::string render_report_page(const nlohmann::json& data) {
  // Inside <script>, "</" could close the element early: JSON allows "<\/" instead.
  std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string safe;
  safe.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      safe += "<\\/";
      ++i;
    } else {
      safe += json[i];
    }
  }
  std::string page;
  page.reserve(page::report_css.size() + page::report_js.size() + safe.size() + 1024);
  page += kHead;
  page += page::report_css;
  page += kBody;
  page += safe;
  page += kScript;
  page += page::report_js;
  page += kTail;
  return page;
}

}  // namespace loupe::sinks
