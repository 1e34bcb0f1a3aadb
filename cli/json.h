// The two JSON value spellings the tool's result files need (they are written
// by hand: flat objects of strings and numbers).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace halcaps::cli {

// A quoted JSON string; control characters become spaces.
inline std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
    return out + "\"";
}

// A JSON number with 6 significant digits; null for NaN and infinities.
inline std::string json_number(double x) {
    if (!std::isfinite(x)) return "null";
    char text[40];
    std::snprintf(text, sizeof text, "%.6g", x);
    return text;
}

}  // namespace halcaps::cli
