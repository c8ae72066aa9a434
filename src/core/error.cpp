#include "kiln/error.h"

#include "kiln/version.h"

namespace kiln {
namespace detail {
void throw_error(const char* /*file*/, int /*line*/, const std::string& msg) { throw Error(msg); }
}  // namespace detail
const char* version() { return kVersion; }
}  // namespace kiln
