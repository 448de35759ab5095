// The ringproxy HTTP/1.1 codec in one include: heads, parsers, chunked coding, writers.
#pragma once

#include "ringproxy/http/chunked.hpp"
#include "ringproxy/http/message.hpp"
#include "ringproxy/http/parser.hpp"
#include "ringproxy/http/serialize.hpp"
