#include <gtest/gtest.h>

#include <stdexcept>

#include "gpumemshim/analyzer/suppressions.h"

namespace an = gpumemshim::analyzer;
using an::template_match;

TEST(TemplateMatch, SubstringWildcardsAndAnchors) {
  EXPECT_TRUE(template_match("foo", "xfooy"));
  EXPECT_FALSE(template_match("foo", "fo"));
  EXPECT_FALSE(template_match("foo", ""));
  EXPECT_TRUE(template_match("^foo", "foobar"));
  EXPECT_FALSE(template_match("^foo", "xfoo"));
  EXPECT_TRUE(template_match("bar$", "foobar"));
  EXPECT_FALSE(template_match("bar$", "barfoo"));
  EXPECT_TRUE(template_match("^foobar$", "foobar"));
  EXPECT_FALSE(template_match("^foobar$", "foobarx"));
  EXPECT_TRUE(template_match("f*bar", "foo::bar"));
  EXPECT_TRUE(template_match("^f*r$", "foobar"));
  EXPECT_FALSE(template_match("^f*z$", "foobar"));
  EXPECT_TRUE(template_match("*", "anything"));
  EXPECT_TRUE(template_match("libcu*.so", "/usr/lib/libcudnn.so.9"));
  EXPECT_TRUE(template_match("a*$", "ab"));  // LSan: '$' after '*' matches
  EXPECT_TRUE(template_match("Leak::", "void Leak::make(int)"));
}

TEST(Suppressions, ParsesCommentsBlanksAndWhitespace) {
  auto s = an::Suppressions::parse("# comment\n\n  leak:foo  \nleak:^bar$\r\n\t# indented comment\nleak: libx*.so\n",
                                   "s.supp");
  ASSERT_EQ(s.entries().size(), 3u);
  EXPECT_EQ(s.entries()[0].pattern, "foo");
  EXPECT_EQ(s.entries()[1].pattern, "^bar$");
  EXPECT_EQ(s.entries()[2].pattern, "libx*.so");
  EXPECT_EQ(s.entries()[2].source, "s.supp:6");
}

TEST(Suppressions, BadLinesNameFileAndLine) {
  auto expect_bad = [](const char* text, const char* where) {
    try {
      an::Suppressions::parse(text, "bad.supp");
      ADD_FAILURE() << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(where, 0), 0u) << e.what();
    }
  };
  expect_bad("leak:ok\nnot a suppression\n", "bad.supp:2:");
  expect_bad("race:foo\n", "bad.supp:1:");
  expect_bad("# x\nleak:\n", "bad.supp:2:");
}

TEST(Suppressions, MatchesFunctionFileOrModuleOfAnyFrame) {
  auto s = an::Suppressions::parse("leak:^init_*$\nleak:third_party/\nleak:libnccl\n", "s");
  an::Frame user{"main", "/src/app.cpp", 10, "/bin/app", 0, 0, false, false};
  an::Frame init{"init_weights", "/src/model.cpp", 3, "/bin/app", 0, 0, false, false};
  an::Frame tp{"helper", "/src/third_party/x.cpp", 3, "/bin/app", 0, 0, false, false};
  an::Frame nccl{"", "", 0, "/usr/lib/libnccl.so.2", 0, 0, false, false};
  EXPECT_EQ(s.match({user}), -1);
  EXPECT_EQ(s.match({user, init}), 0);
  EXPECT_EQ(s.match({tp, user}), 1);
  EXPECT_EQ(s.match({nccl, user}), 2);
  EXPECT_EQ(s.match({}), -1);
}
