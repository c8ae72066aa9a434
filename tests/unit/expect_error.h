// expect_error(fn, parts[, absent]): `fn` must throw a kiln::Error whose message contains every
// part (and none of `absent`).
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "kiln/error.h"

namespace kiln::testing {

// As above, and no part of `absent` is in the message either.
template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts, std::initializer_list<std::string> absent) {
  try {
    fn();
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    for (const auto& p : absent) EXPECT_EQ(msg.find(p), std::string::npos) << "unexpected '" << p << "' in: " << msg;
  }
}

template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  expect_error(std::forward<F>(fn), parts, {});
}

template <class F>
void expect_error(F&& fn, const std::string& part) {
  expect_error(std::forward<F>(fn), {part});
}

}  // namespace kiln::testing
