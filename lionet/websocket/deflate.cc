// lionet/websocket/deflate.cc: permessage-deflate negotiation and the zlib streams (see
// deflate.h).
#include "lionet/websocket/deflate.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "lionet/http/headers.h"

namespace lionet::websocket {
namespace {
constexpr std::string_view kName = "permessage-deflate";
constexpr size_t kGrow = 64 * 1024;  // output growth step (and the first size)
constexpr char kTail[4] = {0x00, 0x00, static_cast<char>(0xFF), static_cast<char>(0xFF)};

// One extension offer or response element: its name and parameters.
struct Param {
  std::string_view name, value;
  bool has_value = false;
};
struct Element {
  std::string_view name;
  std::vector<Param> params;
};

// Splits a field value into elements ("a; x=1, b" -> {a {x=1}}, {b}). Quoted values lose
// their quotes (RFC 7692 allows a quoted-string; none of its values needs escaping).
std::vector<Element> parse_elements(std::string_view value) {
  std::vector<Element> out;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    std::string_view item = value.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? value.size() + 1 : comma + 1;
    Element e;
    size_t p = 0;
    bool first = true;
    while (p <= item.size()) {
      size_t semi = item.find(';', p);
      std::string_view part =
          http::trim_ows(item.substr(p, semi == std::string_view::npos ? std::string_view::npos : semi - p));
      p = semi == std::string_view::npos ? item.size() + 1 : semi + 1;
      if (first) {
        e.name = part;
        first = false;
        continue;
      }
      Param prm;
      size_t eq = part.find('=');
      prm.name = http::trim_ows(part.substr(0, eq));
      if (eq != std::string_view::npos) {
        prm.has_value = true;
        prm.value = http::trim_ows(part.substr(eq + 1));
        if (prm.value.size() >= 2 && prm.value.front() == '"' && prm.value.back() == '"') {
          prm.value = prm.value.substr(1, prm.value.size() - 2);
        }
      }
      e.params.push_back(prm);
    }
    if (!e.name.empty()) out.push_back(std::move(e));
  }
  return out;
}

// "8".."15" -> 8..15, else 0.
int window_value(std::string_view v) noexcept {
  if (v.size() == 1 && v[0] >= '8' && v[0] <= '9') return v[0] - '0';
  if (v.size() == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5') return 10 + (v[1] - '0');
  return 0;
}

// The parameters of one permessage-deflate element, checked for RFC 7692's grammar: known
// names, no repeats, values where allowed. client_max_window_bits may come without a value
// (an offer saying "you may limit me"): then client_bits is -1.
struct Parsed {
  bool server_nct = false, client_nct = false;
  int server_bits = 0;  // 0: absent
  int client_bits = 0;  // 0: absent, -1: present without a value
};
bool parse_params(const Element& e, Parsed* out) {
  bool seen[4] = {};
  for (const Param& p : e.params) {
    int i;
    if (http::iequals(p.name, "server_no_context_takeover")) i = 0;
    else if (http::iequals(p.name, "client_no_context_takeover")) i = 1;
    else if (http::iequals(p.name, "server_max_window_bits")) i = 2;
    else if (http::iequals(p.name, "client_max_window_bits")) i = 3;
    else return false;
    if (seen[i]) return false;
    seen[i] = true;
    switch (i) {
      case 0:
      case 1:
        if (p.has_value) return false;
        (i == 0 ? out->server_nct : out->client_nct) = true;
        break;
      case 2:
        if (!p.has_value || !(out->server_bits = window_value(p.value))) return false;
        break;
      default:
        if (!p.has_value) {
          out->client_bits = -1;
        } else if (!(out->client_bits = window_value(p.value))) {
          return false;
        }
    }
  }
  return true;
}

int clamp_window(int bits, int lowest) noexcept { return std::clamp(bits, lowest, 15); }

// Resizes s to n (> s.size()) keeping s[0..filled), with a capacity of exactly n: resize()
// alone may double the capacity, which would let a message reserve twice its limit.
void grow_exactly(std::string& s, size_t filled, size_t n) {
  if (n <= s.capacity()) {
    s.resize(n);
    return;
  }
  std::string t;
  t.reserve(n);
  t.assign(s.data(), filled);
  t.resize(n);
  s.swap(t);
}
}  // namespace

std::optional<DeflateParams> negotiate_deflate(const std::vector<std::string_view>& offers, const DeflateOptions& ours,
                                               std::string* response) {
  if (!ours.enabled) return std::nullopt;
  const int our_server = clamp_window(ours.server_max_window_bits, 9);
  const int our_client = clamp_window(ours.client_max_window_bits, 9);
  for (std::string_view field : offers) {
    for (const Element& e : parse_elements(field)) {
      if (!http::iequals(e.name, kName)) continue;
      Parsed o;
      if (!parse_params(e, &o)) continue;
      if (o.server_bits == 8) continue;  // we cannot compress with a 256-byte window
      DeflateParams a;
      a.server_no_context_takeover = o.server_nct || ours.server_no_context_takeover;
      a.client_no_context_takeover = o.client_nct || ours.client_no_context_takeover;
      a.server_max_window_bits = std::min(o.server_bits ? o.server_bits : 15, our_server);
      // The client's window is limited only through our response (RFC 7692 7.1.2.2): a value
      // in its offer is a hint we take, so we inflate with the window it will use.
      a.client_max_window_bits = 15;
      if (o.client_bits > 0) a.client_max_window_bits = std::min(o.client_bits, our_client);
      if (o.client_bits == -1) a.client_max_window_bits = our_client;
      std::string r(kName);
      if (a.server_no_context_takeover) r += "; server_no_context_takeover";
      if (a.client_no_context_takeover) r += "; client_no_context_takeover";
      if (a.server_max_window_bits < 15 || o.server_bits)
        r += "; server_max_window_bits=" + std::to_string(a.server_max_window_bits);
      if (a.client_max_window_bits < 15) {
        r += "; client_max_window_bits=" + std::to_string(a.client_max_window_bits);
      }
      *response = std::move(r);
      return a;
    }
  }
  return std::nullopt;
}

std::string deflate_offer(const DeflateOptions& ours) {
  std::string r(kName);
  if (ours.server_no_context_takeover) r += "; server_no_context_takeover";
  if (ours.client_no_context_takeover) r += "; client_no_context_takeover";
  const int server_bits = std::clamp(ours.server_max_window_bits, 8, 15);
  if (server_bits < 15) r += "; server_max_window_bits=" + std::to_string(server_bits);
  const int client_bits = clamp_window(ours.client_max_window_bits, 9);
  r += client_bits < 15 ? "; client_max_window_bits=" + std::to_string(client_bits) : "; client_max_window_bits";
  return r;
}

std::optional<DeflateAnswer> accept_deflate_response(const std::vector<std::string_view>& fields,
                                                     const DeflateOptions& ours, const char** why) {
  DeflateAnswer ans;
  std::vector<Element> all;
  for (std::string_view f : fields)
    for (Element& e : parse_elements(f)) all.push_back(std::move(e));
  if (all.empty()) return ans;
  if (!ours.enabled || all.size() != 1 || !http::iequals(all[0].name, kName)) {
    *why = "the server chose an extension that was not offered";
    return std::nullopt;
  }
  Parsed p;
  if (!parse_params(all[0], &p) || p.client_bits == -1) {
    *why = "the server's permessage-deflate parameters are malformed";
    return std::nullopt;
  }
  const int asked_server = std::clamp(ours.server_max_window_bits, 8, 15);
  const int offered_client = clamp_window(ours.client_max_window_bits, 9);
  if (p.server_bits > asked_server || (asked_server < 15 && p.server_bits == 0)) {
    *why = "the server's window is larger than the one asked for";
    return std::nullopt;
  }
  if (p.client_bits > offered_client) {
    *why = "the server allowed our window above the one offered";
    return std::nullopt;
  }
  if (p.client_bits == 8) {
    *why = "the server asked for an 8-bit client window, which zlib cannot compress with";
    return std::nullopt;
  }
  if (ours.server_no_context_takeover && !p.server_nct) {
    *why = "the server did not agree to server_no_context_takeover";
    return std::nullopt;
  }
  ans.accepted = true;
  ans.params.server_no_context_takeover = p.server_nct;
  ans.params.client_no_context_takeover = p.client_nct || ours.client_no_context_takeover;
  ans.params.server_max_window_bits = p.server_bits ? p.server_bits : 15;
  ans.params.client_max_window_bits = p.client_bits ? p.client_bits : offered_client;
  return ans;
}

// ---- the zlib streams ----

struct Deflater::Impl {
  z_stream z{};
};

Deflater::Deflater(int window_bits, int level, bool no_context_takeover) : no_context_takeover_(no_context_takeover) {
  auto impl = std::make_unique<Impl>();
  if (deflateInit2(&impl->z, std::clamp(level, 1, 9), Z_DEFLATED, -clamp_window(window_bits, 9), 8,
                   Z_DEFAULT_STRATEGY) == Z_OK) {
    impl_ = std::move(impl);
  }
}

Deflater::~Deflater() {
  if (impl_) deflateEnd(&impl_->z);
}

bool Deflater::compress(std::string_view in, std::string* out) {
  if (!impl_) return false;
  z_stream& z = impl_->z;
  out->resize(std::max<size_t>(deflateBound(&z, in.size()) + 16, 64));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  size_t used = 0;
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(out->data() + used);
    z.avail_out = static_cast<uInt>(out->size() - used);
    const int r = deflate(&z, Z_SYNC_FLUSH);
    used = out->size() - z.avail_out;
    if (r != Z_OK && r != Z_BUF_ERROR) return false;
    // Done when the input is taken and the flush fit (room was left over).
    if (z.avail_in == 0 && z.avail_out != 0) break;
    out->resize(out->size() * 2);
  }
  // A sync flush ends with an empty stored block, 00 00 FF FF: RFC 7692 7.2.1 removes it.
  if (used >= 4 && std::memcmp(out->data() + used - 4, kTail, 4) == 0) used -= 4;
  // An empty message right after another flush makes zlib emit nothing at all (a second sync
  // flush with no input is a no-op), and the peer's 00 00 FF FF alone is no block: send the
  // 0x00 of an empty stored block's header instead (RFC 7692 7.2.3.6).
  if (used == 0) (*out)[used++] = 0;
  out->resize(used);
  if (no_context_takeover_) deflateReset(&z);
  return true;
}

