// line_for_offset against the lines CPython 3.11 itself reports (co_positions) for every code
// unit of some code objects (python_lines_fixture.inc, made by gen_python_lines_fixture.py).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/python_lines.h"

using gpumemshim::analyzer::line_for_offset;

namespace {
struct Case {
  const char* name;
  int64_t first_line;
  std::string table;
  std::vector<int64_t> lines;  // per code unit; -1: no line
};
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
#include "python_lines_fixture.inc"
  };
  return all;
}
}  // namespace

TEST(PythonLines, EveryCodeUnitMatchesCPython311) {
  ASSERT_GE(cases().size(), 5u);
  for (const Case& c : cases()) {
    for (size_t i = 0; i < c.lines.size(); ++i)
      EXPECT_EQ(line_for_offset(c.table, c.first_line, i), c.lines[i]) << c.name << " offset " << i;
  }
}

TEST(PythonLines, PastTheTableOrEmptyGivesTheFirstLine) {
  EXPECT_EQ(line_for_offset({}, 42, 0), 42);
  const Case& c = cases().front();
  EXPECT_EQ(line_for_offset(c.table, c.first_line, c.lines.size() + 100), c.first_line);
  // A truncated table never reads past its end.
  for (size_t n = 0; n < c.table.size(); ++n)
    (void)line_for_offset(std::string_view(c.table).substr(0, n), c.first_line, 1000);
}
