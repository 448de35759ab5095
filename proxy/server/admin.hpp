// The `ringproxy adm` client side of the admin socket (the server side is
// Server::admin_command and the admin thread in server.cpp).
#pragma once

#include <string>
#include <vector>

namespace ringproxy {

inline constexpr int kAdmExitRefused = 1;      // the command was refused (ERR reply)
inline constexpr int kAdmExitUnreachable = 3;  // no ringproxy answers on the socket

// Sends one command, prints the reply (stdout, or stderr for an error); returns the exit code.
int admin_client(const std::string& socket_path, const std::vector<std::string>& words);

}  // namespace ringproxy
