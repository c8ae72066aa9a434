// kiln::Error and KILN_CHECK: every user-facing failure is a kiln::Error whose
// message names the op, the shapes/dtypes involved and what was expected.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
inline void str_append(std::ostringstream&) {}
template <class T, class... Rest>
void str_append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  str_append(os, rest...);
}
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  str_append(os, args...);
  return os.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace kiln

// KILN_CHECK(cond, parts...): throws kiln::Error with the parts streamed together.
#define KILN_CHECK(cond, ...)                                                      \
  do {                                                                             \
    if (!(cond)) [[unlikely]]                                                      \
      ::kiln::detail::throw_error(__FILE__, __LINE__, ::kiln::detail::str_cat(__VA_ARGS__)); \
  } while (0)

#define KILN_FAIL(...) ::kiln::detail::throw_error(__FILE__, __LINE__, ::kiln::detail::str_cat(__VA_ARGS__))