struct Inflater::Impl {
  z_stream z{};
};

Inflater::Inflater(int window_bits, bool no_context_takeover) : no_context_takeover_(no_context_takeover) {
  auto impl = std::make_unique<Impl>();
  if (inflateInit2(&impl->z, -std::clamp(window_bits, 8, 15)) == Z_OK) impl_ = std::move(impl);
}

Inflater::~Inflater() {
  if (impl_) inflateEnd(&impl_->z);
}

void Inflater::reset() noexcept {
  if (impl_) inflateReset(&impl_->z);
}

Inflater::Status Inflater::feed(const char* in, size_t n, std::string& out, size_t* filled, uint64_t limit) {
  if (!impl_) return Status::kBadData;
  z_stream& z = impl_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
  z.avail_in = static_cast<uInt>(n);
  const size_t cap = static_cast<size_t>(std::min<uint64_t>(limit, SIZE_MAX));
  for (;;) {
    // Output goes into out, grown geometrically up to exactly `cap`; once out is full at the
    // cap, into a small probe: a byte there proves the message too big, and out never holds
    // (or reserves) more than the cap.
    char probe[64];
    const bool probing = out.size() == *filled && *filled >= cap;
    if (!probing && out.size() == *filled)
      grow_exactly(out, *filled, std::min(cap, *filled + std::max(kGrow, *filled)));
    if (probing) {
      z.next_out = reinterpret_cast<Bytef*>(probe);
      z.avail_out = sizeof probe;
    } else {
      z.next_out = reinterpret_cast<Bytef*>(out.data() + *filled);
      z.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - *filled, UINT32_MAX));
    }
    const uInt before = z.avail_out;
    const int r = inflate(&z, Z_SYNC_FLUSH);
    const size_t produced = before - z.avail_out;
    if (probing && produced) return Status::kTooBig;
    if (!probing) *filled += produced;
    if (r == Z_STREAM_END) {
      // A block with BFINAL set ended the stream; what follows starts a new one.
      inflateReset(&z);
      if (z.avail_in == 0) return Status::kOk;
      continue;
    }
    if (r == Z_BUF_ERROR) {
      if (z.avail_out != 0) return Status::kOk;  // no progress possible: the input is used up
      continue;  // output full: grow (above) and go on
    }
    if (r != Z_OK) return Status::kBadData;
    if (z.avail_in == 0 && z.avail_out != 0) return Status::kOk;
  }
}

Inflater::Status Inflater::finish(std::string& out, size_t* filled, uint64_t limit) {
  const Status s = feed(kTail, sizeof kTail, out, filled, limit);
  if (s == Status::kOk && no_context_takeover_) reset();
  return s;
}
}  // namespace lionet::websocket
