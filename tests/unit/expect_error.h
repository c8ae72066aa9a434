// expect_error(fn, parts): `fn` must throw a kiln::Error whose message contains every part.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "kiln/error.h"

namespace kiln::testing {

template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
  }
}

template <class F>
void expect_error(F&& fn, const std::string& part) {
  expect_error(std::forward<F>(fn), {part});
}

}  // namespace kiln::testing
