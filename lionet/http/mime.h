// lionet/http/mime.h: the Content-Type of a file from its extension (a small built-in table
// of the types a web root usually holds).
//
// Owns: the table only. Must not: look at file contents (no sniffing) or allocate.
#pragma once
#include <string_view>

namespace lionet::http {

// "index.html" -> "text/html; charset=utf-8"; case-insensitive extension; unknown or no
// extension -> "application/octet-stream". The view points into static storage.
std::string_view mime_type_for(std::string_view path) noexcept;

}  // namespace lionet::http
