// SPDX-License-Identifier: Apache-2.0
//
// The report as one self-contained HTML page: inline CSS and vanilla JS (no CDN, works
// offline) with the data embedded as JSON. Opening it with `#selftest` runs a check of
// the page's own behaviour (flame graphs rendered, a click zooms, hover explains) and
// writes the result into <pre id="selftest-result">, for headless browser tests.
#ifndef LOUPE_SINKS_HTML_REPORT_PAGE_HPP
#define LOUPE_SINKS_HTML_REPORT_PAGE_HPP

#include <nlohmann/json.hpp>
#include <string>

namespace loupe::sinks {

std::string render_report_page(const nlohmann::json& data);

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_HTML_REPORT_PAGE_HPP
