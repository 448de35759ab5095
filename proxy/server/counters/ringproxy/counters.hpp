// ringproxy's counter groups, declared from the .def lists beside this header with the
// library's one mechanism (ringlog/counter_group.hpp): MAIN (process-wide) and VBE (one
// group per backend, ident = the backend's name). The parts of the proxy that count
// (server, cache, tunnels) include this header and nothing else of the server.
//   auto main = stats.add_group(ringproxy::counters::main::kKind, "", ringproxy::counters::main::kDefs);
//   main.add(ringproxy::counters::main::client_req);
#pragma once

#define RINGLOG_GROUP_NAMESPACE ringproxy::counters::main
#define RINGLOG_GROUP_KIND "MAIN"
#define RINGLOG_GROUP_LIST "ringproxy/counters_main.def"
#include "ringlog/counter_group.hpp"

#define RINGLOG_GROUP_NAMESPACE ringproxy::counters::vbe
#define RINGLOG_GROUP_KIND "VBE"
#define RINGLOG_GROUP_LIST "ringproxy/counters_vbe.def"
#include "ringlog/counter_group.hpp"
