#pragma once
namespace kiln {
inline constexpr const char* kVersion = "0.1.0";  // kiln's one version: CMakeLists.txt reads it from here
const char* version();
}  // namespace kiln
