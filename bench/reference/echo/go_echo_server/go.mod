module lionet.local/reference/go_echo_server

go 1.19
