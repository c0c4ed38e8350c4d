// SPDX-License-Identifier: Apache-2.0
//
// Loads an html report in headless Chromium at a given window size with the page's own
// #selftest (and its parameters, e.g. "search=spin_half"), and returns the verdict the
// page wrote into its DOM with Chromium's log. Shared by the sink's unit test (records fed
// by a fake host) and its end-to-end test (real runs through the CLI).
#ifndef LOUPE_SINKS_HTML_TESTS_PAGE_SELFTEST_HPP
#define LOUPE_SINKS_HTML_TESTS_PAGE_SELFTEST_HPP

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace loupe::test {

inline std::string chromium() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"})
    if (std::system((std::string("command -v ") + c + " >/dev/null 2>&1").c_str()) == 0) return c;
  return {};
}

struct PageSelftest {
  int exit_code = -1;
  std::string dom, log;
  nlohmann::json result;  // null when the page wrote no verdict
  bool ran() const { return result.is_object(); }
  // Chromium prints the page's console messages and uncaught exceptions as CONSOLE lines.
  std::vector<std::string> console_lines() const {
    std::vector<std::string> out;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);)
      if (line.find(":CONSOLE") != std::string::npos) out.push_back(line);
    return out;
  }
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string chromium_flags(const std::string& scratch, int width, int height) {
  return " --headless --no-sandbox --disable-gpu --disable-background-networking"
         " --disable-component-update --disable-sync --no-first-run --disable-dev-shm-usage"
         " --enable-logging=stderr --v=0 --hide-scrollbars --window-size=" +
         std::to_string(width) + "," + std::to_string(height) + " --user-data-dir=" + scratch +
         "/chromium-profile";
}

// `scratch`: a directory for Chromium's profile, the dumped DOM and the log.
inline PageSelftest run_page_selftest(const std::string& browser, const std::string& page,
                                      const std::string& params, int width, int height,
                                      const std::string& scratch) {
  PageSelftest r;
  const std::string url = "file://" + page + "#selftest" + (params.empty() ? "" : "&" + params);
  const std::string dom = scratch + "/dom.html", log = scratch + "/chromium.log";
  r.exit_code = std::system((browser + chromium_flags(scratch, width, height) + " --dump-dom '" +
                             url + "' > " + dom + " 2> " + log)
                                .c_str());
  r.dom = slurp(dom);
  r.log = slurp(log);
  std::smatch m;
  if (!std::regex_search(r.dom, m, std::regex(R"(<pre id="selftest-result">([^<]*)</pre>)")))
    return r;
  std::string text = m[1];
  for (auto [from, to] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}})
    for (std::size_t p; (p = text.find(from)) != std::string::npos;)
      text.replace(p, std::strlen(from), to);
  r.result = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return r;
}

}  // namespace loupe::test

#endif  // LOUPE_SINKS_HTML_TESTS_PAGE_SELFTEST_HPP
