// The request as the lookup step and cache delivery see it (lookup.cpp,
// cache_delivery.cpp); kept by the session.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ringproxy/cache/cache.hpp"
#include "ringproxy/http/http.hpp"

namespace ringproxy {

// The request as the cache sees it. A hit is looked up and planned while the parsed
// head is alive, so req views the head's bytes; a request that outlives them (miss,
// wait, grace refresh, pass) copies them first (own()). Kept by the session across
// requests, so its vectors and strings are allocated once.
struct CacheRequest {
  std::string method, host, url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string fetch_head;  // backend request of a miss (GET, no conditionals, no Range)
  std::string pass_head;   // backend request as a pass
  cache::Request req;
  bool owned = false;
  void view(const http::RequestHead& h) {
    req.method = h.method_name;
    const http::Header* host_field = h.headers.find(http::FieldId::Host);
    req.host = host_field ? host_field->value : std::string_view();
    req.url = h.target;
    req.headers.clear();
    for (const http::Header& x : h.headers) req.headers.emplace_back(x.name, x.value);
    fetch_head.clear();
    pass_head.clear();
    owned = false;
  }
  void own() {
    if (owned) return;
    method.assign(req.method);
    host.assign(req.host);
    url.assign(req.url);
    headers.resize(req.headers.size());
    for (std::size_t i = 0; i < headers.size(); ++i) {
      headers[i].first.assign(req.headers[i].first);
      headers[i].second.assign(req.headers[i].second);
    }
    req.method = method;
    req.host = host;
    req.url = url;
    for (std::size_t i = 0; i < headers.size(); ++i) req.headers[i] = {headers[i].first, headers[i].second};
    owned = true;
  }
};

}  // namespace ringproxy
