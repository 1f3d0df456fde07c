#include "hipformers/core/utf8.h"

#include "hipformers/core/error.h"

namespace hipformers::utf8 {
namespace {

// Length of the well-formed sequence at `pos`, or 0 if it is ill-formed. When
// ill-formed, `*maximal_subpart` is the length of the longest prefix that could
// begin a well-formed sequence (at least 1), per Unicode "maximal subpart"
// replacement (the policy Rust and Python both use).
std::size_t well_formed_length(std::string_view s, std::size_t pos, std::size_t* maximal_subpart) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char b0 = byte(pos);
  std::size_t n = s.size() - pos;
  *maximal_subpart = 1;
  if (b0 < 0x80) return 1;
  unsigned char lo = 0x80, hi = 0xBF;
  std::size_t len;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // excludes UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (std::size_t i = 1; i < len; ++i) {
    if (i >= n) return 0;
    unsigned char b = byte(pos + i);
    unsigned char l = (i == 1) ? lo : 0x80, h = (i == 1) ? hi : 0xBF;
    if (b < l || b > h) return 0;
    *maximal_subpart = i + 1;
  }
  return len;
}

}  // namespace

bool is_valid(std::string_view text, std::size_t* bad_offset) {
  std::size_t pos = 0, subpart;
  while (pos < text.size()) {
    // Fast path for ASCII runs.
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    std::size_t len = well_formed_length(text, pos, &subpart);
    if (len == 0) {
      if (bad_offset) *bad_offset = pos;
      return false;
    }
    pos += len;
  }
  return true;
}

void require_valid(std::string_view text, const std::string& what) {
  std::size_t bad = 0;
  if (!is_valid(text, &bad)) {
    throw_invalid(what + ": invalid UTF-8 at byte offset " + std::to_string(bad));
  }
}

char32_t decode(std::string_view text, std::size_t& pos) {
  unsigned char b0 = static_cast<unsigned char>(text[pos]);
  std::size_t len = sequence_length(b0);
  if (len > text.size() - pos) len = 1;
  char32_t cp;
  switch (len) {
    case 1: cp = b0; break;
    case 2: cp = b0 & 0x1F; break;
    case 3: cp = b0 & 0x0F; break;
    default: cp = b0 & 0x07; break;
  }
  for (std::size_t i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += len;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(char32_t cp) {
  std::string s;
  append(s, cp);
  return s;
}

std::string from_bytes_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0, subpart;
  while (pos < bytes.size()) {
    std::size_t len = well_formed_length(bytes, pos, &subpart);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      pos += subpart;
    } else {
      out.append(bytes.data() + pos, len);
      pos += len;
    }
  }
  return out;
}

std::size_t count_code_points(std::string_view text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace hipformers::utf8
